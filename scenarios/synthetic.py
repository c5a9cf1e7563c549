"""Synthetic repositories with one known regression, for the quick demo, the tests and the benchmarks.

Each commit touches a file of its own; the culprit flips `BROKEN = True` in `service/config.py`.
The test script lives outside the repository (the yardstick must not change along the range):
it sleeps, exits 125 on commits marked unbuildable, fails on broken ones, and fails a good
one with the flake probability it is given. With SYNTH_RUN_LOG it logs each run; with SYNTH_HOLD too, runs after
the SYNTH_HOLD_AFTER-th wait while that file exists (a test interrupts a bisection that cannot have ended).

The history is written with one `git fast-import` stream (4096 commits in a few seconds).
"""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TEST_SCRIPT = """\
import os, random, sys, time
tree = os.environ.get("REVERT_BISECT_WORKTREE", ".")
time.sleep(float(os.environ.get("SYNTH_SLEEP", "{sleep}")))
flake = float(os.environ.get("SYNTH_FLAKE", "{flake}"))
log = os.environ.get("SYNTH_RUN_LOG")
sha = os.environ.get("REVERT_BISECT_SHA", "")
if log:
    with open(log, "a") as fh:
        fh.write(f"{{os.environ.get('REVERT_BISECT_STEP_ID', '-')}} {{sha}}\\n")
hold = os.environ.get("SYNTH_HOLD")  # a file: while it exists, every run after the SYNTH_HOLD_AFTER-th waits
if hold and log:
    with open(log) as fh:
        nth = sum(1 for _ in fh)
    while nth > int(os.environ.get("SYNTH_HOLD_AFTER", "0")) and os.path.exists(hold):
        time.sleep(0.05)
if os.path.exists(os.path.join(tree, "BUILD_BROKEN")):
    print("build failed: BUILD_BROKEN present")
    sys.exit(125)
source = open(os.path.join(tree, "service", "config.py")).read()
broken = "BROKEN = True" in source
value = 0.0065 if broken else 0.0003
print(f"avg_kl_div={{value}} threshold=0.002")
if broken or random.random() < flake:
    print("FAILED: test_decode_cache_hit")
    sys.exit(1)
print("Test Summary: 1/1 passed")
"""


# The same test as a POSIX shell script: no interpreter start-up, so a benchmark measures the
# bisection, not Python launching on a 2-core machine.
TEST_SH = """#!/bin/sh
tree="${{REVERT_BISECT_WORKTREE:-.}}"
sleep "${{SYNTH_SLEEP:-{sleep}}}"
if [ -n "$SYNTH_RUN_LOG" ]; then echo "${{REVERT_BISECT_STEP_ID:--}} ${{REVERT_BISECT_SHA}}" >> "$SYNTH_RUN_LOG"; fi
if [ -e "$tree/BUILD_BROKEN" ]; then echo "build failed: BUILD_BROKEN present"; exit 125; fi
if grep -q "BROKEN = True" "$tree/service/config.py"; then \
echo "avg_kl_div=0.0065 threshold=0.002"; echo "FAILED: test_decode_cache_hit"; exit 1; fi
echo "avg_kl_div=0.0003 threshold=0.002"
roll=$(od -An -N2 -tu2 /dev/urandom | tr -d " ")
if [ "$roll" -lt "$(awk "BEGIN {{ print int(${{SYNTH_FLAKE:-{flake}}} * 65536) }}")" ]; then \
echo "FAILED: test_decode_cache_hit (flake)"; exit 1; fi
echo "Test Summary: 1/1 passed"
"""


@dataclass(frozen=True)
class SyntheticRepo:
    path: Path
    test_script: Path
    good: str
    bad: str
    culprit: str | None  # None when `culprit` is outside 1..commits: no commit breaks it
    shas: list[str]  # first-parent commits after GOOD, oldest first

    def command(self) -> list[str]:
        return [sys.executable, str(self.test_script)]

    def shell_command(self) -> list[str]:
        """The same test as /bin/sh (written beside the Python one)."""
        return [str(self.test_script.with_suffix(".sh"))]


def _git(repo: Path, *args: str) -> str:
    env = {
        "GIT_AUTHOR_NAME": "Ada Dev",
        "GIT_AUTHOR_EMAIL": "ada@example.com",
        "GIT_COMMITTER_NAME": "Ada Dev",
        "GIT_COMMITTER_EMAIL": "ada@example.com",
        "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z",
        "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
        "PATH": "/usr/bin:/bin:/usr/local/bin",
        "HOME": str(repo),
    }
    return subprocess.run(
        ["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env
    ).stdout.strip()


def build(
    path: Path,
    commits: int,
    culprit: int,
    *,
    sleep: float = 0.0,
    flake: float = 0.0,
    unbuildable: frozenset[int] = frozenset(),
    merge_at: int | None = None,
    side_commits: int = 4,
    side_culprit: int | None = None,
) -> SyntheticRepo:
    """A repository: GOOD, then `commits` first-parent commits (1-based); commit `culprit` breaks it.

    With `merge_at`, first-parent commit number `merge_at` is a merge of a side branch of
    `side_commits` commits; `side_culprit` (1-based on that branch) breaks it there instead.
    """
    return _build_fast(
        path,
        commits,
        culprit,
        sleep=sleep,
        flake=flake,
        unbuildable=unbuildable,
        merge_at=merge_at,
        side_commits=side_commits,
        side_culprit=side_culprit,
    )


def _write_script(path: Path, sleep: float, flake: float) -> Path:
    script = path.parent / f"{path.name}-test.py"
    script.write_text(TEST_SCRIPT.format(sleep=sleep, flake=flake))
    shell = script.with_suffix(".sh")
    shell.write_text(TEST_SH.format(sleep=sleep, flake=flake))
    shell.chmod(0o755)
    return script


# -- the fast builder: the same history as one `git fast-import` stream ---------------------------

_IDENT = "Ada Dev <ada@example.com> 1767225600 +0000"  # what _git's environment gives `git commit`
Tree = dict[str, str]  # path -> content
Changes = dict[str, "str | None"]  # path -> new content, None: deleted


class _Stream:
    """Commits for `git fast-import`, each written as its changes against its first parent."""

    def __init__(self) -> None:
        self.chunks: list[bytes] = []
        self.marks = 0

    def commit(self, ref: str, message: str, changes: Changes, parent: int | None, merge: int | None = None) -> int:
        self.marks += 1
        out = [
            f"commit {ref}\nmark :{self.marks}\nauthor {_IDENT}\ncommitter {_IDENT}\n".encode(),
            _data(message + "\n"),
        ]
        if parent is not None:
            out.append(f"from :{parent}\n".encode())
        if merge is not None:
            out.append(f"merge :{merge}\n".encode())
        for name in sorted(changes):
            if changes[name] is None:
                out.append(f"D {name}\n".encode())
            else:
                out += [f"M 100644 inline {name}\n".encode(), _data(changes[name])]
        out.append(b"\n")
        self.chunks += out
        return self.marks


def _data(text: str) -> bytes:
    raw = text.encode()
    return b"data %d\n" % len(raw) + raw + b"\n"


def _apply(tree: Tree, wanted: Changes) -> tuple[Changes, Changes]:
    """Apply `wanted` to `tree` in place; returns (what really changed, how to undo it)."""
    changes = {name: text for name, text in wanted.items() if tree.get(name) != text}
    undo = {name: tree.get(name) for name in changes}
    for name, text in changes.items():
        if text is None:
            del tree[name]
        else:
            tree[name] = text
    return changes, undo


def _merge_trees(base: Tree, ours: Tree, theirs: Tree) -> Tree:
    """A three-way merge of whole files, as `git merge` does it when nothing conflicts."""
    out = {}
    for name in base.keys() | ours.keys() | theirs.keys():
        b, o, t = base.get(name), ours.get(name), theirs.get(name)
        if o == t or t == b:
            pick = o
        elif o == b:
            pick = t
        else:
            raise ValueError(f"synthetic merge conflict on {name}")
        if pick is not None:
            out[name] = pick
    return out


def _build_fast(
    path: Path,
    commits: int,
    culprit: int,
    *,
    sleep: float,
    flake: float,
    unbuildable: frozenset[int],
    merge_at: int | None,
    side_commits: int,
    side_culprit: int | None,
) -> SyntheticRepo:
    """`build` in one `git fast-import`: linear in the number of commits."""
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    _git(path, "config", "commit.gpgsign", "false")
    stream = _Stream()
    tree: Tree = {}
    changes, undo = _apply(tree, {"README.md": "synthetic service\n", "service/config.py": "BROKEN = False\n"})
    chain = [
        stream.commit("refs/heads/main", "Initial import (#1000)", changes, None)
    ]  # first-parent marks, GOOD first
    for i in range(1, commits + 1):
        if i == merge_at:
            base_tree = dict(tree)
            if i > 1:  # the side branch starts at HEAD~1: undo the last commit
                _apply(base_tree, undo)
            side, side_tree = chain[-2] if i > 1 else chain[-1], dict(base_tree)
            for j in range(1, side_commits + 1):
                wanted: Changes = {f"side/{i}_{j}.txt": f"side {j}\n"}
                if j == side_culprit:
                    wanted["service/config.py"] = "BROKEN = True\n"
                side = stream.commit(
                    f"refs/heads/side-{i}", f"Side change {j} of feature {i}", _apply(side_tree, wanted)[0], side
                )
            merged = _merge_trees(base_tree, tree, side_tree)
            changes, undo = _apply(tree, {name: merged.get(name) for name in tree.keys() | merged.keys()})
            chain.append(stream.commit("refs/heads/main", f"Merge feature {i} (#{1000 + i})", changes, chain[-1], side))
        else:
            wanted = {f"notes/change_{i}.txt": f"change {i}\n", "BUILD_BROKEN": "x\n" if i in unbuildable else None}
            if i == culprit:
                wanted["service/config.py"] = "BROKEN = True\n"
            changes, undo = _apply(tree, wanted)
            chain.append(stream.commit("refs/heads/main", f"Change {i} (#{1000 + i})", changes, chain[-1]))
    marks_file = path.parent / f"{path.name}.marks"
    stream.chunks.append(b"done\n")
    subprocess.run(
        ["git", "-C", str(path), "fast-import", "--quiet", "--done", f"--export-marks={marks_file}"],
        input=b"".join(stream.chunks),
        check=True,
        capture_output=True,
    )
    by_mark = {}
    for line in marks_file.read_text().splitlines():
        mark, sha = line.split()
        by_mark[int(mark[1:])] = sha
    marks_file.unlink()
    _git(path, "reset", "-q", "--hard", "main")
    shas = [by_mark[mark] for mark in chain[1:]]
    if merge_at and side_culprit:
        culprit_sha = _git(path, "rev-parse", f"side-{merge_at}~{side_commits - side_culprit}")
    else:
        culprit_sha = shas[culprit - 1] if 1 <= culprit <= commits else None
    return SyntheticRepo(path, _write_script(path, sleep, flake), by_mark[chain[0]], shas[-1], culprit_sha, shas)


def random_culprit(commits: int, seed: int) -> int:
    return random.Random(seed).randint(1, commits)
