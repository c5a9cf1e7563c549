"""Benchmark: several red tests bisected together (bot.domain.bisect.group) against one bisection per test.

    python bench/group_bench.py              # 400 incidents per k (~2 minutes on 2 cores)
    python bench/group_bench.py --quick      # 60 incidents per k
    python bench/group_bench.py --three-culprits --k 3   # issue 33's suite

Simulated incidents on a linear range of --commits commits: 2-6 red tests, 1-3 distinct culprits among them,
0-2 flaky tests (no culprit: they fail anywhere with --flaky-rate, and their red reading at BAD was one such
failure); every test fails a good commit with --flake-rate. Each test's first reading of BAD is red (the red
run it comes from). The same incident, with the same tests, is bisected both ways at k = 1 and 4 runners:

- together: one search, a step runs every undecided test at its commit and counts as one GPU run;
- alone: one bisection per test, each with its own GPU runs, one after the other on the same k runners.

--culprit-rate R makes every culprit intermittent (failing R of the time from its commit on); --good-as-read
takes GOOD as read, as the CLI does by default (otherwise each test runs it in calibration).

A test is right when a culprit test names its culprit (found) and a flaky test names none (no found or
ambiguous outcome); a culprit test "wrong" named an innocent commit, one "dismissed" ended saying there is
nothing to bisect (no_culprit or not_reproducible). Prints markdown tables (progress on stderr).
"""

from __future__ import annotations

import argparse
import random
import shlex
import statistics
import sys
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)

from bot.domain.bisect.model import Settings, Status  # noqa: E402
from bot.domain.bisect.simulate import FlakyTest, RedFirst, red_tests, simulate, simulate_group  # noqa: E402

COMMAND = "python " + shlex.join(["bench/group_bench.py", *sys.argv[1:]])
NAMED = (Status.FOUND, Status.AMBIGUOUS)
DISMISSED = (Status.NO_CULPRIT, Status.NOT_REPRODUCIBLE)


@dataclass(frozen=True)
class Incident:
    culprits: dict[str, int | None]  # test -> its culprit's position (None: a flaky test)

    @property
    def distinct(self) -> int:
        return len({c for c in self.culprits.values() if c is not None})


def incident(rng: random.Random, n: int) -> Incident:
    return Incident(red_tests(rng, n))


def three_culprits(rng: random.Random, n: int) -> Incident:
    """Issue 33's suite: six tests, two broken together at one commit, one each at two others, one flaky, one green
    (not red at BAD, so not bisected)."""
    a, b, c = rng.sample(range(1, n + 1), 3)
    return Incident({"t0": a, "t1": a, "t2": b, "t3": c, "flaky0": None})


def tests_of(
    inc: Incident, n: int, flake: float, flaky_rate: float, seed: int, culprit_rate: float = 1.0
) -> dict[str, RedFirst]:
    return {
        t: RedFirst(
            FlakyTest(
                n + 1 if c is None else c,
                flaky_rate if c is None else flake,
                random.Random(seed * 1000 + i),
                rate=culprit_rate,
            ),
            f"c{n}",
        )
        for i, (t, c) in enumerate(inc.culprits.items())
    }


def right(inc: Incident, test: str, status: Status, culprit: str | None) -> bool:
    expected = inc.culprits[test]
    if expected is None:
        return status not in NAMED
    return status is Status.FOUND and culprit == f"c{expected}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--incidents", type=int, default=400)
    parser.add_argument("--commits", type=int, default=64)
    parser.add_argument("--flake-rate", type=float, default=0.05)
    parser.add_argument("--flaky-rate", type=float, default=0.3)
    parser.add_argument("--quick", action="store_true")
    parser.add_argument(
        "--three-culprits",
        action="store_true",
        help="every incident issue 33's suite: two tests broken at one commit, one each at two others, one flaky",
    )
    parser.add_argument("--k", type=int, action="append", help="runners (repeatable; default 1 and 4)")
    parser.add_argument(
        "--culprit-rate", type=float, default=1.0, help="how often a culprit test fails from its commit on (default 1)"
    )
    parser.add_argument("--good-as-read", action="store_true", help="GOOD taken as read, the CLI's default")
    args = parser.parse_args()
    if not 0 < args.culprit_rate <= 1:
        parser.error("--culprit-rate must be in (0, 1]")
    settings = Settings(good_as_read=args.good_as_read)
    count = 60 if args.quick else args.incidents
    n = args.commits
    rows, by_shape = [], []
    draw = three_culprits if args.three_culprits else incident
    for k in args.k or (1, 4):
        runs = {"together": [], "alone": []}
        rounds = {"together": [], "alone": []}
        ratios: list[float] = []
        good = {(how, flaky): 0 for how in ("together", "alone") for flaky in (False, True)}
        dismissed = {"together": 0, "alone": 0}
        wrong = {"together": 0, "alone": 0}
        judged = {False: 0, True: 0}
        shapes: dict[int, list[float]] = {}
        for seed in range(count):
            inc = draw(random.Random(seed), n)
            drawn = (inc, n, args.flake_rate, args.flaky_rate, seed, args.culprit_rate)
            together = simulate_group(n, tests_of(*drawn), k, settings)
            alone = {t: simulate(n, test, k, settings) for t, test in tests_of(*drawn).items()}
            spent_alone = sum(r.runs for r in alone.values())
            runs["together"].append(together.runs)
            runs["alone"].append(spent_alone)
            rounds["together"].append(together.rounds)
            rounds["alone"].append(sum(r.total_rounds for r in alone.values()))
            ratios.append(together.runs / spent_alone)
            shapes.setdefault(inc.distinct, []).append(together.runs / spent_alone)
            for t, culprit in inc.culprits.items():
                flaky = culprit is None
                judged[flaky] += 1
                out = together.outcomes[t]
                good["together", flaky] += right(inc, t, out.status, out.culprit)
                good["alone", flaky] += right(inc, t, alone[t].outcome.status, alone[t].outcome.culprit)
                if not flaky:
                    for how, told in (("together", out), ("alone", alone[t].outcome)):
                        dismissed[how] += told.status in DISMISSED
                        wrong[how] += told.culprit not in (None, f"c{culprit}")
            if seed % 50 == 49:
                print(f"k={k}: {seed + 1}/{count} incidents", file=sys.stderr, flush=True)
        total = sum(runs["together"]) / sum(runs["alone"])
        for how in ("alone", "together"):
            rows.append(
                [
                    str(k),
                    how,
                    f"{statistics.fmean(runs[how]):.1f}",
                    f"{statistics.median(runs[how]):g}",
                    f"{statistics.fmean(rounds[how]):.1f}",
                    *(
                        f"{good[how, flaky]}/{judged[flaky]} ({100 * good[how, flaky] / judged[flaky]:.1f}%)"
                        for flaky in (False, True)
                    ),
                    f"{wrong[how]} / {dismissed[how]}",
                    f"{total:.2f}x (median {statistics.median(ratios):.2f}x)" if how == "together" else "1",
                ]
            )
        for distinct, values in sorted(shapes.items()):
            by_shape.append([str(k), str(distinct), str(len(values)), f"{statistics.median(values):.2f}x"])
    tables.table(
        f"Several red tests{': three culprits' if args.three_culprits else ''}: one search against one bisection "
        f"per test (n = {n}, {count} incidents per k)",
        COMMAND,
        [
            "k",
            "how",
            "GPU runs (mean)",
            "GPU runs (median)",
            "rounds (mean)",
            "culprit tests right",
            "flaky tests blamed on nothing",
            "culprit tests wrong / dismissed",
            "runs vs alone",
        ],
        rows,
        [
            (
                "Incidents: five red tests, two broken at one commit, one each at two others, one flaky"
                if args.three_culprits
                else "Incidents: 2-6 red tests, 1-3 distinct culprits, 0-2 flaky tests"
            )
            + f" (failing anywhere at {args.flaky_rate:.0%}); every test fails a good commit at "
            f"{args.flake_rate:.0%}"
            + (
                f", a culprit test {args.culprit_rate:.0%} of the time from its commit on"
                if args.culprit_rate < 1
                else ""
            )
            + ("; GOOD taken as read (the CLI's default)" if args.good_as_read else "")
            + ". `runs vs alone`: the "
            "total GPU runs of all incidents together over alone, and the median of the per-incident ratios. Alone, "
            "the bisections run one after another on the same k runners, so their rounds add up."
        ],
    )
    tables.table(
        "Runs together over alone, by the number of distinct culprits",
        COMMAND,
        ["k", "distinct culprits", "incidents", "median ratio"],
        by_shape,
    )


if __name__ == "__main__":
    main()
