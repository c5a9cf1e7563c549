"""Benchmark: a sampled bisection's endpoint gate (bot.domain.bisect.sampled: GOOD and BAD read until the search
starts or the bisection ends "not reproducible") on the engine's simulator, this tree's engine beside another
checkout's on the same histories (issue 33, item 1).

    python bench/endpoint_gate_bench.py                       # 2,000 histories a row (about 5 minutes a tree, --jobs 1)
    python bench/endpoint_gate_bench.py --histories 300       # a shorter run
    python bench/endpoint_gate_bench.py --tree /path/to/old   # the same histories on another checkout's engine

Each history: a throughput benchmark over n commits reading 100 plus noise of spread 1 (`simulate.noise`), lower by
`regression` spreads from a uniformly drawn culprit on (none: BAD reads like GOOD, and the right ending is no
culprit), the runner drifting by `drift` per run; the CLI's defaults for a benchmark (no threshold, lower is
worse, --confidence 0.99) on k workers in synchronous rounds. Each row gives the share of histories per ending
(`not_reproducible` at the endpoints, `inconclusive` at the run budget, `no_culprit`, a culprit right or wrong),
the endpoints' runs and all runs.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)
import trees  # noqa: E402

from bot.domain.bisect.simulate import NoisyMetric  # noqa: E402  (the histories: always this tree's)

COMMAND = "python " + shlex.join(["bench/endpoint_gate_bench.py", *sys.argv[1:]])
# (n, k, shape, drift per run, regression in spreads; 0: none)
ROWS = [
    (64, 2, "gauss", 0.0, 0.0),
    (64, 1, "gauss", 0.0, 0.0),
    (64, 4, "gauss", 0.0, 0.0),
    (512, 2, "gauss", 0.0, 0.0),
    (64, 1, "gauss", -0.1, 0.0),
    (64, 2, "gauss", -0.1, 0.0),
    (64, 2, "heavy", 0.0, 0.0),
    (64, 2, "bimodal", 0.0, 0.0),
    (64, 2, "outliers", 0.0, 0.0),
    (64, 2, "gauss", 0.0, 1.0),
    (64, 2, "gauss", 0.0, 1.5),
    (64, 2, "gauss", 0.0, 2.0),
    (64, 1, "gauss", 0.0, 2.0),
    (64, 2, "gauss", 0.0, 3.0),
    (64, 2, "gauss", -0.05, 2.0),
    (64, 2, "heavy", 0.0, 2.0),
    (64, 2, "bimodal", 0.0, 2.0),
    (64, 2, "outliers", 0.0, 2.0),
]
ENDINGS = ("not_reproducible", "no_culprit", "inconclusive", "right", "wrong")


def histories_of(spec: tuple, seeds: range, tree: str | None) -> tuple[Counter, list[int], list[int]]:
    """The endings, the endpoints' runs and all runs over some seeds (one worker process's share)."""
    trees.use_tree(tree)
    from bot.domain.bisect.model import Kind, Settings, Status
    from bot.domain.bisect.simulate import simulate
    from bot.domain.bisect.verdict import MetricRule

    n, k, shape, drift, regression = spec
    settings = Settings(metric=MetricRule(None, higher_is_worse=False))
    endings: Counter = Counter()
    endpoint_runs, runs = [], []
    for seed in seeds:
        rng = random.Random(seed * 7919 + n)
        culprit = rng.randint(1, n) if regression else None
        metric = NoisyMetric(culprit, -regression, rng=random.Random(seed), shape=shape, drift=drift)
        result = simulate(n, metric, k, settings)
        if result.outcome.status is Status.FOUND:
            endings["right" if result.culprit_index() == culprit else "wrong"] += 1
        else:
            endings[result.outcome.status.value] += 1
        endpoint_runs.append(result.runs_by_kind.get(Kind.CALIBRATE, 0))
        runs.append(result.runs)
    return endings, endpoint_runs, runs


def row(spec: tuple, histories: int, tree: str | None, jobs: int) -> list[str]:
    parts = trees.over_processes(histories_of, lambda seeds: (spec, seeds, tree), histories, jobs)
    endings: Counter = sum((p[0] for p in parts), Counter())
    endpoint_runs = [r for p in parts for r in p[1]]
    runs = [r for p in parts for r in p[2]]
    n, k, shape, drift, regression = spec
    return [
        str(n),
        str(k),
        shape,
        f"{drift:+g}" if drift else "0",
        f"{regression:g} sd" if regression else "none",
        str(histories),
        *(f"{100 * endings[e] / histories:.1f}%" for e in ENDINGS),
        f"{statistics.mean(endpoint_runs):.1f}",
        f"{statistics.mean(runs):.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.add_argument("--rows", help="only rows n,k,shape,drift,regression;... (e.g. 64,2,gauss,0,0)")
    args = parser.parse_args()
    rows = trees.rows_given(args.rows, ROWS, (int, int, str, float, float))
    out = trees.each_row(rows, lambda spec: row(spec, args.histories, args.tree, args.jobs))
    which = f"engine of {args.tree}" if args.tree else "this tree"
    tables.table(
        f"The endpoint gate: how sampled bisections end ({which})",
        COMMAND,
        [
            "n",
            "k",
            "noise",
            "drift per run",
            "regression",
            "histories",
            "not reproducible",
            "no culprit",
            "inconclusive",
            "right",
            "wrong",
            "endpoint runs (mean)",
            "runs (mean)",
        ],
        out,
        [
            "Spread 1; regression: lower by that many spreads from the culprit on (none: BAD reads like GOOD). "
            "wrong: a culprit named that is not the first worse commit (with no regression, any culprit named)."
        ],
    )


if __name__ == "__main__":
    main()
