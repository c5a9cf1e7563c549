"""Benchmark: how often a group's "no regression" odds (bot.domain.bisect.regression) dismiss a test, per flake rate
and culprit rate, read at the endpoints alone.

    python bench/regression_bench.py                    # 1,000 histories a row (a few minutes on 2 cores)
    python bench/regression_bench.py --histories 200    # a shorter run

Each history: the red reading of BAD (a failure), then GOOD and BAD read in turn, GOOD failing at the row's flake
rate and BAD at its culprit rate (equal: a flaky test with no regression), until the odds of no regression reach
the bar of confidence 0.99 (99:1) or --runs runs are spent. A real culprit read only at the endpoints is the worst
case for it: a search would also locate it, and its odds would fall further. The rule's bound (at most 1% of
regressions failing at least twice the flake rate dismissed) is an average over the model's prior of culprit rates;
these rows are what it is per rate. Rows below the size (the culprit failing less than twice as often as the test
flakes) may be dismissed: the rule does not tell them from no regression.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)
import trees  # noqa: E402

COMMAND = "python " + shlex.join(["bench/regression_bench.py", *sys.argv[1:]])
N = 64
# (flake rate, failure rate at BAD): no regression, regressions of the intermittent bench, at and below the size
ROWS = [
    (0.02, 0.02),
    (0.1, 0.1),
    (0.3, 0.3),
    (0.05, 0.3),
    (0.05, 0.5),
    (0.05, 0.7),
    (0.05, 1.0),
    (0.1, 0.3),
    (0.15, 0.35),
    (0.2, 0.4),
    (0.3, 0.6),
    (0.3, 0.45),
]


def histories_of(flake: float, rate: float, runs: int, seeds: range, tree: str | None) -> list[int | None]:
    """The runs after which no regression was ruled out, per history (None: not within `runs`)."""
    trees.use_tree(tree)
    from bot.domain.bisect.model import Kind, Problem, Run
    from bot.domain.bisect.regression import regression
    from bot.domain.bisect.simulate import linear_graph
    from bot.domain.bisect.verdict import RawResult

    graph, good, bad = linear_graph(N)
    problem = Problem(graph, good, bad)
    out: list[int | None] = []
    for seed in seeds:
        rng = random.Random(seed)
        seen = [Run(bad, Kind.CALIBRATE, RawResult(1), 0)]
        ended = None
        for t in range(runs):
            sha, p = (good, flake) if t % 2 == 0 else (bad, rate)
            seen.append(Run(sha, Kind.CALIBRATE, RawResult(int(rng.random() < p)), t + 1))
            if regression(problem, seen).ruled_out:
                ended = t + 1
                break
        out.append(ended)
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.set_defaults(histories=1000)
    parser.add_argument("--runs", type=int, default=120, help="endpoint runs per history at most (default 120)")
    args = parser.parse_args()
    rows = []
    for flake, rate in ROWS:
        parts = trees.over_processes(
            histories_of,
            lambda seeds, flake=flake, rate=rate: (flake, rate, args.runs, seeds, args.tree),
            args.histories,
            args.jobs,
        )
        ended = sorted(r for part in parts for r in part if r is not None)
        size = "no regression" if rate == flake else "at the size" if rate == 2 * flake else ""
        size = size or ("below the size" if rate < max(2 * flake, 0.2) else "a regression of the size")
        rows.append(
            [
                f"{flake:.0%}",
                f"{rate:.0%}",
                size,
                f"{len(ended)}/{args.histories} ({100 * len(ended) / args.histories:.1f}%)",
                f"{statistics.median(ended):g}" if ended else "-",
            ]
        )
        print(f"{flake} {rate}: done", file=sys.stderr, flush=True)
    tables.table(
        f"No regression ruled out, read at the endpoints alone (n = {N}, at most {args.runs} runs, confidence 0.99)",
        COMMAND,
        ["flake rate (GOOD)", "failure rate at BAD", "what it is", "dismissed", "runs when dismissed (median)"],
        rows,
    )


if __name__ == "__main__":
    main()
