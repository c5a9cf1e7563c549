"""The change points' significance test (bot/domain/perf/permutation.py) and where E-Divisive may split
(bot/domain/perf/splits.py): the statistic as defined, the level held on exchangeable readings of a heavy-tailed
distribution, a shift found through outliers and two readings after it (by the newest readings where the maximum
over every split misses it), and no split leaving a lone reading."""

from __future__ import annotations

import math

import numpy as np
from otava.change_point_divisive.base import CandidateChangePoint
from otava.change_point_divisive.calculator import PairDistanceCalculator
from scipy import stats

from bot.domain.perf.permutation import FRESH_RUNS, MaxShiftPermutations, max_fresh, max_shift, max_stretch
from bot.domain.perf.splits import MIN_SIDE, AdmissibleSplits

WHOLE = [slice(0, None)]


def rejects(series: np.ndarray, alpha: float, seed: int, intervals: list[slice] = WHOLE) -> bool:
    tester = MaxShiftPermutations(alpha, seed)
    return tester.is_significant(tester.change_point(CandidateChangePoint(1, 0.0), series, intervals))


def test_max_shift_is_the_largest_standardized_difference_of_means_over_the_admissible_splits():
    rng = np.random.default_rng(0)
    readings = rng.normal(size=17)
    rows = np.tile(readings, (5, 1))
    intervals = [slice(0, 9), slice(9, 17)]
    for k in range(1, 5):  # shuffled within each segment, as the test shuffles
        for interval in intervals:
            rows[k, interval] = rng.permutation(readings[interval])
    for row, got in zip(rows, max_shift(rows, intervals), strict=True):
        expected = max(
            abs(seg[:k].mean() - seg[k:].mean()) * math.sqrt(k * (len(seg) - k) / len(seg)) / seg.std()
            for seg in (row[i] for i in intervals)
            for k in range(MIN_SIDE, len(seg) - MIN_SIDE + 1)
        )
        assert math.isclose(got, expected, rel_tol=1e-9)


def test_exchangeable_heavy_tailed_readings_are_rejected_at_most_at_the_level():
    rng = np.random.default_rng(1)
    alpha, trials = 0.1, 400
    rejected = 0
    for seed in range(trials):
        series = stats.t.rvs(2, size=40, random_state=rng)  # heavy tails: outliers of every size
        series[rng.choice(40, 2, replace=False)] += 20
        intervals = WHOLE if seed % 2 else [slice(0, 15), slice(15, 40)]  # a segment found before: shuffled within
        rejected += rejects(series, alpha, seed, intervals)
    assert rejected <= stats.binom.ppf(0.999, trials, alpha)  # 40 expected at most


def test_outliers_do_not_hide_a_shift_the_ranks_see():
    found = 0
    for seed in range(50):
        rng = np.random.default_rng(seed)
        series = rng.normal(0, 1, 60)
        series[30:] -= 1.0
        series[rng.choice(60, 3, replace=False)] += rng.choice([-5, 5], 3)  # 3 readings 5 sd off
        found += rejects(series, 0.01, seed)
    assert found >= 13  # 20 of 50 with the ranks; 6 of 50 from the readings alone


def test_two_readings_after_a_fresh_shift_are_enough():
    rng = np.random.default_rng(2)
    series = np.concatenate([rng.normal(0, 1, 30), [-6.0, -5.5]])
    assert rejects(series, 0.01, seed=2)


def test_a_constant_or_too_short_series_is_not_significant():
    assert not rejects(np.full(20, 3.0), 0.01, seed=0)
    assert not rejects(np.array([1.0, 2.0, 9.0]), 0.01, seed=0)


def test_no_split_leaves_a_lone_reading_and_otavas_own_choice_stands_otherwise():
    rng = np.random.default_rng(3)
    flat = rng.normal(100, 1, 40)
    for outlier in (0, 39):
        series = flat.copy()
        series[outlier] = 150.0
        candidate = AdmissibleSplits(series).get_next_candidate(WHOLE)
        assert candidate is not None and MIN_SIDE <= candidate.index <= len(series) - MIN_SIDE
    shifted = np.concatenate([flat[:20], flat[20:] - 5])
    assert AdmissibleSplits(shifted).get_next_candidate(WHOLE) == PairDistanceCalculator(shifted).get_next_candidate(
        WHOLE
    )
    assert AdmissibleSplits(flat[:3]).get_next_candidate(WHOLE) is None


def test_a_slowdown_since_recovered_is_found_by_its_stretch_where_no_split_separates_it():
    rng = np.random.default_rng(4)
    series = np.concatenate([rng.normal(0, 1, 8), rng.normal(-6, 1, 7), rng.normal(0, 1, 7)])
    tester = MaxShiftPermutations(0.01, 4)
    point = tester.change_point(CandidateChangePoint(8, 0.0), series, WHOLE)
    assert tester.is_significant(point) and point.stats.statistic == "stretch" and point.stats.pvalue <= 0.01


def test_max_stretch_is_the_largest_standardized_difference_of_a_stretch_and_the_rest():
    rng = np.random.default_rng(5)
    row = rng.normal(size=12)
    n = len(row)
    expected = max(
        abs(row[a : a + m].mean() - np.delete(row, range(a, a + m)).mean()) * math.sqrt(m * (n - m) / n) / row.std()
        for m in range(MIN_SIDE, n - MIN_SIDE + 1)
        for a in range(n - m + 1)
    )
    assert math.isclose(max_stretch(row[None, :], WHOLE)[0], expected, rel_tol=1e-9)


def test_max_fresh_is_the_largest_standardized_difference_of_the_newest_readings_and_the_rest_of_their_segment():
    rng = np.random.default_rng(6)
    row = rng.normal(size=20)
    intervals = [slice(0, 7), slice(7, None)]
    seg = row[7:]
    n = len(seg)
    expected = max(
        abs(seg[n - m :].mean() - seg[: n - m].mean()) * math.sqrt(m * (n - m) / n) / seg.std()
        for m in range(MIN_SIDE, FRESH_RUNS + 1)
    )
    assert math.isclose(max_fresh(row[None, :], intervals)[0], expected, rel_tol=1e-9)


def test_a_fresh_shift_the_max_shift_misses_is_found_by_the_newest_readings():
    # two readings 2.8 sd low after 24: nearly always the most extreme pair of the 26 (p = 1 / C(26, 2) = 0.003 for
    # the newest two alone), often not significant as the maximum over every split (at least 2 / C(26, 2) = 0.006)
    found = {"shift": 0, "fresh": 0}
    for seed in range(20):
        rng = np.random.default_rng(100 + seed)
        series = np.concatenate([rng.normal(0, 1, 24), rng.normal(-2.8, 0.3, 2)])
        tester = MaxShiftPermutations(0.02, seed)
        point = tester.change_point(CandidateChangePoint(24, 0.0), series, WHOLE)
        if tester.is_significant(point):
            found[point.stats.statistic] += 1
    assert found["fresh"] >= 4  # 7 of 20 that the shift test, tried first, did not reject (it rejected 9)
