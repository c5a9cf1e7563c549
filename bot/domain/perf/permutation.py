"""E-Divisive's significance test, with statistics made for a shift of the level: exact permutation tests of
"no segment changed", each stopped as soon as its answer is known.

Apache Otava's `ChangePointDetector` asks its tester, for each split it proposes, whether the segments found so far
are still exchangeable. Otava's own tester shuffles the readings within each segment and compares the largest
energy divergence (q-hat); `MaxShiftPermutations` shuffles them the same way and compares statistics that are far
more powerful for a shift of the mean:

- `max_shift`: over every segment and every split of it that leaves two readings a side, the largest standardized
  difference of the two sides' means, |mean_after - mean_before| x sqrt(n_before n_after / n) / sd(segment) --
  each split's has variance one when nothing changed, so a shift two readings from the end counts as much as one
  in the middle (Hinkley's likelihood ratio, a maximum over every split).
- `max_fresh`: the same for the newest `MIN_SIDE`..`FRESH_RUNS` readings against the rest of the newest segment:
  the split a nightly job needs first, the night or two after a shift. `max_shift` takes the maximum over every
  split, and the noise of the many splits it does not need makes it reject a fresh shift later than a test of the
  newest readings alone.
- `max_stretch`: the same over every stretch of consecutive readings against the rest of its segment: a slowdown
  a later run recovered is a stretch, which no single split separates from the rest. It takes the maximum over
  far more candidates, so it alone would need a larger shift: it is tried only when the others do not reject.
- Each is computed on the readings and on their ranks within the segment, the larger of the two: the readings find
  a few readings far off (a fresh shift); the ranks are unmoved by an outlier 5 sd away.
- The shift test has `SHIFT_SHARE` = 0.6 of the level, the fresh test `FRESH_SHARE` = 0.3, the stretch test the other
  0.1, tried in that order; on a newest segment too short for the fresh test to reject a 2-run shift
  (`fresh_can_reject`), the shift test has 0.9 (a shift two runs old at 22-26 runs: 2 / C(n, 2) needs it; a history of
  11 nights, 4 after the shift: its p of at least 2 / C(11, 4) = 0.006 needs 0.9 of 0.01). Two runs after a shift, no
  permutation test can show less than p = 1 / C(n, 2) at n runs (the newest two readings the most extreme pair of the
  n: 0.0043 at 22 runs, 0.0011 at 60); the shift test, symmetric in the two ends of a segment, no less than 2 / C(n,
  2). At the default level 0.01 the fresh test's 0.003 admits it from 27 runs on, and so does the shift test's 0.006,
  but only when no other split of the series comes near it: the fresh test's statistic has the noise of two splits,
  not of every split. Each rejects at its share s x alpha when fewer than `RESOLUTION` of `permutations_for(s x
  alpha)` = ceil(RESOLUTION / (s alpha)) - 1 shuffles reach the observed statistic: p = (shuffles reaching + 1) /
  (shuffles + 1) <= s x alpha.
  **When the readings of every segment are exchangeable (nothing changed; noise of any distribution, outliers
  included), the chance that any of them rejects is at most alpha**: for each, the observed arrangement and the shuffles
  are equally likely arrangements, so the observed statistic is among the `RESOLUTION` largest of the shuffles + 1
  with probability at most RESOLUTION / (shuffles + 1) <= s x alpha (ties count against it, and so does a shuffle
  within 1e-9 of it); the three together at most alpha (Bonferroni, weighted). Which split Otava proposes does not
  enter.
- The shuffles stop at the `RESOLUTION`-th that reaches it: the answer is "not significant" whatever the rest would
  show, so a flat series costs a few dozen shuffles instead of thousands.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from otava.change_point_divisive.base import BaseStats, CandidateChangePoint, ChangePoint, SignificanceTester

from bot.domain.perf.splits import MIN_SIDE

SHIFT_SHARE = 0.6  # of the level, the shift test's
FRESH_SHARE = 0.3  # the fresh test's; the stretch test has the rest
FRESH_RUNS = 3  # the fresh test's newest runs: the newest MIN_SIDE..FRESH_RUNS against the rest of their segment
RESOLUTION = 20  # shuffles allowed to reach the statistic: 1 would need a far larger shift to reject at alpha
FIRST_BATCH, LARGEST_BATCH = 64, 8192  # shuffles drawn at once: a few for a flat series, many for a shift


def permutations_for(alpha: float) -> int:
    """The shuffles of a test at level `alpha`: (RESOLUTION - 1 + 1) / (shuffles + 1) <= alpha."""
    return max(RESOLUTION, math.ceil(RESOLUTION / alpha - 1e-9) - 1)


@dataclass
class ShiftStats(BaseStats):
    """The test of one candidate: which statistic decided, its value, the shuffles drawn and how many reached it.
    `pvalue` is the deciding test's over its share of the level (Bonferroni, weighted, over the three tests)."""

    statistic: str
    observed: float
    shuffles: int
    reached: int
    significant: bool


Statistic = Callable[[np.ndarray, list[slice]], np.ndarray]


def _standardized(arrangements: np.ndarray, intervals: list[slice], stretches: bool) -> np.ndarray:
    """Each row's largest standardized difference of means, |mean inside - mean outside| x sqrt(m (n - m) / n) / sd,
    over every segment and, within it, every split (`stretches` False: the first k readings against the rest) or
    every stretch of consecutive readings (`stretches` True: a split is a stretch from the segment's start), m and
    n - m at least `MIN_SIDE`. The rows are arrangements of the same readings, each segment's shuffled within it:
    one mean and spread per segment."""
    largest: np.ndarray = np.full(len(arrangements), -np.inf)
    for interval in intervals:
        segment = arrangements[:, interval]
        n = segment.shape[1]
        spread = float(segment[0].std())  # a row's shuffles keep its segments' readings: one spread for all
        if n < 2 * MIN_SIDE or spread == 0:
            continue
        # With S_k the centred sum of the first k readings, a stretch [a, a + m) has mean inside - mean outside =
        # (S_{a+m} - S_a) n / (m (n - m)): standardized, |S_{a+m} - S_a| sqrt(n / (m (n - m))) / sd.
        sums = np.zeros((len(segment), n + 1))
        sums[:, 1:] = np.cumsum(segment - segment[0].mean(), axis=1)
        sizes = np.arange(MIN_SIDE, n - MIN_SIDE + 1)
        scales = np.sqrt(n / (sizes * (n - sizes))) / spread
        if not stretches:  # the first m readings against the rest: S_m
            largest = np.maximum(largest, (np.abs(sums[:, sizes]) * scales).max(axis=1))
            continue
        for m, scale in zip(sizes, scales, strict=True):
            largest = np.maximum(largest, np.abs(sums[:, m:] - sums[:, : n + 1 - m]).max(axis=1) * scale)
    return largest


def max_shift(arrangements: np.ndarray, intervals: list[slice]) -> np.ndarray:
    """Each row's largest standardized difference of means over the admissible splits of every segment."""
    return _standardized(arrangements, intervals, stretches=False)


def max_fresh(arrangements: np.ndarray, intervals: list[slice]) -> np.ndarray:
    """Each row's largest standardized difference of means between the newest `MIN_SIDE`..`FRESH_RUNS` readings
    and the rest of the newest segment."""
    largest: np.ndarray = np.full(len(arrangements), -np.inf)
    segment = arrangements[:, _newest(intervals, arrangements.shape[1])]
    n = segment.shape[1]
    spread = float(segment[0].std())
    if n < 2 * MIN_SIDE or spread == 0:
        return largest
    centred = segment - segment[0].mean()
    for m in range(MIN_SIDE, min(FRESH_RUNS, n - MIN_SIDE) + 1):
        scale = math.sqrt(n / (m * (n - m))) / spread
        largest = np.maximum(largest, np.abs(centred[:, n - m :].sum(axis=1)) * scale)
    return largest


def max_stretch(arrangements: np.ndarray, intervals: list[slice]) -> np.ndarray:
    """Each row's largest standardized difference of means between a stretch of a segment and the rest of it."""
    return _standardized(arrangements, intervals, stretches=True)


def _newest(intervals: list[slice], total: int) -> slice:
    """The newest segment of a series of `total` readings: the one that ends it."""
    return max(intervals, key=lambda i: total if i.stop is None else i.stop)


def newest_length(intervals: list[slice], total: int) -> int:
    """The readings of the newest segment."""
    return len(range(total)[_newest(intervals, total)])


def fresh_can_reject(n: int, alpha: float) -> bool:
    """Whether the fresh test can reject a shift two readings old at its share of `alpha` on a newest segment of `n`
    readings: its smallest p-value is then that of the newest two the most extreme pair of the segment,
    1 / C(n, 2). When it cannot (fewer than 27 readings at 0.01), its share goes to the shift test, which with 0.9 of
    the level can from 22 readings on (2 / C(n, 2) <= 0.009), and a fresh test would only take level from it. `n` is
    the same for every arrangement the tests compare, so the shares are fixed before the readings are looked at: the
    level holds."""
    return math.comb(n, MIN_SIDE) * FRESH_SHARE * alpha >= 1


class MaxShiftPermutations(SignificanceTester):
    """The permutation tests of "every segment exchangeable" at level `alpha`: the readings' and ranks' max shift at
    `SHIFT_SHARE` of alpha; when it does not reject, their fresh shift at `FRESH_SHARE` (when it can reject at all:
    `fresh_can_reject`, else that share is the shift test's); then their max stretch at the rest."""

    def __init__(self, alpha: float, seed: Any) -> None:
        super().__init__(max_pvalue=alpha)
        self.rng = np.random.default_rng(seed)

    def is_significant(self, point: ChangePoint[ShiftStats]) -> bool:
        """Every shuffle drawn and fewer than `RESOLUTION` reached, in either test: decided on counts, not floats."""
        return point.stats.significant

    def change_point(
        self, candidate: CandidateChangePoint, series: np.ndarray, intervals: list[slice]
    ) -> ChangePoint[ShiftStats]:
        from scipy.stats import rankdata  # here, not at the top: scipy.stats takes each start of the bot 0.5 s

        ranks = series.astype(np.float64, copy=True)
        for interval in intervals:
            ranks[interval] = rankdata(series[interval])
        fresh = FRESH_SHARE if fresh_can_reject(newest_length(intervals, len(series)), self.max_pvalue) else 0.0
        stats = self._test("shift", SHIFT_SHARE + FRESH_SHARE - fresh, max_shift, series, ranks, intervals)
        if not stats.significant and fresh > 0:
            stats = self._test("fresh", fresh, max_fresh, series, ranks, intervals)
        if not stats.significant:
            stats = self._test("stretch", 1 - SHIFT_SHARE - FRESH_SHARE, max_stretch, series, ranks, intervals)
        return ChangePoint.from_candidate(candidate, stats)

    def _test(
        self,
        name: str,
        share: float,
        measure: Statistic,
        series: np.ndarray,
        ranks: np.ndarray,
        intervals: list[slice],
    ) -> ShiftStats:
        def statistic(order: np.ndarray) -> np.ndarray:
            return np.maximum(measure(series[order], intervals), measure(ranks[order], intervals))

        permutations = permutations_for(self.max_pvalue * share)

        observed = float(statistic(np.arange(len(series))[None, :])[0])
        reached = drawn = 0
        batch = FIRST_BATCH
        while math.isfinite(observed) and drawn < permutations and reached < RESOLUTION:
            size = min(batch, permutations - drawn)
            order = np.tile(np.arange(len(series)), (size, 1))
            for interval in intervals:
                order[:, interval] = self.rng.permuted(order[:, interval], axis=1)  # within its segment
            reached += int(np.sum(statistic(order) >= observed * (1 - 1e-9)))
            drawn += size
            batch = min(4 * batch, LARGEST_BATCH)
        significant = math.isfinite(observed) and reached < RESOLUTION
        if not math.isfinite(observed):  # no segment has an admissible split with any spread
            pvalue = 1.0
        elif significant:  # every shuffle drawn: the exact p-value, at most alpha x share
            pvalue = (reached + 1) / (permutations + 1)
        else:  # stopped early (Besag & Clifford, 1991): above alpha x share
            pvalue = reached / drawn
        return ShiftStats(
            pvalue=min(1.0, pvalue / share),  # Bonferroni's weighted: at most alpha when significant
            statistic=name,
            observed=observed,
            shuffles=drawn,
            reached=reached,
            significant=significant,
        )
