"""Benchmark: intermittent culprits -- a commit that makes the test fail only some of the time -- against the engine's
own simulator and `git bisect run` on the same histories (issue 30, item 1).

    python bench/intermittent_bench.py                      # 2,000 histories a row (about an hour on 2 cores)
    python bench/intermittent_bench.py --histories 300      # a shorter run
    python bench/intermittent_bench.py --tree /path/to/old  # the same histories on another checkout's engine

Each history: a range of n commits, the culprit at a uniformly drawn position, commits before it failing 5% of the
time (flakes), commits from it on failing at the row's rate (1.0: a regression that always fails). The engine runs
with the CLI's default settings (auto flake rate, GOOD taken as read) on k workers in synchronous rounds. "wrong" is
a culprit named (outcome `found`) that is not the first bad commit; "no answer" is every other outcome (inconclusive,
not reproducible, ...). Runs are the bisect runner's, calibration and confirmation included.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)
import trees  # noqa: E402

from bot.domain.bisect.simulate import FlakyTest  # noqa: E402  (the histories: always this tree's)

COMMAND = "python " + shlex.join(["bench/intermittent_bench.py", *sys.argv[1:]])
FLAKE = 0.05
ROWS = [(n, k, rate) for n in (64, 240) for k in (1, 4) for rate in (0.3, 0.5, 0.7, 1.0)]


def engine(tree: str | None):
    """The engine's simulator and settings: this tree's, or another checkout's (its `bot` package imported instead)."""
    trees.use_tree(tree)
    from bot.domain.bisect.model import Settings, Status
    from bot.domain.bisect.simulate import git_bisect, simulate

    return simulate, git_bisect, Settings, Status


def histories_of(n: int, k: int, rate: float, seeds: range, tree: str | None) -> tuple[int, int, int, list, list]:
    """Right, wrong, git's right, runs and git's runs over some seeds (one worker process's share)."""
    simulate, git_bisect, Settings, Status = engine(tree)
    right = wrong = git_right = 0
    runs, git_runs = [], []
    for seed in seeds:
        rng = random.Random(seed * 7919 + n)
        culprit = rng.randint(1, n)
        result = simulate(n, FlakyTest(culprit, FLAKE, random.Random(seed), rate=rate), k, Settings(good_as_read=True))
        if result.outcome.status is Status.FOUND:
            named = int(result.outcome.culprit[1:])
            right += named == culprit
            wrong += named != culprit
        runs.append(result.runs)
        found, spent = git_bisect(n, FlakyTest(culprit, FLAKE, random.Random(seed), rate=rate))
        git_right += found == culprit
        git_runs.append(spent)
    return right, wrong, git_right, runs, git_runs


def row(n: int, k: int, rate: float, histories: int, tree: str | None, jobs: int) -> list[str]:
    parts = trees.over_processes(histories_of, lambda seeds: (n, k, rate, seeds, tree), histories, jobs)
    right, wrong, git_right = (sum(p[i] for p in parts) for i in range(3))
    runs = [r for p in parts for r in p[3]]
    git_runs = [r for p in parts for r in p[4]]
    pct = lambda count: f"{100 * count / histories:.1f}%"  # noqa: E731
    return [
        str(n),
        str(k),
        f"{rate:.0%}",
        str(histories),
        pct(right),
        pct(wrong),
        pct(histories - right - wrong),
        f"{statistics.median(runs):g}",
        f"{statistics.mean(runs):.1f}",
        f"{pct(git_right)} / {pct(histories - git_right)}",
        f"{statistics.median(git_runs):g}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.add_argument("--rows", help="only rows n,k,rate;n,k,rate (e.g. 64,1,0.7)")
    args = parser.parse_args()
    rows = trees.rows_given(args.rows, ROWS, (int, int, float))
    out = []
    for n, k, rate in rows:
        started = time.monotonic()
        out.append(row(n, k, rate, args.histories, args.tree, args.jobs))
        print(f"n={n} k={k} rate={rate}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    which = f"engine of {args.tree}" if args.tree else "this tree"
    tables.table(
        f"Intermittent culprits, {FLAKE:.0%} flakes before them ({which})",
        COMMAND,
        [
            "n",
            "k",
            "culprit fails",
            "histories",
            "right",
            "wrong",
            "no answer",
            "runs (median)",
            "runs (mean)",
            "git bisect run right / wrong",
            "git runs",
        ],
        out,
    )


if __name__ == "__main__":
    main()
