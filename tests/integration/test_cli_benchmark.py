"""`revert-bisect bisect` on a noisy benchmark with no threshold: worse than GOOD is the signal (issue: noisy metrics).

A real git history of 32 or 64 commits; each commit's `speed.txt` holds the throughput its code reaches (100, or 92
from the planted regression on), and `bench.py` prints `output_throughput=<speed + noise>` with Gaussian noise of sd
2, seeded by the commit, the step and its argument so that every run reads differently; the commits' dates are
fixed, so the draws repeat. A 4 sd drop keeps a wrong answer out of reach of one test run; the 2 sd error rate is
the simulator's to measure (tests/unit/test_noisy_metrics.py, tests/unit/test_endpoint_gate.py)."""

from tests.support.cli import no_traceback
from tests.support.history import linear_history

BENCH = """\
import os, random, sys, zlib
speed = float(open("speed.txt").read())
seed = zlib.crc32((os.environ["REVERT_BISECT_SHA"] + os.environ["REVERT_BISECT_STEP_ID"]).encode())
seed += int(sys.argv[1]) if len(sys.argv) > 1 else 0  # another draw of the noise for the same history
print(f"output_throughput={speed + random.Random(seed).gauss(0, 2):.3f}")
"""


def _history(path, n: int, culprit: int) -> list[str]:
    # fixed dates: the same commits, so the same draws, on every run of the test (the draws are the unit tests'
    # to vary: tests/unit/test_noisy_metrics.py, tests/unit/test_endpoint_gate.py)
    return linear_history(path, n, lambda i: {"bench.py": BENCH, "speed.txt": "92\n" if i >= culprit else "100\n",
                                               "notes.txt": f"change {i}\n"}, dated=True)  # fmt: skip


def _bisect(cli, tmp_path, shas: list[str], workers: int = 2, seed: int = 0):
    repo = str(tmp_path / "repo")
    regex = r"output_throughput=(?P<value>[0-9.]+)"
    argv = ["bisect", "--repo", repo, "--good", shas[0], "--bad", shas[-1], "--metric-regex", regex]
    test = ["python3", "bench.py", *([str(seed)] if seed else [])]
    return cli(*argv, "--lower-is-worse", "--workers", str(workers), "--", *test, timeout=600)


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
        per_commit[step["sha"]] = per_commit.get(step["sha"], 0) + (step["state"] == "done")
    # sampled: the endpoints several times each, the culprit and its parent at least three times each
    assert per_commit[shas[0]] >= 4 and per_commit[shas[-1]] >= 4
    assert per_commit[shas[19]] >= 3 and per_commit[shas[18]] >= 3


def test_a_benchmark_whose_bad_reads_like_good_is_not_reproducible_on_every_seed(tmp_path, cli):
    """Issue 33's case: 2% noise, 64 commits, no commit slower, `--lower-is-worse --workers 2`, no threshold; ten
    draws of the noise. Each ends "not reproducible" at the endpoints, and the JSON names no culprit."""
    shas = _history(tmp_path / "repo", 64, culprit=999)  # no commit is slower
    runs = []
    for seed in range(1, 11):
        r = _bisect(cli, tmp_path, shas, seed=seed)
        no_traceback(r)
        assert r.code == 4 and r.json["status"] == "not_reproducible", (seed, r.json and r.json["status"], r.stderr)
        assert r.json["culprit"] is None, (seed, r.json)
        assert "do not differ at the stated error rate" in r.stderr or "are not told apart" in r.stderr, r.stderr
        done = [step["sha"] for step in r.json["steps"] if step["state"] == "done"]
        assert set(done) == {shas[0], shas[-1]}, (seed, done)  # the endpoints alone: nothing bisected
        runs.append(len(done))
    assert sum(runs) / len(runs) <= 20, runs  # Pinpoint's 20 runs for the two endpoints, on average
