"""Benchmark: the whole slowdown path on simulated nightly histories -- the change point found from CI's nightly
series, the commits between its runs bisected by the sampled search, the culprit proven by the A/B -- against
Pinpoint's fixed design bisecting the same ranges (issue 32, item 8).

    python bench/slowdown_path_bench.py                               # 500 histories a row (28 minutes on 2 cores)
    python bench/slowdown_path_bench.py --histories 40 --jobs 2      # a shorter run
    python bench/slowdown_path_bench.py --rows '0.02,0.05;0.02,0'    # only these rows (noise,shift; 0: flat)

A history: 60 nightly runs of a throughput benchmark (lower is worse) reading 100 plus Gaussian noise of sd
`noise` x 100; before each night 4-12 commits land (uniform) and the night reads the newest. In a shifted history
one commit among those landed before night `at` (uniform in 20..40; the commit uniform among that night's) makes
every later commit read `shift` x 100 lower; a flat history has no such commit. The bisect runner reads any commit
the same way (same level, same noise, a fresh draw per run).

Every night from night 10 on (the policy's history so far), the bot's own decision runs on the series kept so far
(bot.domain.perf.slowdowns.assess: E-Divisive at its default false-alarm rate of 1% a night and 2% smallest effect,
the slowdowns its worse way, those overlapping a bisection already started known), and each new slowdown is bisected
as bot.service.slowdowns starts it: the commits from its GOOD run to its BAD run, no threshold, lower is worse,
confidence 0.99 (the policy's default), `--workers` runners (the policy's default parallelism is 1), CI's readings
of the runs between as free evidence (bot.domain.perf.slowdowns.ci_readings, given to the engine as the ledger gives
them), HEAD the newest night's commit (the bot's `onto`), the revert's A/B on it when the engine asks (HEAD + revert
reads without the shift when the commit reverted is the culprit, like HEAD otherwise). A comment or a revert is
written when the outcome is `found` with the A/B proven (bot.service.slowdown_report): "acted on". Runs are the
bisect runner's: calibration, search, confirmation and A/B; CI's nightly readings are free.

Pinpoint bisects each same range (GOOD and BAD as the bot's) with its fixed design as bench/noisy_bench.py models it
(10 attempts per change, 10 more when undecided up to 20, min(KS, Mann-Whitney U) p <= 0.01 different, > 0.1
same, binary search), on fresh draws of the same benchmark; it has no A/B, and a culprit it names is what it
reports (its comment on the change). Its runs do not depend on --workers.

Prints two markdown tables (progress on stderr): shifted histories and flat ones.
"""

from __future__ import annotations

import argparse
import functools
import random
import shlex
import statistics
import sys
import time
from dataclasses import dataclass, replace
from pathlib import Path

from scipy import stats

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import tables  # noqa: E402  (bench/tables.py, beside this script)
import trees  # noqa: E402
from noisy_bench import Pinpoint  # noqa: E402  (Pinpoint's design, as the noisy benchmark models it)

from bot.domain.bisect.engine import decide  # noqa: E402
from bot.domain.bisect.model import Kind, Problem, Run, Settings, State, Status  # noqa: E402
from bot.domain.bisect.simulate import linear_graph  # noqa: E402
from bot.domain.bisect.verdict import MetricRule, RawResult  # noqa: E402
from bot.domain.perf import slowdowns  # noqa: E402
from bot.domain.policy import Direction, Series  # noqa: E402

COMMAND = "python " + shlex.join(["bench/slowdown_path_bench.py", *sys.argv[1:]])
NIGHTS, FIRST_NIGHT, SHIFT_NIGHTS, LANDED, LEVEL = 60, 10, (20, 40), (4, 12), 100.0
# (noise, shift), relative to the level; shift 0: a flat history
ROWS = [(0.02, 0.05), (0.02, 0.03), (0.02, 0.10), (0.01, 0.05), (0.04, 0.05), (0.01, 0.0), (0.02, 0.0), (0.04, 0.0)]
TEST, METRIC = "throughput-bench", "output_throughput"
SPECS = {METRIC: Series(name=METRIC, pattern=r"tok/s: (?P<value>[\d.]+)", direction=Direction.LOWER_IS_WORSE)}
SETTINGS = Settings(confidence=0.99, metric=MetricRule(None, higher_is_worse=False))


@dataclass(frozen=True)
class Bisected:
    """One slowdown's bisection, and Pinpoint's of the same range."""

    night: int  # the night (runs analysed) it started on
    holds: bool  # its range holds the culprit (False in a flat history)
    commits: int  # the range's
    runs: int  # the bisect runner's
    by_kind: tuple[int, int, int]  # ... of them: endpoints (calibration), search and confirmation, A/B
    status: str
    named_right: bool  # `found`, the culprit
    acted: bool  # `found` with the A/B proven: a comment or a revert is written
    acted_right: bool
    drift: bool  # the engine fitted a drift in time beside the culprit's shift (its effect says so)
    pin_runs: int
    pin_named: bool
    pin_right: bool


@dataclass(frozen=True)
class History:
    at: int | None  # the first night reading the culprit (None: flat)
    bisections: tuple[Bisected, ...]


def tips_of(rng: random.Random) -> list[int]:
    """Each night's commit (its position in the history): 4-12 commits land before each night."""
    tips = [0]
    for _ in range(NIGHTS - 1):
        tips.append(tips[-1] + rng.randint(*LANDED))
    return tips


@dataclass
class Benchmark:
    """The history's benchmark: a commit at position `pos` reads LEVEL, `shift` lower from the culprit on (unless
    the culprit is reverted on it), plus Gaussian noise of sd `noise` x LEVEL."""

    culprit: int | None
    shift: float
    noise: float
    rng: random.Random

    def read(self, pos: int, reverted: int | None = None) -> float:
        slow = self.culprit is not None and pos >= self.culprit and reverted != self.culprit
        return LEVEL * (1 - self.shift if slow else 1.0) + self.noise * LEVEL * self.rng.gauss(0.0, 1.0)


@dataclass
class InRange:
    """The benchmark on a range's commits c0 (GOOD, at `good`) .. cn, as the engine's and Pinpoint's runs name them."""

    bench: Benchmark
    good: int

    def run(self, sha: str) -> RawResult:
        return RawResult(0, metric=self.bench.read(self.good + int(sha[1:])))


def history(noise: float, shift: float, seed: int, workers: int) -> History:
    rng = random.Random(f"{seed}/{noise}/{shift}")
    tips = tips_of(rng)
    at = rng.randint(*SHIFT_NIGHTS) if shift else None
    culprit = rng.randint(tips[at - 1] + 1, tips[at]) if at is not None else None
    nightly = Benchmark(culprit, shift, noise, rng)
    readings = [nightly.read(tips[i]) for i in range(NIGHTS)]
    runs = tuple(slowdowns.Run(i, f"c{tips[i]}") for i in range(NIGHTS))
    known: list[tuple[int, int]] = []
    done = []
    for night in range(FIRST_NIGHT, NIGHTS + 1):
        series = slowdowns.SeriesTable(runs[:night], {METRIC: tuple(readings[:night])})
        for slowdown in slowdowns.assess(TEST, series, SPECS, known).to_bisect:
            # stored as bot.service.slowdowns stores its origin: the runs of its GOOD and BAD
            known.append((slowdown.good.run_id, slowdown.bad.run_id))
            good, bad, head = tips[slowdown.good.run_id], tips[slowdown.bad.run_id], tips[night - 1]
            ci = slowdowns.ci_readings(series, slowdown, slowdown.judged)
            draws = random.Random(f"{seed}/{noise}/{shift}/{night}/{good}")
            done.append(bisected(night, (good, bad, head), Benchmark(culprit, shift, noise, draws), ci, workers))
    return History(at, tuple(done))


def bisected(night: int, where: tuple[int, int, int], bench: Benchmark, ci: tuple, workers: int) -> Bisected:
    """The bot's bisection of commits GOOD..BAD (positions in the history), its A/B on HEAD (the newest night's
    commit, as bot.service.slowdowns sets `onto`), and Pinpoint's of the same range, each on its own draws."""
    good, bad, head = where
    n = bad - good
    holds = bench.culprit is not None and good < bench.culprit <= bad
    local = bench.culprit - good if holds and bench.culprit is not None else None
    runs, by_kind, status, named, ab_passed, drift = engine(n, bench, ci, good, head, workers)
    pin = Pinpoint(InRange(bench, good), n)  # type: ignore[arg-type]  (it reads `run(sha)` alone)
    pin_named = pin.bisect()
    acted = status is Status.FOUND and ab_passed
    return Bisected(
        night=night,
        holds=holds,
        commits=n,
        runs=runs,
        by_kind=by_kind,
        status=status.value,
        named_right=status is Status.FOUND and named == local,
        acted=acted,
        acted_right=acted and named == local,
        drift=drift,
        pin_runs=pin.runs,
        pin_named=pin_named is not None,
        pin_right=pin_named is not None and pin_named == local,
    )


def engine(
    n: int, bench: Benchmark, ci: tuple, good: int, head: int, workers: int
) -> tuple[int, tuple[int, int, int], Status, int | None, bool, bool]:
    """The engine on c0 (GOOD) .. cn (BAD) in synchronous rounds of `workers` runs, CI's readings given first as the
    ledger gives them (CiReading -> a run of kind CI); HEAD at position `head` of the history, the revert made on it
    when the engine asks. (runner runs, of them calibration / search and confirmation / A/B, status, the culprit's
    position in the range, A/B proven, a drift fitted)"""
    graph, first, last = linear_graph(n)
    head_sha = last if head == good + n else "HEAD"
    problem = Problem(graph, first, last, SETTINGS, head=head_sha)
    local_sha = lambda sha: f"c{int(sha[1:]) - good}"  # noqa: E731  (the history's commit, in the range)
    runs = [Run(local_sha(c.sha), Kind.CI, RawResult(0 if c.passed else 1, c.metric)) for c in ci]
    commits = InRange(bench, good)
    state = State()
    reverted: int | None = None
    while True:
        decision = decide(problem, state, runs, (), workers)
        state = decision.state
        if decision.wants_revert:
            reverted = good + int(decision.wants_revert[1:])
            state = replace(state, revert="REVERT")
            continue
        if decision.outcome is not None:
            out = decision.outcome
            named = int(out.culprit[1:]) if out.culprit else None
            count = lambda *kinds: sum(r.kind in kinds for r in runs)  # noqa: E731
            by_kind = (count(Kind.CALIBRATE), count(Kind.SEARCH, Kind.CONFIRM), count(Kind.AB_HEAD, Kind.AB_REVERT))
            drift = out.effect is not None and out.effect.drift is not None
            return sum(by_kind), by_kind, out.status, named, bool(out.ab and out.ab.passed), drift
        if not decision.probes:
            raise RuntimeError("the engine neither probed nor finished with nothing in flight")
        for p in decision.probes:
            if p.kind is Kind.AB_HEAD:
                raw = RawResult(0, metric=bench.read(head))
            elif p.kind is Kind.AB_REVERT:
                raw = RawResult(0, metric=bench.read(head, reverted))
            else:
                raw = commits.run(p.sha)
            runs.append(Run(p.sha, p.kind, raw, p.round))


def share(noise: float, shift: float, seeds: range, workers: int) -> list[History]:
    return [history(noise, shift, seed, workers) for seed in seeds]


def interval(hits: int, total: int) -> str:
    """The share and its 95% Clopper-Pearson interval."""
    if not total:
        return "-"
    low = stats.beta.ppf(0.025, hits, total - hits + 1) if hits else 0.0
    high = stats.beta.ppf(0.975, hits + 1, total - hits) if hits < total else 1.0
    return f"{100 * hits / total:.1f}% ({100 * low:.1f}-{100 * high:.1f}) {hits}/{total}"


def _mean_median(values: list[int]) -> str:
    return f"{statistics.fmean(values):.1f} ({statistics.median(values):g})" if values else "-"


def ratio(ours: list[int], theirs: list[int], draws: int = 2000) -> str:
    """Mean runs over Pinpoint's on the same incidents, with a 95% bootstrap interval (incidents resampled)."""
    if not ours:
        return "-"
    rng = random.Random(0)
    pairs = list(zip(ours, theirs))
    boot = []
    for _ in range(draws):
        sample = rng.choices(pairs, k=len(pairs))
        boot.append(sum(a for a, _ in sample) / sum(b for _, b in sample))
    boot.sort()
    low, high = boot[int(0.025 * draws)], boot[int(0.975 * draws) - 1]
    return f"{sum(ours) / sum(theirs):.2f}x ({low:.2f}-{high:.2f})"


def _kinds(found: list[Bisected]) -> str:
    return " / ".join(f"{statistics.fmean(b.by_kind[i] for b in found):.1f}" for i in range(3)) if found else "-"


def shifted_row(noise: float, shift: float, found: list[History]) -> list[str]:
    incidents = []  # each history's first bisection whose range holds the culprit, and the bisections after it
    again, missing = [], []
    for h in found:
        first = next((b for b in h.bisections if b.holds), None)
        if first is not None:
            incidents.append((h, first))
        again += [b for b in h.bisections if b.holds and b is not first]
        missing += [b for b in h.bisections if not b.holds]
    unproven = [b for _, b in incidents if b.named_right and not b.acted]
    wrong = sum(any(b.acted and not b.acted_right for b in h.bisections) for h in found)
    pin_wrong = sum(any(b.pin_named and not b.pin_right for b in h.bisections) for h in found)
    ours = [b.runs for _, b in incidents]
    theirs = [b.pin_runs for _, b in incidents]
    late = [b.night - h.at for h, b in incidents if h.at is not None]
    every = [b for h in found for b in h.bisections]
    return [
        f"{noise:.0%}",
        f"{shift:.0%}",
        str(len(found)),
        interval(len(incidents), len(found)),
        f"{statistics.median(late):g}" if late else "-",
        f"{statistics.median(b.commits for _, b in incidents):g}" if incidents else "-",
        interval(sum(b.named_right for _, b in incidents), len(incidents)),
        interval(sum(b.acted_right for _, b in incidents), len(incidents)),
        f"{len(unproven)} ({sum(b.drift for b in unproven)})",
        interval(wrong, len(found)),
        _mean_median(ours),
        _kinds([b for _, b in incidents]),
        interval(sum(b.pin_right for _, b in incidents), len(incidents)),
        interval(pin_wrong, len(found)),
        _mean_median(theirs),
        ratio(ours, theirs),
        f"{len(again)} ({sum(b.acted for b in again)})",
        f"{len(missing)} ({sum(b.acted for b in missing)})",
        f"{sum(b.runs for b in every) / len(found):.1f} / {sum(b.pin_runs for b in every) / len(found):.1f}",
    ]


def flat_row(noise: float, found: list[History]) -> list[str]:
    nights = len(found) * (NIGHTS - FIRST_NIGHT + 1)
    every = [b for h in found for b in h.bisections]
    per_100 = lambda count: f"{100 * count / nights:.2f} ({count})"  # noqa: E731
    return [
        f"{noise:.0%}",
        str(len(found)),
        str(nights),
        per_100(len(every)),
        per_100(sum(b.acted for b in every)),
        interval(sum(any(b.acted for b in h.bisections) for h in found), len(found)),
        _mean_median([b.runs for b in every]),
        _kinds(every),
        per_100(sum(b.pin_named for b in every)),
        _mean_median([b.pin_runs for b in every]),
    ]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    trees.add_arguments(parser)
    parser.set_defaults(histories=500)
    parser.add_argument("--workers", type=int, default=1, help="the bisect runner's runs at once (rounds of k)")
    parser.add_argument("--rows", help="only rows noise,shift;... (e.g. 0.02,0.05;0.02,0; shift 0: flat)")
    args = parser.parse_args()
    if args.tree:
        parser.error("--tree is not supported: the path's decisions and the engine are this tree's")
    rows = trees.rows_given(args.rows, ROWS, (float, float))
    shifted, flat = [], []
    for noise, shift in rows:
        started = time.monotonic()
        spec = functools.partial(lambda noise, shift, seeds: (noise, shift, seeds, args.workers), noise, shift)
        found = [h for part in trees.over_processes(share, spec, args.histories, args.jobs) for h in part]
        if shift:
            shifted.append(shifted_row(noise, shift, found))
        else:
            flat.append(flat_row(noise, found))
        print(f"noise {noise:g} shift {shift:g}: {time.monotonic() - started:.0f} s", file=sys.stderr, flush=True)
    if shifted:
        tables.table(
            f"The whole path on shifted histories: revert-bisect and Pinpoint's design on the same ranges "
            f"(k = {args.workers})",
            COMMAND,
            [
                "noise",
                "shift",
                "histories",
                "detected: range holds the culprit",
                "nights after the shift",
                "range (commits, median)",
                "revert-bisect names it",
                "... and acts on it (A/B proven)",
                "named, A/B not proven (a drift fitted)",
                "acted on another commit",
                "its runs, mean (median)",
                "endpoints / search / A/B (mean)",
                "Pinpoint names it",
                "Pinpoint names another commit",
                "Pinpoint's runs, mean (median)",
                "runs vs Pinpoint",
                "the shift bisected again (acted on)",
                "ranges missing the culprit (acted on)",
                "all runs per history: revert-bisect / Pinpoint",
            ],
            shifted,
            [
                "Shares with their 95% Clopper-Pearson interval and counts. detected: a slowdown was bisected whose "
                "range holds the culprit, of the histories; that first such bisection is the incident. names it: of "
                "the incidents, the culprit named (`found`); acts on it: ... with the A/B proven, hence a comment or "
                "a revert written on it. named, A/B not proven: incidents where the culprit was named but the A/B did"
                " not prove its revert (nothing written), and how many of them had the engine fit a drift in time "
                "beside the shift (these histories have none). acted on another commit / Pinpoint names another "
                "commit: of the histories, those where any bisection of the history wrote on (named) an innocent "
                "commit. Runs: the incident's bisection, calibration + search + confirmation + A/B; Pinpoint's on the"
                " same range (it has no A/B); runs vs Pinpoint: the ratio of their means, with a 95% bootstrap "
                "interval. nights after the shift: median of the nights read from the culprit's on when the "
                "incident's bisection started. the shift bisected again: later bisections whose range holds the "
                "culprit too (not known: the change point placed elsewhere), over all histories, and how many were "
                "acted on again. ranges missing the culprit: bisections of a misplaced or false change point. All "
                "runs: every bisection of the history, Pinpoint bisecting the same ranges."
            ],
        )
    if flat:
        tables.table(
            f"The whole path on flat histories: what is acted on when nothing changed (k = {args.workers})",
            COMMAND,
            [
                "noise",
                "histories",
                "nights analysed",
                "bisections started /100 nights (count)",
                "comment or revert /100 nights (count)",
                "histories with one",
                "runs per bisection, mean (median)",
                "endpoints / search / A/B (mean)",
                "Pinpoint culprits named /100 nights (count)",
                "Pinpoint's runs per bisection, mean (median)",
            ],
            flat,
            [
                f"Each history analysed every night from night {FIRST_NIGHT} to {NIGHTS}; every slowdown the "
                "bot's decision starts is bisected by revert-bisect and, on the same range, by Pinpoint's design."
            ],
        )


if __name__ == "__main__":
    main()
