"""Repositories for the follow-up finder, served by a sandbox with real git behind them: each PR is a branch whose
files GitHub's way lists (three-dot diff, git's default diff driver, blobs by SHA), so the finder reads patches and
file texts as it would on GitHub.

`sglang_world`: SGLang's track-boundary incident (tests/fixtures/sglang/followup_incident.json) with its follow-up
#29792 retitled "[HiCache] Correct lookahead bookkeeping for hybrid models" and 50 open PRs updated after it, among
over 200 open PRs; beside it the incident's real decoys and three made to fool a reading of hunk headers and titles.
`init_world`: a culprit that changes `Scheduler.__init__`, a fix that changes it too, a PR that changes
`Worker.__init__` in the same file.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

from sandbox import SandboxState
from tests.support.incident import BOT, incident

BRP = "python/sglang/srt/managers/scheduler_components/batch_result_processor.py"
RETITLED = "[HiCache] Correct lookahead bookkeeping for hybrid models"

# batch_result_processor.py abridged: the methods the incident's recorded patches name, in their order
BRP_BASE = '''"""Process the results of a forward batch."""

from sglang.srt.managers.schedule_batch import Req, ScheduleBatch


class BatchResultProcessor:
    def process_batch_result_prefill(self, batch: ScheduleBatch, result):
        for i, req in enumerate(batch.reqs):
            next_token_id = result.next_token_ids[i]
            self._apply_prefill_grammar(req=req, next_token_id=next_token_id)

    def _handle_finish_state_updated_req(self, req: Req, batch: ScheduleBatch, i: int):
        if req.finished():
            self.tree_cache.cache_finished_req(req)

    def _mamba_prefix_cache_update(self, req: Req, batch: ScheduleBatch, result, i: int):
        at_boundary, track_seqlen = self._mamba_check_track_boundary(req, batch, result, i)
        if at_boundary:
            req.mamba_last_track_seqlen = track_seqlen

    def _mamba_check_track_boundary(self, req, batch, result, i):
        """Returns (at_boundary, track_seqlen)."""
        interval = self.mamba_track_interval
        if batch.mamba_track_mask_cpu[i]:
            if req.kv_committed_len % interval == 0:
                return True, req.kv_committed_len
        return False, None

    def mamba_lazy_post_decode_at_boundary(self, req: Req, batch: ScheduleBatch):
        """Post-decode cleanup at a lazy-mode track boundary."""
        if req.finished():
            req.mamba_lazy_is_insert = False
'''


def _swap(text: str, old: str, new: str) -> str:
    assert old in text, old
    return text.replace(old, new, 1)


CULPRIT = _swap(
    BRP_BASE,
    "            if req.kv_committed_len % interval == 0:\n                return True, req.kv_committed_len\n",
    "            seq_len = len(req.origin_input_ids) + len(req.output_ids) - 1\n"
    "            if seq_len % interval == 0:\n                return True, seq_len\n",
)
FOLLOWUP = _swap(
    _swap(
        BRP_BASE,
        "            if req.kv_committed_len % interval == 0:\n                return True, req.kv_committed_len\n",
        "            lookahead = req.decode_batch_idx - batch.mamba_decode_batch_idx_cpu[i]\n"
        "            if (req.kv_committed_len - lookahead) % interval == 0:\n"
        "                return True, req.kv_committed_len - lookahead\n",
    ),
    "        if req.finished():\n            self.tree_cache",
    "        lookahead = 0\n        if req.finished():\n            self.tree_cache",
)
SAME_WORDS = _swap(  # another function, under a title that shares most of the culprit's words
    BRP_BASE,
    "        if at_boundary:\n            req.mamba_last_track_seqlen = track_seqlen\n",
    "        if at_boundary and track_seqlen is not None:\n            req.mamba_last_track_seqlen = track_seqlen\n",
)
ADDED_AFTER = _swap(  # a new method right after the culprit's: its diff starts with a `+` blank line
    BRP_BASE,
    "        return False, None\n",
    "        return False, None\n\n    def _mamba_track_debug_state(self, req):\n"
    "        return {'seqlen': req.mamba_last_track_seqlen, 'idx': req.mamba_last_track_idx}\n",
)
SPEC = _swap(  # like #30437: a method added before the culprit's, a change in _mamba_prefix_cache_update
    BRP_BASE,
    "        at_boundary, track_seqlen = self._mamba_check_track_boundary(req, batch, result, i)\n",
    "        at_boundary, track_seqlen = self._mamba_check_track_boundary(req, batch, result, i)\n"
    "        if not batch.spec_algorithm.is_none():\n"
    "            self._mamba_lazy_spec_update(req, batch, i, at_boundary, track_seqlen)\n            return\n",
)
SPEC = _swap(
    SPEC,
    "    def _mamba_check_track_boundary(",
    "    def _mamba_lazy_spec_update(self, req, batch, i, crossed, track_seqlen):\n"
    "        req.mamba_last_track_idx = batch.mamba_track_buffer_indices[i]\n\n"
    "    def _mamba_check_track_boundary(",
)
GRAMMAR = _swap(  # like #31488
    BRP_BASE,
    "            self._apply_prefill_grammar(req=req, next_token_id=next_token_id)\n",
    "            self._apply_prefill_grammar(\n                req=req,\n                next_token_id=next_token_id,\n"
    "                already_advanced=result.grammar_advanced,\n            )\n",
)


@dataclass
class Pull:
    number: int
    title: str
    author: str
    files: dict[str, str]  # path -> its text on the PR's branch
    created_at: str
    updated_at: str
    body: str = ""
    state: str = "open"
    merged_at: str | None = None
    recorded: list[dict] = field(default_factory=list)  # files as recorded (no branch): other files only


def _git(repo: Path, *args: str, stdin: str | None = None, index: Path | None = None) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@example.com"}
    env.update(GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@example.com")
    if index:
        env["GIT_INDEX_FILE"] = str(index)
    out = subprocess.run(["git", "-C", str(repo), *args], input=stdin, capture_output=True, text=True, env=env)
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()


def _commit(repo: Path, parent: str | None, files: dict[str, str], tmp: Path, message: str) -> str:
    index = tmp / "index"
    index.unlink(missing_ok=True)
    if parent:
        _git(repo, "read-tree", parent, index=index)
    for path, text in files.items():
        blob = _git(repo, "hash-object", "-w", "--stdin", stdin=text)
        _git(repo, "update-index", "--add", "--cacheinfo", f"100644,{blob},{path}", index=index)
    tree = _git(repo, "write-tree", index=index)
    return _git(repo, "commit-tree", tree, *(["-p", parent] if parent else []), "-m", message)


def seed_world(state: SandboxState, slug: str, base: dict[str, str], pulls: list[Pull], tmp: Path) -> str:
    """The repository `slug` with `base` on main and each pull as a branch off it (a merged one: main moves to it)."""
    repo = state.create_repo(slug)
    state.add_user(BOT, token=f"sandbox-token-{BOT}")
    state.set_permission(slug, BOT, "write")
    tmp.mkdir(parents=True, exist_ok=True)
    root = _commit(repo.path, None, base, tmp, "base")
    _git(repo.path, "update-ref", "refs/heads/main", root)
    for p in pulls:
        head = f"{p.author}/pr-{p.number}"
        sha = _commit(repo.path, root, p.files, tmp, p.title) if p.files else None
        if sha:
            _git(repo.path, "update-ref", f"refs/heads/{head}", sha)
        merged = p.merged_at is not None
        if merged and sha:
            _git(repo.path, "update-ref", "refs/heads/main", sha)
        issue = state.add_pull(
            slug,
            number=p.number,
            title=p.title,
            body=p.body,
            user=p.author,
            head=head,
            merged=merged,
            merged_at=p.merged_at,
            merge_commit_sha=sha if merged else None,
            head_sha=sha if merged else None,
            base_sha=root if merged else None,
            created_at=p.created_at,
            state=p.state,
        )
        issue.updated_at = p.updated_at
        if not p.files:
            issue.pull.files = p.recorded
    return slug


def _recorded(number: int) -> list[dict]:
    pull = next(p for p in incident()["pulls"] if p["number"] == number)
    return pull["files"]


def crowd(n: int, newer: int, first: int = 40000) -> list[Pull]:
    """`n` open PRs of other files, `newer` of them opened after 2026-07-17 (the follow-up's last update)."""
    words = "router kernel tokenizer cache grammar lora quant spec ep dp pd moe attention sampler server".split()
    out = []
    for i in range(n):
        day = f"2026-07-{18 + i % 10:02d}T{i % 24:02d}:00:00Z" if i < newer else f"2026-07-{1 + i % 15:02d}T00:00:00Z"
        out.append(
            Pull(
                first + i,
                f"[{words[i % len(words)].upper()}] Improve {words[(i * 7) % len(words)]} handling ({i})",
                f"dev{i % 40}",
                {},
                day if i < newer else "2026-06-01T00:00:00Z",
                day,
                body="Routine change.",
                recorded=[
                    {
                        "filename": f"python/sglang/srt/other/mod_{i}.py",
                        "additions": 1,
                        "deletions": 0,
                        "patch": "@@ -1 +1,2 @@\n x = 1\n+y = 2",
                    }
                ],
            )
        )
    return out


def sglang_world(
    state: SandboxState, tmp: Path, *, crowd_size: int = 230, newer: int = 50, leave_out=(), retitled: bool = True
) -> str:
    """The incident's repository: see the module's docstring (`retitled` False: #29792 under its recorded title).
    The follow-up was last updated 2026-07-17T12:00."""
    data = {p["number"]: p for p in incident()["pulls"]}

    def real(n: int, files: dict[str, str], updated: str, **kw) -> Pull:
        p = data[n]
        return Pull(n, p["title"], p["author"], files, p["created_at"], updated, body=p["body"], state=p["state"], **kw)

    pulls = [
        real(31369, {BRP: CULPRIT}, "2026-07-17T00:00:00Z", merged_at=data[31369]["merged_at"]),
        Pull(
            29792,
            RETITLED if retitled else data[29792]["title"],
            data[29792]["author"],
            {BRP: FOLLOWUP},
            data[29792]["created_at"],
            "2026-07-17T12:00:00Z",
            body=data[29792]["body"],
        ),
        real(30437, {BRP: SPEC}, "2026-07-16T00:00:00Z"),
        real(31488, {BRP: GRAMMAR}, "2026-07-16T01:00:00Z"),
        real(32589, {}, "2026-07-16T02:00:00Z", recorded=_recorded(32589)),
        real(33118, {}, "2026-07-16T03:00:00Z", recorded=_recorded(33118)),
        real(31622, {}, "2026-07-17T20:00:00Z", recorded=_recorded(31622)),
        Pull(
            34001,
            "Fix mamba seqlen in prefix-cache update under overlap scheduler",
            "decoy-words",
            {BRP: SAME_WORDS},
            "2026-07-10T00:00:00Z",
            "2026-07-16T04:00:00Z",
        ),
        Pull(
            34002,
            "[Mamba] Add a debug view of the tracked state",
            "decoy-after",
            {BRP: ADDED_AFTER},
            "2026-07-10T00:00:00Z",
            "2026-07-16T05:00:00Z",
        ),
        *crowd(crowd_size, newer),
    ]
    return seed_world(
        state, "sgl-project/sglang", {BRP: BRP_BASE}, [p for p in pulls if p.number not in leave_out], tmp
    )


SCHEDULER = "mini/scheduler.py"
SCHED_BASE = """class Scheduler:
    def __init__(self, interval):
        self.interval = interval
        self.queue = []

    def run(self):
        return len(self.queue)


class Worker:
    def __init__(self, device):
        self.device = device
        self.busy = False

    def step(self):
        return self.busy
"""


def init_world(state: SandboxState, tmp: Path, *, leave_out=()) -> str:
    """A culprit changing `Scheduler.__init__` (#10), its fix (#11), a PR changing `Worker.__init__` (#12) and one
    changing `Scheduler.run` (#13): git's default driver heads each hunk with the class's line."""
    pulls = [
        Pull(
            10,
            "Scheduler: start with a bounded queue",
            "alice",
            {SCHEDULER: _swap(SCHED_BASE, "self.queue = []", "self.queue = [None] * interval")},
            "2026-07-01T00:00:00Z",
            "2026-07-02T00:00:00Z",
            merged_at="2026-07-02T00:00:00Z",
            state="closed",
        ),
        Pull(
            11,
            "Keep an empty queue at start",
            "bob",
            {SCHEDULER: _swap(SCHED_BASE, "self.queue = []", "self.queue = list()")},
            "2026-07-03T00:00:00Z",
            "2026-07-04T00:00:00Z",
        ),
        Pull(
            12,
            "Scheduler start: a bounded queue for the worker",
            "carol",
            {SCHEDULER: _swap(SCHED_BASE, "self.busy = False", "self.busy = None")},
            "2026-07-03T00:00:00Z",
            "2026-07-05T00:00:00Z",
        ),
        Pull(
            13,
            "Count the queue once",
            "dan",
            {SCHEDULER: _swap(SCHED_BASE, "return len(self.queue)", "return sum(1 for _ in self.queue)")},
            "2026-07-03T00:00:00Z",
            "2026-07-05T01:00:00Z",
        ),
    ]
    return seed_world(state, "mini/bot", {SCHEDULER: SCHED_BASE}, [p for p in pulls if p.number not in leave_out], tmp)
