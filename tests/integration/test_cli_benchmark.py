"""`revert-bisect bisect` on a noisy benchmark with no threshold: worse than GOOD is the signal (issue: noisy metrics).

A real git history of 32 commits; each commit's `speed.txt` holds the throughput its code reaches (100, or 92 from
the planted regression on), and `bench.py` prints `output_throughput=<speed + noise>` with Gaussian noise of sd 2,
seeded by the commit and the step so that every run reads differently; the commits' dates are fixed, so the draws
repeat. A 4 sd drop keeps
a wrong answer out of reach of one test run; the 2 sd error rate is the simulator's to measure
(tests/unit/test_noisy_metrics.py)."""

import os
import subprocess

from tests.support.cli import no_traceback

BENCH = """\
import os, random, zlib
speed = float(open("speed.txt").read())
seed = zlib.crc32((os.environ["REVERT_BISECT_SHA"] + os.environ["REVERT_BISECT_STEP_ID"]).encode())
print(f"output_throughput={speed + random.Random(seed).gauss(0, 2):.3f}")
"""


def _history(path, n: int, culprit: int) -> list[str]:
    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True).stdout.strip()

    path.mkdir()
    git("init", "-q", "-b", "main")
    git("config", "user.email", "dev@example.com")
    git("config", "user.name", "dev")
    (path / "bench.py").write_text(BENCH)
    shas = []
    for i in range(n + 1):
        (path / "speed.txt").write_text("92\n" if i >= culprit else "100\n")
        (path / "notes.txt").write_text(f"change {i}\n")
        git("add", "-A")
        # fixed dates: the same commits, so the same draws, on every run of the test (the draws are the unit tests'
        # to vary: tests/unit/test_noisy_metrics.py; with commits dated from 00:00 the no-shift history here ends
        # inconclusive, a best guess and no culprit named, rather than "not reproducible")
        when = f"2026-01-01T01:{i // 60:02d}:{i % 60:02d}Z"
        subprocess.run(
            ["git", "commit", "-q", "-m", f"change {i}"],
            cwd=path,
            check=True,
            capture_output=True,
            env={**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when},
        )
        shas.append(git("rev-parse", "HEAD"))
    return shas


def _bisect(cli, tmp_path, shas: list[str], workers: int = 2):
    repo = str(tmp_path / "repo")
    regex = r"output_throughput=(?P<value>[0-9.]+)"
    argv = ["bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--metric-regex", regex]
    return cli(*argv, "--lower-is-worse", "--workers", str(workers), "--", "python3", "bench.py", timeout=600)


def test_a_benchmark_without_threshold_finds_the_slower_commit_and_states_the_drop(tmp_path, cli):
    shas = _history(tmp_path / "repo", 32, culprit=19)
    r = _bisect(cli, tmp_path, shas)
    no_traceback(r)
    assert r.code == 0, r.stderr
    assert r.json["culprit"] == shas[19]
    # the effect with its interval, and the readings at culprit and parent
    assert "at the culprit (95%)" in r.stdout + r.stderr
    assert "culprit median" in r.stdout + r.stderr and "parent median" in r.stdout + r.stderr
    assert r.json["effect"].startswith("-") and r.json["effect"].endswith("% at the culprit (95%)"), r.json["effect"]
    per_commit: dict[str, int] = {}
    for step in r.json["steps"]:
        per_commit[step["sha"]] = per_commit.get(step["sha"], 0) + 1
    # sampled: the endpoints several times each, the culprit and its parent at least three times each
    assert per_commit[shas[0]] >= 4 and per_commit[shas[-1]] >= 4
    assert per_commit[shas[19]] >= 3 and per_commit[shas[18]] >= 3


def test_a_benchmark_whose_bad_reads_like_good_is_not_reproducible(tmp_path, cli):
    shas = _history(tmp_path / "repo", 8, culprit=99)  # no commit is slower
    r = _bisect(cli, tmp_path, shas)
    no_traceback(r)
    assert r.json["culprit"] is None, r.stderr
    assert r.json["status"] in ("not_reproducible", "no_culprit"), r.json["status"]
    assert "do not differ at the stated error rate" in r.stderr or "no commit reads worse" in r.stderr
