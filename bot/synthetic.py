"""Synthetic repositories with one known regression, for the quick demo, the tests and the benchmarks.

Each commit touches a file of its own; the culprit flips `BROKEN = True` in `service/config.py`.
The test script lives outside the repository (the yardstick must not change along the range):
it sleeps, exits 125 on commits marked unbuildable, fails on broken ones, and fails a good
one with the flake probability it is given.
"""

from __future__ import annotations

import random
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

TEST_SCRIPT = '''\
import os, random, sys, time
tree = os.environ.get("REVERT_BISECT_WORKTREE", ".")
time.sleep(float(os.environ.get("SYNTH_SLEEP", "{sleep}")))
flake = float(os.environ.get("SYNTH_FLAKE", "{flake}"))
log = os.environ.get("SYNTH_RUN_LOG")
sha = os.environ.get("REVERT_BISECT_SHA", "")
if log:
    with open(log, "a") as fh:
        fh.write(f"{{os.environ.get('REVERT_BISECT_STEP_ID', '-')}} {{sha}}\\n")
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
'''


@dataclass(frozen=True)
class SyntheticRepo:
    path: Path
    test_script: Path
    good: str
    bad: str
    culprit: str
    shas: list[str]  # first-parent commits after GOOD, oldest first

    def command(self) -> list[str]:
        return [sys.executable, str(self.test_script)]


def _git(repo: Path, *args: str) -> str:
    env = {"GIT_AUTHOR_NAME": "Ada Dev", "GIT_AUTHOR_EMAIL": "ada@example.com", "GIT_COMMITTER_NAME": "Ada Dev",
           "GIT_COMMITTER_EMAIL": "ada@example.com", "GIT_AUTHOR_DATE": "2026-01-01T00:00:00Z", "GIT_COMMITTER_DATE": "2026-01-01T00:00:00Z",
           "PATH": "/usr/bin:/bin:/usr/local/bin", "HOME": str(repo)}
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True, env=env).stdout.strip()


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
    path.mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "init", "-q", "-b", "main", str(path)], check=True)
    _git(path, "config", "commit.gpgsign", "false")
    (path / "service").mkdir(exist_ok=True)
    (path / "service" / "config.py").write_text("BROKEN = False\n")
    (path / "README.md").write_text("synthetic service\n")
    _git(path, "add", "-A")
    _git(path, "commit", "-q", "-m", "Initial import (#1000)")
    good = _git(path, "rev-parse", "HEAD")
    shas = []
    for i in range(1, commits + 1):
        if i == merge_at:
            _merge(path, i, side_commits, side_culprit)
        else:
            _change(path, f"notes/change_{i}.txt", f"change {i}\n")
            (path / "BUILD_BROKEN").unlink(missing_ok=True)
            if i in unbuildable:
                (path / "BUILD_BROKEN").write_text("x\n")
            if i == culprit:
                (path / "service" / "config.py").write_text("BROKEN = True\n")
            _git(path, "add", "-A")
            _git(path, "commit", "-q", "-m", f"Change {i} (#{1000 + i})")
        shas.append(_git(path, "rev-parse", "HEAD"))
    if merge_at and side_culprit:
        culprit_sha = _git(path, "rev-parse", f"side-{merge_at}~{side_commits - side_culprit}")
    else:
        culprit_sha = shas[culprit - 1]
    script = path.parent / f"{path.name}-test.py"
    script.write_text(TEST_SCRIPT.format(sleep=sleep, flake=flake))
    return SyntheticRepo(path, script, good, shas[-1], culprit_sha, shas)


def _change(repo: Path, name: str, text: str) -> None:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)


def _merge(repo: Path, i: int, side_commits: int, side_culprit: int | None) -> None:
    branch = f"side-{i}"
    _git(repo, "checkout", "-q", "-b", branch, "HEAD~1" if i > 1 else "HEAD")
    for j in range(1, side_commits + 1):
        _change(repo, f"side/{i}_{j}.txt", f"side {j}\n")
        if j == side_culprit:
            (repo / "service" / "config.py").write_text("BROKEN = True\n")
        _git(repo, "add", "-A")
        _git(repo, "commit", "-q", "-m", f"Side change {j} of feature {i}")
    _git(repo, "checkout", "-q", "main")
    _git(repo, "merge", "-q", "--no-ff", "-m", f"Merge feature {i} (#{1000 + i})", branch)


def random_culprit(commits: int, seed: int) -> int:
    return random.Random(seed).randint(1, commits)
