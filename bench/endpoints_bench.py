"""Endpoints taken as read (the nightly path once a red failure reproduced; the CLI's --trust-endpoints) against
endpoints calibrated on the bisect runner first, on the same simulated incidents.

    python bench/endpoints_bench.py [--seeds 3000] [--commits 64]

Each incident: commits c0 (GOOD) .. cN (BAD), the culprit drawn uniformly, a 5% flaky test (a good commit fails
one run in 20) or a deterministic one, the flake rate `auto`; CI read GOOD green and BAD red. The revert's A/B on
HEAD = BAD is included, as the bot runs it. Runs are the bisect runner's (CI's readings are free)."""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
from dataclasses import replace
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.bisect.engine import decide  # noqa: E402
from bot.domain.bisect.model import Kind, Problem, Run, Settings, State  # noqa: E402
from bot.domain.bisect.simulate import FlakyTest, git_bisect, linear_graph  # noqa: E402
from bot.domain.bisect.verdict import RawResult  # noqa: E402

COMMAND = "python " + shlex.join(["bench/endpoints_bench.py", *sys.argv[1:]])


def incident(n: int, culprit: int, k: int, flake: float, trust: bool, seed: int) -> tuple[int, int, bool]:
    """(runner runs, rounds, right) of one bisection with its revert's A/B."""
    rng = random.Random(seed)
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings(trust_endpoints=trust), head=bad)
    test = FlakyTest(culprit, flake, rng)
    runs = [Run(good, Kind.CI, RawResult(0)), Run(bad, Kind.CI, RawResult(1))]
    state, rounds = State(), 0
    while True:
        d = decide(problem, state, runs, (), k)
        state = d.state
        if d.wants_revert:
            state = replace(state, revert="revert")
            continue
        if d.outcome is not None:
            return sum(r.kind is not Kind.CI for r in runs), rounds, d.outcome.culprit == f"c{culprit}"
        rounds += 1
        for p in d.probes:
            sha = bad if p.kind is Kind.AB_HEAD else good if p.kind is Kind.AB_REVERT else p.sha
            runs.append(Run(p.sha, p.kind, test.run(sha), p.round))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--seeds", type=int, default=3000)
    parser.add_argument("--commits", type=int, default=64)
    args = parser.parse_args()
    rows = []
    for flake in (0.0, 0.05):
        for k in (1, 3):
            seeds = range(args.seeds)
            culprits = [random.Random(s).randint(1, args.commits) for s in seeds]
            git = statistics.fmean(git_bisect(args.commits, FlakyTest(c))[1] for c in culprits) if flake == 0 else None
            got = {}
            for trust in (False, True):
                res = [incident(args.commits, c, k, flake, trust, s) for s, c in zip(seeds, culprits)]
                got[trust] = (
                    sum(r[2] for r in res) / len(res),
                    statistics.fmean(r[0] for r in res),
                    statistics.fmean(r[1] for r in res),
                )
            (r0, n0, d0), (r1, n1, d1) = got[False], got[True]
            rows.append(
                [
                    f"{flake:.0%}",
                    str(k),
                    f"{r0:.2%} / {r1:.2%}",
                    f"{n0:.2f} / {n1:.2f}",
                    f"{n1 / n0:.2f}x",
                    f"{d0:.2f} / {d1:.2f}",
                    f"{git:.2f}" if git is not None else "-",
                ]
            )
    tables.table(
        f"Endpoints calibrated / taken as read ({args.commits} commits, {args.seeds} incidents each, A/B included)",
        COMMAND,
        ["flaky runs", "k", "right", "runner runs (mean)", "ratio", "rounds (mean)", "git bisect run (search)"],
        rows,
        [
            "Same incidents and seeds on both sides. `git bisect run` spends its runs on the search alone (no "
            "confirmation, no A/B) and cannot bisect a flaky test."
        ],
    )


if __name__ == "__main__":
    main()
