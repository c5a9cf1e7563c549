"""Benchmark: a noisy benchmark outside the sampled search's model -- a drifting runner, heavy tails, two GPU clock
states, outliers -- on the engine's simulator, this tree's engine beside another checkout's on the same histories
(issue 30, item 2).

    python bench/misbehaving_bench.py                       # 2,000 histories a row (about 40 minutes on 2 cores)
    python bench/misbehaving_bench.py --histories 300       # a shorter run
    python bench/misbehaving_bench.py --tree /path/to/old   # the same histories on another checkout's engine

Each history: a throughput benchmark over n commits reading 100 plus noise of spread 1 (`simulate.noise`: Gaussian,
Student's t with 3 degrees of freedom, two clock states +-1.5 apart, or 3% of runs 10 off); from a uniformly drawn
culprit on it reads `regression` lower (none: no commit changed it, and any culprit named is wrong); the runner
drifts by `drift` per run in the order runs are made (negative: slower over time). The engine runs with the CLI's
defaults for a benchmark (no threshold, lower is worse, --confidence 0.99) on k workers in synchronous rounds.
"wrong" is a culprit named (outcome `found`) that is not the first worse commit; "no answer" is every other
outcome. Runs are the bisect runner's, endpoints included.
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

from bot.domain.bisect.simulate import NoisyMetric  # noqa: E402  (the histories: always this tree's)

COMMAND = "python " + shlex.join(["bench/misbehaving_bench.py", *sys.argv[1:]])
# (n, k, shape, drift per run, regression in units of the spread; 0: none)
ROWS = [
    (n, k, shape, drift, regression)
    for n in (32, 64)
    for k in (1, 4)
    for shape, drift, regression in (
        ("gauss", 0.0, 2.0),
        ("gauss", -0.05, 2.0),
        ("gauss", -0.1, 2.0),
        ("gauss", 0.05, 2.0),
        ("gauss", -0.05, 0.0),
        ("heavy", 0.0, 2.0),
        ("heavy", 0.0, 0.0),
        ("bimodal", 0.0, 2.0),
        ("bimodal", 0.0, 0.0),
        ("outliers", 0.0, 2.0),
        ("outliers", 0.0, 0.0),
    )
]


def engine(tree: str | None):
    """The engine's simulator and settings: this tree's, or another checkout's (its `bot` package imported instead)."""
    trees.use_tree(tree)
    from bot.domain.bisect.model import Settings, Status
    from bot.domain.bisect.simulate import simulate
    from bot.domain.bisect.verdict import MetricRule

    return simulate, Settings(metric=MetricRule(None, higher_is_worse=False)), Status


def histories_of(spec: tuple, seeds: range, tree: str | None) -> tuple[int, int, list[int]]:
    """Right, wrong and the runs over some seeds (one worker process's share)."""
    n, k, shape, drift, regression = spec
    simulate, settings, Status = engine(tree)
    right = wrong = 0
    runs = []
    for seed in seeds:
        rng = random.Random(seed * 7919 + n)
        culprit = rng.randint(1, n) if regression else None
        metric = NoisyMetric(culprit, -regression, rng=random.Random(seed), shape=shape, drift=drift)
        result = simulate(n, metric, k, settings)
        if result.outcome.status is Status.FOUND:
            named = int(result.outcome.culprit[1:])
            right += named == culprit
            wrong += named != culprit
        runs.append(result.runs)
    return right, wrong, runs


def row(spec: tuple, histories: int, tree: str | None, jobs: int) -> list[str]:
    parts = trees.over_processes(histories_of, lambda seeds: (spec, seeds, tree), histories, jobs)
    right, wrong = sum(p[0] for p in parts), sum(p[1] for p in parts)
    runs = [r for p in parts for r in p[2]]
    n, k, shape, drift, regression = spec
    pct = lambda count: f"{100 * count / histories:.1f}%"  # noqa: E731
    return [
        str(n),
        str(k),
        shape,
        f"{drift:+g}" if drift else "0",
        f"{regression:g} sd" if regression else "none",
        str(histories),
        pct(right) if regression else "",
        pct(wrong),
        pct(histories - right - wrong),
        f"{statistics.median(runs):g}",
        f"{statistics.mean(runs):.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.add_argument("--rows", help="only rows n,k,shape,drift,regression;... (e.g. 32,1,gauss,-0.05,2)")
    args = parser.parse_args()
    rows = trees.rows_given(args.rows, ROWS, (int, int, str, float, float))
    out = trees.each_row(rows, lambda spec: row(spec, args.histories, args.tree, args.jobs))
    which = f"engine of {args.tree}" if args.tree else "this tree"
    tables.table(
        f"A benchmark outside the model: drift, heavy tails, two modes, outliers ({which})",
        COMMAND,
        [
            "n",
            "k",
            "noise",
            "drift per run",
            "regression",
            "histories",
            "right",
            "wrong",
            "no answer",
            "runs (median)",
            "runs (mean)",
        ],
        out,
        [
            "Spread 1; drift in the metric's units per run (negative: slower over time); regression: lower by that "
            "many spreads from the culprit on. wrong: an innocent commit named found; with no regression, any "
            "commit named."
        ],
    )


if __name__ == "__main__":
    main()
