"""Build the scenario: a git repository whose squash-merge history hides the track-boundary mislabel.

    build(Path("/tmp/incident"), commits=60, seed=0)  ->  Scenario; /tmp/incident/repo, /tmp/incident/scenario.json

The history is written with one `git fast-import` stream; identities, dates and contents all come
from the seed, so a seed always gives the same commit ids.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
import tempfile
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path

from runners.spec import TestRun

from . import history, pools
from .edits import Change, Tree
from .history import AUTHORS, CULPRIT_AUTHOR, FOLLOWUP_AUTHOR
from .slowdown import perf_tree, slowdown_change

THRESHOLD = 0.002
METRIC = "avg_kl_div"
TRACK_INTERVAL = 8
REPO_SLUG = "mini-sglang/mini-sglang"
FIRST_VERSION = "0.3.0"
COMMITTER = "GitHub <noreply@github.com>"
EPOCH = datetime(2026, 2, 2, 9, 0, tzinfo=UTC)
MODEL = "mini-sglang/tiny-mamba-64"
# The nightly's own KL test, as its run_suite runs it (from test/, with the nightly's environment); the bisect steps
# run this file of each commit, narrowed to the cases the red run failed. A commit whose package does not compile
# does not build: untestable.
TEST_FILE = "nightly/test_kl_decode_cache_hit.py"
TEST_CWD = "test"
TEST_ENV = {"MINI_SGLANG_IS_IN_CI": "true"}
TEST_BUILD = ["python3", "-m", "compileall", "-q", "-f", "mini_sglang"]  # -f: a stale .pyc must not hide an error
METRIC_REGEX = r"avg_kl_div=(?P<value>[0-9.eE+-]+)"
KL_CASE = "TestMambaTrackInterval8.test_input_output_logprobs_match_decode_cache_hit"


@dataclass
class Scenario:
    dir: Path
    repo: Path
    seed: int
    commits: int
    flake_rate: float
    good: str  # the first commit
    bad: str  # HEAD of main
    culprit: str  # for tests only: what a bisection must find
    culprit_pr: int
    culprit_index: int  # position in `shas` (0 = good)
    shas: list[str]  # every commit of main, oldest first
    unbuildable: list[str]
    prs: list[dict]  # one per commit, oldest first: number, title, author, author_name, author_email, body, sha, ...
    followup: dict  # the issue where the proper fix is being worked on; cites the culprit PR
    # the commit that renamed the track-interval server flag (inside the range the demo bisects): index, sha, pr,
    # old and new flag
    flag_rename: dict = field(default_factory=dict)
    # slowdown=True: the commit that makes decode slower (the performance nightly's culprit): index, sha, pr, title
    slowdown: dict = field(default_factory=dict)
    # regressions=2: the second culprit (the nightly's logprob test), for tests only; None with one regression
    second_culprit: str | None = None
    second_culprit_pr: int | None = None
    second_culprit_index: int | None = None
    threshold: float = THRESHOLD
    metric: str = METRIC
    track_interval: int = TRACK_INTERVAL
    repo_slug: str = REPO_SLUG
    default_branch: str = "main"
    test_file: str = TEST_FILE  # the nightly's KL test, relative to test_cwd
    test_cwd: str = TEST_CWD
    schema: int = 2  # 2: the repository's own test file, no probe command

    def own_test(self, python: str | None = None, cases: tuple[str, ...] = (), args: tuple[str, ...] = ()) -> TestRun:
        """The nightly's KL test file as a step runs it at a commit; `python` (default: this interpreter) stands
        for the nightly's `python3`; `args`: the file's own (run_suite passes `-f`)."""
        return TestRun(
            "unittest",
            self.test_file,
            self.test_cwd,
            python or sys.executable,
            args,
            tuple(sorted(TEST_ENV.items())),
            cases,
            None,
            tuple(python or sys.executable if a == "python3" else a for a in TEST_BUILD),
        )

    def test_shell(self) -> str:
        """How to run it by hand in a checkout."""
        env = " ".join(f"{k}={v}" for k, v in TEST_ENV.items())
        return f"cd {self.test_cwd} && {env} PYTHONPATH=.. python3 {self.test_file} -v"

    def pr_for(self, sha: str) -> dict | None:
        return next((pr for pr in self.prs if pr["sha"] == sha), None)

    def to_json(self) -> dict:
        data = asdict(self)
        data["dir"], data["repo"] = str(self.dir), str(self.repo)
        return data

    @classmethod
    def load(cls, path: Path) -> Scenario:
        path = Path(path)
        data = json.loads((path / "scenario.json" if path.is_dir() else path).read_text())
        data["dir"], data["repo"] = Path(data["dir"]), Path(data["repo"])
        return cls(**data)


# -- the plan: which change lands at which position --


@dataclass
class Planned:
    change: Change
    pr: int
    author: int


# Where the demo's nightly runs on schedule (bot/cli/demo_ci.py): the first commit, then every few.
SCHEDULE_EVERY_MIN, SCHEDULE_RUNS = 3, 5


def _rename_position(commits: int, culprit: int, seed: int, taken: set[int], spare: set[int]) -> int:
    """Where the server flag is renamed: inside the range the demo bisects -- after the last scheduled run before
    the culprit (the KL test's last green reading) -- and not next to the culprit; before it if there is room.
    Never on GOOD, the culprit, an unbuildable commit or its fix; on a release or a pin (`spare`), next to the
    culprit or on BAD only if nothing else is free. Drawn apart from the plan's random stream, so every other
    seeded choice stays where it was."""
    every = max(SCHEDULE_EVERY_MIN, commits // SCHEDULE_RUNS)
    last_green = max(p for p in range(0, commits - 1, every) if p < culprit)
    pick = random.Random(f"mamba-track-boundary/{seed}/rename")
    for allowed, gap, last in (
        (lambda i: i not in taken and i not in spare, 2, commits - 1),
        (lambda i: i not in taken, 2, commits - 1),
        (lambda i: i not in taken, 1, commits),  # a tiny history: next to the culprit, or BAD itself
    ):
        before = [i for i in range(last_green + 1, culprit + 1 - gap) if allowed(i)]
        after = [i for i in range(culprit + gap, last) if allowed(i)]
        if before or after:
            return pick.choice(before or after)
    raise ValueError(f"cannot place the server flag rename in a history of {commits}")


def _second_position(commits: int, culprit: int, seed: int, taken: set[int], spare: set[int]) -> int:
    """Where the second regression lands (regressions=2): after the culprit and after a scheduled run that follows
    it when there is room, so that the test it breaks passed in a later run than the culprit's tests did (each test's
    own GOOD); never on a commit the plan already uses, nor BAD. Drawn apart from the plan's random stream."""
    every = max(SCHEDULE_EVERY_MIN, commits // SCHEDULE_RUNS)
    later_runs = [p for p in range(0, commits - 1, every) if p > culprit]
    pick = random.Random(f"mamba-track-boundary/{seed}/second")
    for start in ([later_runs[0] + 1] if later_runs else []) + [culprit + 2]:
        free = [i for i in range(start, commits - 1) if i not in taken and i not in spare and abs(i - culprit) > 1]
        if free:
            return pick.choice(free)
    raise ValueError(f"cannot place a second regression after the culprit in a history of {commits}")


def _slowdown_position(commits: int, seed: int, taken: set[int], spare: set[int]) -> int:
    """Where decode gets slower (slowdown=True): in the middle fifth of the history when it can (so the performance
    nightly has nights on both sides), on a commit the plan leaves to an everyday change. Drawn apart from the plan's
    random stream."""
    pick = random.Random(f"mamba-track-boundary/{seed}/slowdown")
    for low, high in ((commits * 2 // 5, commits * 3 // 5), (2, commits - 2)):
        free = [i for i in range(max(1, low), min(commits - 1, high) + 1) if i not in taken and i not in spare]
        if free:
            return pick.choice(free)
    raise ValueError(f"cannot place the slowdown in a history of {commits}")


def _plan(
    commits: int, seed: int, unbuildable: int, regressions: int = 1, slows: bool = False
) -> tuple[list[Planned], int, list[int], int, int | None, int | None]:
    if commits < 8:
        raise ValueError("--commits must be at least 8 (the culprit is kept out of the first and last 3)")
    rng = random.Random(f"mamba-track-boundary/{seed}")
    culprit = rng.randint(3, commits - 4)

    # Unbuildable commits: never an endpoint, the culprit or its parent; each fixed by the next
    # commit, so two of them are never adjacent.
    candidates = [u for u in range(1, commits - 1) if u not in (culprit - 1, culprit)]
    rng.shuffle(candidates)
    broken: list[int] = []
    for u in candidates:
        if len(broken) == unbuildable:
            break
        if all(abs(u - v) >= 2 for v in broken) and u + 1 != culprit:
            broken.append(u)
    if len(broken) < unbuildable:
        raise ValueError(f"cannot place {unbuildable} unbuildable commits in a history of {commits}")
    broken.sort()
    fixes = {u + 1 for u in broken}

    free = [i for i in range(1, commits) if i != culprit and i not in broken and i not in fixes]
    releases = sorted(rng.sample(free, min(len(free), max(1, commits // 15))))
    # drawn apart from `rng`, so adding them left every other seeded choice where it was
    unpinned = [i for i in free if i not in releases]
    pins = sorted(
        random.Random(f"mamba-track-boundary/{seed}/pins").sample(
            unpinned, min(len(unpinned), len(history.DEPENDENCY_PINS))
        )
    )

    rename = _rename_position(commits, culprit, seed, {0, culprit, *broken, *fixes}, {*releases, *pins})
    second = (
        _second_position(commits, culprit, seed, {0, culprit, rename, *broken, *fixes}, {*releases, *pins})
        if regressions > 1
        else None
    )
    taken = {0, culprit, rename, *broken, *fixes} | ({second} if second is not None else set())
    slow = _slowdown_position(commits, seed, taken, {*releases, *pins}) if slows else None

    numbers = _pr_numbers(commits, rng)
    pool = [c for kind in sorted(pools.pools().items()) for c in kind[1]]
    rng.shuffle(pool)
    version = [int(x) for x in FIRST_VERSION.split(".")]
    plan: list[Planned] = []
    fillers = 0
    broken_changes: dict[int, tuple[Change, object]] = {u: history.broken_pair(k) for k, u in enumerate(broken)}
    for i in range(commits):
        author = rng.randrange(len(AUTHORS))
        if i == 0:
            change = Change(
                "release",
                f"Import mini-sglang v{FIRST_VERSION}",
                "Import the engine: TinyMamba, the Mamba prefix cache with ping-pong track slots, "
                "the overlap scheduler and the HTTP server.",
                lambda tree: None,
            )
        elif i == culprit:
            change, author = history.culprit_change(), CULPRIT_AUTHOR
        elif i == rename:
            change = history.flag_rename_change()
        elif i == second:
            change = history.second_culprit_change()
        elif i == slow:
            change = slowdown_change()
        elif i in broken_changes:
            change = broken_changes[i][0]
        elif i in fixes:
            change = broken_changes[i - 1][1](numbers[i - 1])
        elif i in pins:
            change = history.pins_change(pins.index(i))
        elif i in releases:
            version[2] += 1
            change = history.release_change(".".join(map(str, version)))
        elif pool:
            change = pool.pop()
        else:
            change = pools.filler(fillers, rng)
            fillers += 1
        plan.append(Planned(change, numbers[i], author))
    return plan, culprit, broken, rename, second, slow


def _pr_numbers(commits: int, rng: random.Random) -> list[int]:
    """Increasing with gaps, with a few neighbours swapped: PRs merge out of order."""
    n = 8000 + rng.randrange(2000)
    numbers = []
    for _ in range(commits):
        n += rng.randint(1, 12)
        numbers.append(n)
    for i in range(1, commits - 1):
        if rng.random() < 0.2:
            numbers[i], numbers[i + 1] = numbers[i + 1], numbers[i]
    return numbers


# -- writing the repository --


def _ident(name: str, email: str, when: datetime, tz: str) -> str:
    return f"{name} <{email}> {int(when.timestamp())} {tz}"


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def _pr_body(change: Change, number: int) -> str:
    mods = "\n".join(f"- {m}" for m in change.modifications) or "- See the diff."
    return (
        f"## Motivation\n\n{change.summary}\n\n## Modifications\n\n{mods}\n\n## Checklist\n\n"
        "- [x] Format your code according to the pre-commit config.\n"
        f"- [{'x' if change.kind in ('test', 'feature', 'culprit') else ' '}] Add unit tests.\n"
        f"- [{'x' if change.kind == 'docs' else ' '}] Update documentation as needed.\n"
    )


def _followup(number: int, culprit_pr: int, created: datetime) -> dict:
    name, email, login, _ = AUTHORS[FOLLOWUP_AUTHOR]
    body = (
        "## Describe the bug\n\n"
        "The nightly decode-cache-hit KL accuracy test fails on main: a second turn that resumes from a "
        "decode-state checkpoint drifts from a cold prefill of the same tokens (`avg_kl_div` about 0.007 against the "
        f"{THRESHOLD} threshold; healthy builds read about 0.0004), while `cached_tokens` looks fine.\n\n"
        f"Since #{culprit_pr}, `mamba_last_track_seqlen` is taken from `kv_committed_len` when a decode step lands "
        "on a track boundary. Under the overlap scheduler that counter already includes the next, prepared step, "
        "so the cached prefix is labelled one token longer than the state it holds.\n\n"
        f"The proper fix for the regression introduced in #{culprit_pr} is being worked on here: record the "
        "boundary from the result's own sequence length, and test decode cache hits against a cold prefill "
        "instead of only checking `cached_tokens`.\n\n"
        "## Reproduction\n\n"
        "```sh\n"
        f"python -m mini_sglang.launch_server --port 30000 {history.NEW_TRACK_FLAG} {TRACK_INTERVAL}\n"
        "# turn 1: generate 24 tokens; turn 2: prompt + output + ','; flush; cold prefill; compare logprobs\n"
        "```\n"
    )
    return {
        "number": number,
        "kind": "issue",
        "title": "[Bug] Mamba decode cache hit drifts from prefill: track boundary seqlen off by one under overlap",
        "body": body,
        "author": login,
        "author_name": name,
        "author_email": email,
        "state": "open",
        "labels": ["bug", "mamba"],
        "created_at": created.isoformat().replace("+00:00", "Z"),
        "cites": culprit_pr,
    }


FIX_BOUNDARY = """\
                # Under overlap the next step may already be prepared: record the boundary from the
                # result's own sequence length, which is the position the state was snapshotted at.
                req.mamba_last_track_seqlen = req.kv_committed_len - lookahead
"""


def _followup_pr(number: int, opened: datetime) -> dict:
    """The follow-up as SGLang's #29792 was: an open PR by another author, opened before the culprit merged, that
    changes the culprit's function and never names it (its description predates it)."""
    name, email, login, _ = AUTHORS[FOLLOWUP_AUTHOR]
    body = (
        "## Motivation\n\nUnder the overlap scheduler the next decode step is prepared before the previous one's "
        "result is processed, so `kv_committed_len` can lead the position whose recurrent state was snapshotted at a "
        "track boundary. Make the boundary bookkeeping take the lookahead into account explicitly.\n\n"
        "## Modifications\n\n- `scheduler.py`: record the track boundary from the result's own sequence length.\n"
    )
    return {
        "number": number,
        "kind": "pr",
        "title": "[Mamba] Fix track-boundary bookkeeping under overlap scheduling",
        "body": body,
        "author": login,
        "author_name": name,
        "author_email": email,
        "state": "open",
        "labels": ["mamba"],
        "created_at": opened.isoformat().replace("+00:00", "Z"),
        "head": f"{login}/fix-{number}",
    }


def _followup_branch(follow: dict, tree: Tree, parent_index: int, when: datetime) -> list[bytes]:
    """The follow-up PR's branch: one commit on the culprit's parent (fast-import mark `parent_index`) that changes
    the function the culprit changes."""
    path = "mini_sglang/scheduler.py"
    text = tree[path]
    if history.GOOD_BOUNDARY not in text:
        raise AssertionError("scenario builder: the follow-up's function is not in the culprit's parent")
    ident = f"{follow['author_name']} <{follow['author_email']}> {int(when.timestamp())} +0000"
    return [
        f"commit refs/heads/{follow['head']}\n".encode(),
        f"author {ident}\ncommitter {ident}\n".encode(),
        _data(f"{follow['title']}\n"),
        f"from :{parent_index}\n".encode(),
        f"M 100644 inline {path}\n".encode(),
        _data(text.replace(history.GOOD_BOUNDARY, FIX_BOUNDARY)),
        b"\n",
    ]


def build(
    dir: Path,
    commits: int = 60,
    seed: int = 0,
    flake_rate: float = 0.0,
    unbuildable: int = 0,
    force: bool = False,
    regressions: int = 1,
    followup: str = "issue",
    slowdown: bool = False,
) -> Scenario:
    """Write DIR/repo and DIR/scenario.json; see the module docstring. `regressions=2`: the nightly runs two more
    accuracy files, one the culprit breaks too, and a second culprit later in the range breaks the other.
    `followup="pr"`: the follow-up is shaped like SGLang's real one (#29792): an open PR by another author, opened
    before the culprit merged, changing the culprit's function on a branch of its own, never naming the culprit; else
    an issue that cites the culprit (the easy case). `slowdown=True`: the performance nightly too
    (scenarios.mamba_track_boundary.slowdown): its decode benchmark from the first commit, and one later commit that
    makes decode slower (`Scenario.slowdown`); every other choice of the seed stays where it was."""
    if followup not in ("issue", "pr"):
        raise ValueError("followup must be 'issue' or 'pr'")
    if regressions not in (1, 2):
        raise ValueError("regressions must be 1 or 2")
    if not 0.0 <= flake_rate <= 1.0:
        raise ValueError("flake_rate must be within [0, 1]")
    if unbuildable < 0:
        raise ValueError("unbuildable must be at least 0")
    plan, culprit_index, broken, rename_index, second_index, slow_index = _plan(
        commits, seed, unbuildable, regressions, slowdown
    )
    dir = Path(dir).resolve()
    repo = dir / "repo"
    if repo.exists():
        if not force and any(repo.iterdir()):
            raise FileExistsError(f"{repo} already exists (use force=True / --force to replace it)")
        shutil.rmtree(repo)
    repo.mkdir(parents=True)

    rng = random.Random(f"mamba-track-boundary/dates/{seed}")
    tree: Tree = {}
    stream: list[bytes] = []
    when = EPOCH
    records = []
    for i, planned in enumerate(plan):
        change = planned.change
        before = dict(tree)
        if i == 0:
            tree.update(history.initial_tree(flake_rate, FIRST_VERSION))
            if regressions > 1:
                tree.update(history.extra_tests())
            if slowdown:
                perf_tree(tree)
        else:
            change.apply(tree)
        if i == culprit_index:
            before_culprit, culprit_when = before, when
        changed = sorted(p for p in tree if before.get(p) != tree[p])
        removed = sorted(p for p in before if p not in tree)
        if i and not changed and not removed:
            raise AssertionError(f"scenario builder: change {change.title!r} changed nothing")
        when += timedelta(seconds=rng.randint(25 * 60, 16 * 3600))
        authored = when - timedelta(seconds=rng.randint(600, 3 * 86400))
        name, email, login, tz = AUTHORS[planned.author]
        message = f"{change.title} (#{planned.pr})\n\n{change.summary}\n"
        if rng.random() < 0.15:
            co = AUTHORS[(planned.author + 1 + rng.randrange(len(AUTHORS) - 1)) % len(AUTHORS)]
            message += f"\nCo-authored-by: {co[0]} <{co[1]}>\n"
        stream.append(f"commit refs/heads/main\nmark :{i + 1}\n".encode())
        stream.append(f"author {_ident(name, email, authored, tz)}\n".encode())
        stream.append(f"committer {COMMITTER} {int(when.timestamp())} +0000\n".encode())
        stream.append(_data(message))
        if i:
            stream.append(f"from :{i}\n".encode())
        for path in removed:
            stream.append(f"D {path}\n".encode())
        for path in changed:
            stream.append(f"M 100644 inline {path}\n".encode())
            stream.append(_data(tree[path]))
        stream.append(b"\n")
        records.append(
            {
                "number": planned.pr,
                "title": change.title,
                "author": login,
                "author_name": name,
                "author_email": email,
                "body": _pr_body(change, planned.pr),
                "kind": change.kind,
                "files": changed + removed,
                "merged_at": when.isoformat().replace("+00:00", "Z"),
            }
        )

    numbers = {p.pr for p in plan}
    followup_number = max(numbers) + 1 + rng.randrange(30)
    if followup == "pr":
        opened = culprit_when - timedelta(days=14)
        follow = _followup_pr(followup_number, opened)
        stream += _followup_branch(follow, before_culprit, culprit_index, opened)
    else:
        follow = _followup(followup_number, plan[culprit_index].pr, when + timedelta(hours=6))
    env = {**os.environ, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"}
    git = ["git", "-C", str(repo)]
    subprocess.run(["git", "init", "-q", "-b", "main", str(repo)], check=True, env=env, capture_output=True)
    with tempfile.TemporaryDirectory() as tmp:
        marks = Path(tmp) / "marks"
        subprocess.run(
            [*git, "fast-import", "--quiet", f"--export-marks={marks}"],
            input=b"".join(stream),
            check=True,
            env=env,
            capture_output=True,
        )
        by_mark = dict(line.split() for line in marks.read_text().splitlines())
    shas = [by_mark[f":{i + 1}"] for i in range(len(plan))]
    subprocess.run([*git, "reset", "-q", "--hard", "main"], check=True, env=env, capture_output=True)
    for record, sha in zip(records, shas):
        record["sha"] = sha

    scenario = Scenario(
        dir=dir,
        repo=repo,
        seed=seed,
        commits=commits,
        flake_rate=flake_rate,
        good=shas[0],
        bad=shas[-1],
        culprit=shas[culprit_index],
        culprit_pr=plan[culprit_index].pr,
        culprit_index=culprit_index,
        shas=shas,
        unbuildable=[shas[u] for u in broken],
        prs=records,
        followup=follow,
        second_culprit=shas[second_index] if second_index is not None else None,
        second_culprit_pr=plan[second_index].pr if second_index is not None else None,
        second_culprit_index=second_index,
        slowdown=(
            {
                "index": slow_index,
                "sha": shas[slow_index],
                "pr": plan[slow_index].pr,
                "title": plan[slow_index].change.title,
            }
            if slow_index is not None
            else {}
        ),
        flag_rename={
            "index": rename_index,
            "sha": shas[rename_index],
            "pr": plan[rename_index].pr,
            "old": history.OLD_TRACK_FLAG,
            "new": history.NEW_TRACK_FLAG,
        },
    )
    (dir / "scenario.json").write_text(json.dumps(scenario.to_json(), indent=2) + "\n")
    return scenario
