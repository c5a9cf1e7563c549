"""From a test's stored series to the slowdowns worth bisecting. Pure: the caller reads the points and the bisections
already started from the store, and starts what this says (bot.service.slowdowns).

- The change points are those of the test's metrics tested together (bot.domain.perf.per_metric: the night's
  false-alarm rate across them, each metric's own `min_effect`); the same call the dashboard's series page makes.
- A change point the metric's better way (a speed-up) is no slowdown: never acted on.
- A slowdown that a later change point of the same metric undid -- the opposite way, to a level within the metric's
  `min_effect` of the level before the slowdown (or better) -- is recovered: reported, never bisected.
- The slowdowns left are grouped by the nights they may have come at (below): the metrics of one test that got
  slower at the same run -- or at runs E-Divisive placed a night apart, whose ranges overlap -- are one bisection,
  over the union of their ranges, and every one of them is judged: the engine's group search (bot.domain.bisect.group)
  with a member per metric, each its own posterior over the shared steps, sampled against GOOD and BAD by its own
  direction. A step is one run of the benchmark at one commit, each metric it carries read from that run's output
  (runners.metric.metric_cases), as a JUnit report's cases are read from one run: no benchmark runs once per metric.
  So two commits of one night's range that slowed two metrics (batch 1's latency, batch 64's throughput) are two
  culprits, each found, confirmed and proven by its own A/B, and a commit that slowed several is one culprit,
  reverted once. `shifts[0]`, the largest effect, heads what is said of the slowdown.
- Slowdowns of different tests at the same night are bisected one after another, never together: each test is its
  own benchmark command (its `probe`), so their steps cannot share a run -- a step would run each benchmark in turn,
  a GPU benchmark's minutes each, for as many runs as bisecting them apart, with their runners, needs and timeouts
  tied together.
- The bisection's range covers every night the shift may have come at, not only the change point's: E-Divisive
  places a shift where the two sides' distributions differ most, and a few noisy nights next to it can put it
  nights away (a stretch that reads halfway between the two levels). Between its neighbouring change points, every
  split of the metric's readings that a shift of the mean explains about as well as the best one -- its residual sum
  of squares within the 99% likelihood-ratio bound, chi-squared with one degree of freedom (Hinkley's interval for a
  change point's location, approximately) -- is a place the shift may be; GOOD is the last run before the earliest
  of them and BAD the first run after the latest (E-Divisive's own among them). A wider range costs the search a
  step per doubling; a range that misses the culprit costs the whole bisection.
- A slowdown is known -- bisected or being bisected -- when its range (GOOD's run to BAD's) overlaps the range of a
  bisection already started from a change point of the test: a night later the change point may sit a run or more
  away from where it was first seen, even outside the first one's two runs, and it is the same shift as long as the
  nights it may have come at meet those the first bisection searched.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

import numpy as np
from scipy import special  # scipy.stats computes its quantiles there; importing it takes each bot start 0.5 s

from bot.domain.perf.changes import Change, ChangeSettings, Direction
from bot.domain.perf.per_metric import changes
from bot.domain.perf.recovery import recovery
from bot.domain.policy import Direction as PolicyDirection
from bot.domain.policy import OnSlowdown, Policy, Series, Test
from bot.domain.requests import CiReading


class Point(Protocol):
    """One run's reading of one metric, as stored (bot.ports.store.SeriesPoint)."""

    @property
    def run_id(self) -> int: ...
    @property
    def run_attempt(self) -> int: ...
    @property
    def sha(self) -> str: ...
    @property
    def started_at(self) -> datetime: ...
    @property
    def value(self) -> float | None: ...
    @property
    def url(self) -> str: ...


@dataclass(frozen=True)
class Run:
    run_id: int
    sha: str
    url: str = ""


@dataclass(frozen=True)
class SeriesTable:
    """A test's metrics on the runs that read any of them, oldest first: `values[metric][i]` is run i's reading."""

    runs: tuple[Run, ...]
    values: Mapping[str, tuple[float | None, ...]]

    @classmethod
    def of(cls, points: Mapping[str, Iterable[Point]]) -> SeriesTable:
        """Each metric's points on the runs of them all (each run's newest attempt), in the order the runs started."""
        newest: dict[int, Point] = {}
        for metric_points in points.values():
            for p in metric_points:
                if p.run_id not in newest or p.run_attempt > newest[p.run_id].run_attempt:
                    newest[p.run_id] = p
        ordered = sorted(newest.values(), key=lambda p: (p.started_at, p.run_id))
        at = {p.run_id: k for k, p in enumerate(ordered)}
        values: dict[str, list[float | None]] = {}
        for name, metric_points in points.items():
            row: list[float | None] = [None] * len(ordered)
            for p in metric_points:
                row[at[p.run_id]] = p.value
            values[name] = row
        return cls(tuple(Run(p.run_id, p.sha, p.url) for p in ordered), {k: tuple(v) for k, v in values.items()})


@dataclass(frozen=True)
class Shift:
    """One metric's change point, with the runs either side of it."""

    change: Change
    before: Run  # the last run before the shift that read the metric
    after: Run  # the first run after it

    @property
    def metric(self) -> str:
        return self.change.metric

    @property
    def half_width(self) -> float:
        return (self.change.high - self.change.low) / 2


@dataclass(frozen=True)
class Slowdown:
    """The metrics of one test that got slower at the same run: one bisection from `good` to `bad` (a run beyond the
    change point's each way), a member per metric; `shifts` largest effect first, `judged` that one (what a report
    names first, and what a bisection stored before groups of metrics judged alone)."""

    test: str
    shifts: tuple[Shift, ...]
    good: Run
    bad: Run

    @property
    def judged(self) -> Shift:
        return self.shifts[0]

    @property
    def before(self) -> Run:
        return self.judged.before

    @property
    def after(self) -> Run:
        return self.judged.after


@dataclass(frozen=True)
class Recovered:
    """A slowdown a later change point of the same metric undid."""

    slowdown: Shift
    recovery: Shift


@dataclass(frozen=True)
class Assessment:
    """What a test's series says now: the slowdowns to bisect (oldest first), those already bisected, those a later
    run recovered, and the speed-ups (none of which is acted on)."""

    to_bisect: tuple[Slowdown, ...]
    known: tuple[Slowdown, ...]
    recovered: tuple[Recovered, ...]
    speedups: tuple[Shift, ...]


def action(policy: Policy, test: Test) -> OnSlowdown:
    """What a proven slowdown of the test's metrics leads to: the test's own `on_slowdown`, else the policy's."""
    return test.on_slowdown or policy.on_slowdown


def way(direction: PolicyDirection) -> Direction:
    return "lower" if direction is PolicyDirection.LOWER_IS_WORSE else "higher"


def assess(
    test: str,
    series: SeriesTable,
    specs: Mapping[str, Series],
    known: Iterable[tuple[int, int]] = (),
    settings: ChangeSettings | None = None,
) -> Assessment:
    """The test's slowdowns: `specs` declares each metric of `series` (its direction and `min_effect`), `known` holds
    the (GOOD's run, BAD's run) of each bisection already started from a change point of the test."""
    settings = settings or ChangeSettings()
    names = [name for name in series.values if name in specs]
    floors = {name: _floor(specs[name], settings) for name in names}
    found = changes(
        [r.sha for r in series.runs],
        {name: series.values[name] for name in names},
        {name: way(specs[name].direction) for name in names},
        {name: specs[name].min_effect for name in names},
        settings,
    )
    shifts = [Shift(c, series.runs[c.before], series.runs[c.index]) for c in found]
    recovered = []
    standing: list[Shift] = []
    for shift in (s for s in shifts if s.change.regression):
        same = {s.change: s for s in shifts if s.metric == shift.metric}
        back = recovery(shift.change, list(same), floors[shift.metric])
        undone = same[back] if back is not None else None
        if undone is not None:
            recovered.append(Recovered(shift, undone))
        else:
            standing.append(shift)
    groups: list[tuple[tuple[int, int], list[Shift]]] = []  # overlapping ranges (positions of GOOD, BAD) merged
    for span, shift in sorted(((_reach(series, s), s) for s in standing), key=lambda item: item[0]):
        if groups and _overlap(groups[-1][0], span):
            (low, high), members = groups[-1]
            groups[-1] = ((low, max(high, span[1])), [*members, shift])
        else:
            groups.append((span, [shift]))
    slowdowns = [
        Slowdown(
            test,
            tuple(sorted(members, key=lambda s: (-abs(s.change.effect), s.metric))),
            series.runs[good],
            series.runs[bad],
        )
        for (good, bad), members in groups
    ]
    at = {r.run_id: k for k, r in enumerate(series.runs)}
    spans = [(at[b], at[a]) for b, a in known if b in at and a in at]
    is_known = [any(_overlap((at[s.good.run_id], at[s.bad.run_id]), span) for span in spans) for s in slowdowns]
    return Assessment(
        to_bisect=tuple(s for s, k in zip(slowdowns, is_known) if not k),
        known=tuple(s for s, k in zip(slowdowns, is_known) if k),
        recovered=tuple(recovered),
        speedups=tuple(s for s in shifts if not s.change.regression),
    )


def _floor(spec: Series, settings: ChangeSettings) -> float:
    return spec.min_effect if spec.min_effect is not None else settings.min_effect


def _overlap(a: tuple[int, int], b: tuple[int, int]) -> bool:
    return a[0] <= b[1] and b[0] <= a[1]


def _reading(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


PLACEMENT = 0.99  # the confidence of the interval of a shift's place


def places(readings: Sequence[float], confidence: float = PLACEMENT) -> list[int]:
    """Where a single shift of the mean may be in `readings` (k: the first k readings before it): every split whose
    residual sum of squares is within the likelihood-ratio bound of the best one, chi-squared with one degree of
    freedom at `confidence`, the noise's variance estimated at the best split."""
    values = np.asarray(readings, dtype=np.float64)
    n = len(values)
    if n < 3:
        return []
    total, squares = np.cumsum(values), np.cumsum(values**2)
    k = np.arange(1, n)
    left = squares[k - 1] - total[k - 1] ** 2 / k
    right = (squares[-1] - squares[k - 1]) - (total[-1] - total[k - 1]) ** 2 / (n - k)
    rss = left + right
    best = float(rss.min())
    variance = best / (n - 2)
    if variance <= 0:
        return [int(k[int(rss.argmin())])]
    bound = float(2 * special.gammaincinv(0.5, confidence))  # chi2(1).ppf, as scipy.stats computes it
    return [int(j) for j, r in zip(k, rss) if (r - best) / variance <= bound]


def _reach(series: SeriesTable, shift: Shift) -> tuple[int, int]:
    """The positions of the bisection's GOOD and BAD runs: the last run before the earliest place the shift may be,
    and the first run after the latest one, among the metric's readings between its neighbouring change points."""
    values = series.values[shift.metric]
    read = [k for k, v in enumerate(values) if _reading(v)]
    at = read.index(shift.change.index)
    first = at - shift.change.runs_before
    segment = read[first : at + shift.change.runs_after]
    splits = {shift.change.runs_before, *places([values[k] or 0.0 for k in segment])}
    return segment[min(splits) - 1], segment[max(splits)]


def ci_readings(series: SeriesTable, slowdown: Slowdown, shift: Shift) -> tuple[CiReading, ...]:
    """CI's readings of one of the slowdown's metrics (`shift`'s) from GOOD's run to BAD's, oldest first: its member's
    free evidence, those before its change point as GOOD's side (passed), the others as the slower side's."""
    values = series.values[shift.metric]
    at = {r.run_id: k for k, r in enumerate(series.runs)}
    first, last = at[slowdown.good.run_id], at[slowdown.bad.run_id]
    return tuple(
        CiReading(series.runs[k].sha, k < shift.change.index, value, series.runs[k].url)
        for k in range(first, last + 1)
        if _reading(value := values[k]) and value is not None
    )


@dataclass(frozen=True)
class Spread:
    """A commit's readings on the bisect runner: their median, their spread (the standard deviation over the median:
    0.019 for 1.9%; None with fewer than two readings) and how many."""

    median: float
    spread: float | None
    runs: int


def spread_of(values: Sequence[float]) -> Spread | None:
    if not values:
        return None
    median = statistics.median(values)
    if len(values) < 2 or median == 0:
        return Spread(median, None, len(values))
    return Spread(median, statistics.stdev(values) / abs(median), len(values))
