"""Benchmark: the revert's A/B of a noisy benchmark (bot.domain.bisect.sampled: HEAD and HEAD + revert read in turn,
judged on their pairs), through the engine on simulated histories, this tree's engine beside another checkout's on
the same histories.

    python bench/ab_bench.py                             # 500 histories a row (about 10 minutes on 2 cores)
    python bench/ab_bench.py --tree /path/to/old         # the same histories on another checkout's engine
    python bench/ab_bench.py --rows '4,4,4,-0.15;2,2,0,0'   # only these rows

Each history: a throughput benchmark (lower is worse) over 16 commits reading 100 plus Gaussian noise of spread 1,
`search` spreads lower from commit 6 on; the runner drifts `drift` per run in the order runs are made (negative:
slower over time). HEAD, on c16, reads `head` spreads lower than 100 and HEAD + revert `taken` spreads better than
HEAD: `taken` = `head` is a revert that undoes it all, 0 one that takes nothing away (the commit reverted innocent,
or HEAD recovered by a later commit), and `head` below `search` a HEAD a later commit won some of the shift back
on -- the culprit's estimated shift then overshoots what its revert can take away, as a search that stopped on a
lucky draw overshoots it. The engine runs with the CLI's defaults for a benchmark (no threshold, lower is worse,
--confidence 0.99) on k = 1 worker; the revert is made when the engine asks.
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
from dataclasses import dataclass, replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)
import trees  # noqa: E402

COMMAND = "python " + shlex.join(["bench/ab_bench.py", *sys.argv[1:]])
N, CULPRIT = 16, 6
# (search shift, HEAD's shift, what the revert takes away, drift per run), in spreads
ROWS = [
    (2.0, 2.0, 2.0, 0.0),
    (4.0, 4.0, 4.0, 0.0),
    (2.0, 2.0, 2.0, -0.05),
    (4.0, 4.0, 4.0, -0.15),
    (3.0, 2.0, 2.0, 0.0),
    (4.0, 2.5, 2.5, 0.0),
    (2.0, 2.0, 0.0, 0.0),
    (4.0, 4.0, 0.0, 0.0),
    (2.0, 2.0, 0.0, -0.05),
]


@dataclass
class Runner:
    """The bisect runner: every run reads 100 less its commit's shift, plus its drift so far and noise of spread 1."""

    search: float
    head: float
    taken: float
    drift: float
    rng: random.Random
    made: int = 0

    def read(self, sha: str) -> float:
        self.made += 1
        if sha == "head":
            shift = self.head
        elif sha == "revert":
            shift = self.head - self.taken
        else:
            shift = self.search if int(sha[1:]) >= CULPRIT else 0.0
        return 100.0 - shift + self.drift * self.made + self.rng.gauss(0.0, 1.0)


def histories_of(spec: tuple, seeds: range, tree: str | None) -> list[tuple[bool, bool, int, int, int]]:
    """Per history: (culprit named, A/B proven, A/B runs of HEAD, of HEAD + revert, all runs)."""
    trees.use_tree(tree)
    from bot.domain.bisect.engine import decide
    from bot.domain.bisect.model import Kind, Problem, Run, Settings, State, Status
    from bot.domain.bisect.simulate import linear_graph
    from bot.domain.bisect.verdict import MetricRule, RawResult

    graph, good, bad = linear_graph(N)
    graph["head"] = (bad,)
    graph["revert"] = ("head",)
    problem = Problem(graph, good, bad, Settings(metric=MetricRule(None, higher_is_worse=False)), head="head")
    out = []
    for seed in seeds:
        runner = Runner(*spec, rng=random.Random(seed))
        runs: list = []
        state = State()
        while True:
            d = decide(problem, state, runs, (), 1)
            state = replace(d.state, revert="revert") if d.wants_revert else d.state
            if d.outcome is not None:
                break
            runs += [Run(p.sha, p.kind, RawResult(0, metric=runner.read(p.sha)), p.round) for p in d.probes]
        named = d.outcome.status is Status.FOUND and d.outcome.culprit == f"c{CULPRIT}"
        proven = named and d.outcome.ab is not None and d.outcome.ab.passed
        head, revert = (sum(r.kind is kind for r in runs) for kind in (Kind.AB_HEAD, Kind.AB_REVERT))
        out.append((named, proven, head, revert, len(runs)))
    return out


def row(spec: tuple, histories: int, tree: str | None, jobs: int) -> list[str]:
    found = [h for part in trees.over_processes(histories_of, lambda s: (spec, s, tree), histories, jobs) for h in part]
    named = [h for h in found if h[0]]
    unproven = [h for h in named if not h[1]]
    budget = sum(min(h[2], h[3]) >= 20 for h in unproven)  # Settings.max_ab_samples each: undecided
    search, head, taken, drift = spec
    return [
        f"{search:g}",
        f"{head:g}",
        f"{taken:g}",
        f"{drift:+g}" if drift else "0",
        str(histories),
        f"{len(named)}",
        f"{len(named) - len(unproven)} ({100 * (len(named) - len(unproven)) / max(1, len(named)):.1f}%)",
        f"{len(unproven) - budget} / {budget}",
        f"{statistics.fmean(h[2] + h[3] for h in named):.1f}" if named else "-",
        f"{statistics.fmean(h[4] for h in found):.1f}",
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.set_defaults(histories=500)
    parser.add_argument("--rows", help="only rows search,head,taken,drift;... (e.g. 4,4,4,-0.15)")
    args = parser.parse_args()
    rows = trees.rows_given(args.rows, ROWS, (float, float, float, float))
    out = trees.each_row(rows, lambda spec: row(spec, args.histories, args.tree, args.jobs))
    which = f"engine of {args.tree}" if args.tree else "this tree"
    tables.table(
        f"The revert's A/B through the engine ({which}; 16 commits, culprit c6, k = 1)",
        COMMAND,
        [
            "search shift (sd)",
            "HEAD's shift",
            "the revert takes away",
            "drift per run",
            "histories",
            "culprit named",
            "A/B proven (of named)",
            "not proven: refused / at 20 each",
            "A/B runs, mean (named)",
            "all runs, mean",
        ],
        out,
        [
            "Shifts in spreads of the noise, lower is worse. A/B proven: the revert proven, the culprit's outcome then "
            "acted on; with nothing taken away (the revert changes nothing) every proof is wrong. not proven: read "
            "alike, or still undecided at 20 runs of each side (Settings.max_ab_samples), where each side is "
            "judged alone against the split's levels and that did not prove it either."
        ],
    )


if __name__ == "__main__":
    main()
