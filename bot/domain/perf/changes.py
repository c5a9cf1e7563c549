"""Change points in benchmarks' nightly series, each with its effect, its runs either side and a stated
false-alarm rate.

Apache Otava's E-Divisive means (Matteson & James 2014: `ChangePointDetector`) splits a metric's series where its
readings' distributions differ most (`splits.AdmissibleSplits`: Otava's q-hat, among the splits that leave two
readings a side), one split at a time, for as long as a permutation test says the segments so far are not
exchangeable (`permutation.MaxShiftPermutations`: the largest standardized shift of the mean over every split, on
the readings and on their ranks). A split becomes a `Change` only when:

- the permutation test rejects at the metric's level (below), exact when nothing changed and the readings are
  exchangeable, whatever their distribution;
- its relative effect (`effect.relative_effect`) is not shown smaller than `min_effect`: its interval (at
  `confidence`) holds an effect of at least `min_effect` in size (`effect.reaches`). A shift of exactly
  `min_effect` is kept 97.5% of the time, where a point estimate at least `min_effect` kept it half the time.

Each side of a change has at least two readings (between the neighbouring change points): a lone outlier is no shift.

**The false-alarm rate holds per night, across metrics.** One call analyses one night's series, all metrics of
it. Each metric is tested at `false_alarm_rate / number of metrics` (Bonferroni), so when no metric changed (each
metric's readings exchangeable): the chance that the call reports any change point, in any metric, is at most
`false_alarm_rate`, however the metrics are correlated; and per metric it is at most `false_alarm_rate / metrics`.
A nightly job that runs one call per run and alerts on the change points it has not reported before therefore
raises, on flat series, a false alarm on a night with probability at most `false_alarm_rate`, all metrics together
(at 0.01: one night in 100), and per metric at most `false_alarm_rate / metrics`. After a real change, each further
split of that metric is tested at the same level (its null: every segment found so far exchangeable).

Missing readings (None, NaN, infinities) are skipped: indices and shas stay those of the caller's runs. An empty
series, a single run, a constant metric or one whose level is not positive give no change point.
"""

from __future__ import annotations

import math
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from otava.change_point_divisive.detector import ChangePointDetector

from bot.domain.perf.effect import reaches, relative_effect
from bot.domain.perf.permutation import MaxShiftPermutations
from bot.domain.perf.splits import MIN_SIDE, AdmissibleSplits

# Which way the metric gets worse: "lower" for a throughput, "higher" for a latency.
Direction = Literal["lower", "higher"]
DIRECTIONS: tuple[Direction, ...] = ("lower", "higher")


@dataclass(frozen=True)
class ChangeSettings:
    """What a caller chooses: the false-alarm rate per night (all metrics together), the smallest relative
    effect worth acting on, the interval's confidence, and the seed of the permutations (same input, same answer).
    """

    false_alarm_rate: float = 0.01
    min_effect: float = 0.02
    confidence: float = 0.95
    seed: int = 0

    def __post_init__(self) -> None:
        if not 0 < self.false_alarm_rate < 1:
            raise ValueError(f"false_alarm_rate {self.false_alarm_rate} is not in (0, 1)")
        if not self.min_effect >= 0:
            raise ValueError(f"min_effect {self.min_effect} is negative")
        if not 0 < self.confidence < 1:
            raise ValueError(f"confidence {self.confidence} is not in (0, 1)")


@dataclass(frozen=True)
class Change:
    """A metric's shift between run `before` (its last reading before) and run `index` (its first after)."""

    metric: str
    index: int
    before: int
    sha_before: str
    sha_after: str
    effect: float  # mean after / mean before - 1, between the neighbouring change points
    low: float
    high: float
    mean_before: float
    mean_after: float
    runs_before: int
    runs_after: int
    p_value: float
    level: float  # the level this metric was tested at: false_alarm_rate / metrics
    direction: Direction
    regression: bool  # the effect goes the metric's worse way


def find_changes(
    shas: Sequence[str],
    metrics: Mapping[str, Sequence[float | None]],
    directions: Mapping[str, Direction] | None = None,
    settings: ChangeSettings | None = None,
) -> list[Change]:
    """The change points of one night's series: `shas[i]` is run i's commit and `metrics[name][i]` its reading
    (None or NaN when missing); a metric absent from `directions` is higher-is-worse. Ordered by run, then metric.
    """
    settings = settings or ChangeSettings()
    directions = directions or {}
    if not metrics:
        return []
    level = settings.false_alarm_rate / len(metrics)
    found = [
        change
        for name, values in metrics.items()
        for change in _metric_changes(name, list(values), shas, directions.get(name, "higher"), level, settings)
    ]
    return sorted(found, key=lambda c: (c.index, c.metric))


def _metric_changes(
    name: str,
    values: list[float | None],
    shas: Sequence[str],
    direction: Direction,
    level: float,
    settings: ChangeSettings,
) -> list[Change]:
    runs = [i for i, v in enumerate(values[: len(shas)]) if v is not None and math.isfinite(v)]
    readings = np.array([values[i] for i in runs], dtype=np.float64)
    if len(readings) < 2 * MIN_SIDE or np.ptp(readings) == 0:
        return []
    tester = MaxShiftPermutations(level, seed=[settings.seed, zlib.crc32(name.encode())])
    points = ChangePointDetector(significance_tester=tester, calculator=AdmissibleSplits).get_change_points(readings)
    found = sorted(points, key=lambda p: p.index)
    bounds = [0, *(int(p.index) for p in found), len(readings)]
    changes = []
    for k, point in enumerate(found):
        start, at, end = bounds[k], bounds[k + 1], bounds[k + 2]
        effect = relative_effect(readings[start:at], readings[at:end], settings.confidence)
        if effect is None or not reaches(effect.low, effect.high, settings.min_effect):
            continue
        changes.append(
            Change(
                metric=name,
                index=runs[at],
                before=runs[at - 1],
                sha_before=shas[runs[at - 1]],
                sha_after=shas[runs[at]],
                effect=effect.effect,
                low=effect.low,
                high=effect.high,
                mean_before=effect.mean_before,
                mean_after=effect.mean_after,
                runs_before=at - start,
                runs_after=end - at,
                p_value=float(point.stats.pvalue),
                level=level,
                direction=direction,
                regression=effect.effect < 0 if direction == "lower" else effect.effect > 0,
            )
        )
    return changes
