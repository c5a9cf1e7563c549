"""The change-point wrapper (bot/domain/perf): a planted shift found where it is, its effect's interval covering
the truth, a flat series quiet at the stated rate, many metrics sharing it, and bad input giving nothing."""

from __future__ import annotations

import math

import numpy as np
import pytest

from bot.domain.perf.changes import ChangeSettings, find_changes
from bot.domain.perf.effect import relative_effect
from bot.domain.perf.permutation import RESOLUTION, permutations_for

RUNS, AT = 60, 30
SHAS = [f"s{i}" for i in range(RUNS)]


def shifted(seed: int, shift: float = -0.05, noise: float = 0.02, at: int = AT) -> list[float | None]:
    rng = np.random.default_rng(seed)
    level = np.where(np.arange(RUNS) >= at, 1 + shift, 1.0) * 1000
    return list(level * (1 + rng.normal(0, noise, RUNS)))


def test_a_planted_shift_is_found_near_its_run_with_an_interval_covering_it():
    (change,) = find_changes(SHAS, {"tps": shifted(1)}, {"tps": "lower"})
    assert change.metric == "tps" and abs(change.index - AT) <= 2 and change.before == change.index - 1
    assert (change.sha_before, change.sha_after) == (SHAS[change.before], SHAS[change.index])
    assert change.low <= -0.05 <= change.high
    assert change.regression and change.direction == "lower"
    assert (change.runs_before, change.runs_after) == (change.index, RUNS - change.index)


def test_the_interval_covers_the_true_shift_about_as_often_as_it_says():
    near = covered = 0
    for seed in range(40):
        changes = find_changes(SHAS, {"tps": shifted(seed)}, settings=ChangeSettings(seed=seed))
        for change in (c for c in changes if abs(c.index - AT) <= 2):
            near += 1
            covered += change.low <= -0.05 <= change.high
    # 95% intervals, around boundaries E-Divisive may place a run or two off
    assert near >= 38 and covered >= 0.85 * near


def test_a_flat_series_gives_no_change_point_at_the_stated_rate():
    rng = np.random.default_rng(7)
    settings = [ChangeSettings(false_alarm_rate=0.05, min_effect=0.0, seed=s) for s in range(300)]
    alarms = sum(bool(find_changes(SHAS, {"m": list(100 + rng.normal(0, 2, RUNS))}, settings=s)) for s in settings)
    assert alarms <= 27  # 5% of 300 is 15; 27 is beyond its binomial 99.9th percentile
    flat = list(100 + rng.normal(0, 2, RUNS))
    assert find_changes(SHAS, {"m": flat}) == []


def test_many_metrics_share_the_rate_each_at_its_bonferroni_share():
    rng = np.random.default_rng(3)
    metrics = {f"flat{k}": list(100 + rng.normal(0, 2, RUNS)) for k in range(29)} | {"tps": shifted(2)}
    changes = find_changes(SHAS, metrics, {"tps": "lower"}, ChangeSettings(false_alarm_rate=0.01))
    assert [c.metric for c in changes] == ["tps"]
    assert math.isclose(changes[0].level, 0.01 / 30)


def test_direction_marks_the_regression_and_reports_the_improvement_too():
    up = shifted(4, shift=0.05)
    (latency,) = find_changes(SHAS, {"ttft": up}, {"ttft": "higher"})
    (throughput,) = find_changes(SHAS, {"tps": up}, {"tps": "lower"})
    assert latency.effect > 0 and latency.regression
    assert throughput.effect > 0 and not throughput.regression


def test_a_shift_below_min_effect_is_not_reported():
    series = shifted(5, shift=-0.05, noise=0.005)
    assert find_changes(SHAS, {"m": series}, settings=ChangeSettings(min_effect=0.02))
    assert find_changes(SHAS, {"m": series}, settings=ChangeSettings(min_effect=0.08)) == []


def test_missing_readings_are_skipped_and_the_runs_keep_their_indices():
    series = shifted(6)
    for i in (3, AT - 1, AT, 50):
        series[i] = None if i % 2 else math.nan
    (change,) = find_changes(SHAS, {"m": series})
    assert (change.before, change.index) == (AT - 2, AT + 1)
    assert (change.sha_before, change.sha_after) == (f"s{AT - 2}", f"s{AT + 1}")


def test_the_same_input_gives_the_same_answer():
    series = shifted(8, shift=-0.03)
    assert find_changes(SHAS, {"m": series}) == find_changes(SHAS, {"m": series})


@pytest.mark.parametrize(
    "values",
    [
        [],
        [1.0],
        [5.0] * RUNS,
        [None] * RUNS,
        [math.nan, None, math.inf, 1.0, 2.0],
        [-1.0] * AT + [-2.0] * AT,  # a level that is not positive has no relative effect
        [0.0] * AT + [5.0] * AT,
    ],
    ids=["empty", "one run", "constant", "all missing", "too few readings", "negative level", "zero level"],
)
def test_bad_input_gives_no_change_point_and_no_exception(values):
    assert find_changes(SHAS[: len(values)], {"m": values}) == []


def test_no_metric_gives_nothing_and_a_rate_outside_0_1_is_refused():
    assert find_changes(SHAS, {}) == []
    with pytest.raises(ValueError, match="false_alarm_rate"):
        ChangeSettings(false_alarm_rate=0.0)
    with pytest.raises(ValueError, match="min_effect"):
        ChangeSettings(min_effect=-0.1)


def test_a_lone_outlier_is_no_shift():
    series = [1000.0 + (i % 3) for i in range(RUNS)]
    series[RUNS - 1] = 1500.0
    assert find_changes(SHAS, {"m": series}) == []


def test_relative_effect_of_two_flat_levels_is_exact_and_of_too_few_readings_none():
    effect = relative_effect(np.array([100.0, 100.0, 100.0]), np.array([95.0, 95.0]))
    assert effect is not None
    assert math.isclose(effect.effect, -0.05) and effect.low == effect.high == effect.effect
    assert relative_effect(np.array([100.0]), np.array([95.0, 96.0])) is None


def test_the_permutations_give_the_level_exactly():
    for alpha in (0.01, 0.01 / 30, 0.05, 0.001, 0.3):
        shuffles = permutations_for(alpha)
        # RESOLUTION - 1 shuffles reaching the statistic give p = RESOLUTION / (shuffles + 1): at most alpha, and
        # one shuffle fewer would not be
        assert RESOLUTION / (shuffles + 1) <= alpha < RESOLUTION / shuffles


def test_a_fresh_shift_is_found_two_runs_after_it():
    found = 0
    for seed in range(20):
        series = shifted(seed, shift=-0.10, at=RUNS - 2)
        changes = find_changes(SHAS, {"tps": series}, {"tps": "lower"}, ChangeSettings(seed=seed))
        found += any(c.index == RUNS - 2 and c.regression and c.runs_after == 2 for c in changes)
    assert found >= 18  # a 5-sd shift, read twice: the test at 0.01 rejects about 97 times in 100 (bench)
