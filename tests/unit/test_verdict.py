import math

import pytest

from bot.domain.bisect.verdict import (
    MetricRule,
    RawResult,
    Verdict,
    classify,
    verdict_from_exit,
)


@pytest.mark.parametrize(
    "code, verdict",
    [
        (0, Verdict.GOOD),
        (1, Verdict.BAD),
        (2, Verdict.BAD),
        (124, Verdict.BAD),
        (125, Verdict.SKIP),
        (126, Verdict.BAD),
        (127, Verdict.BAD),
        (128, Verdict.INFRA),
        (137, Verdict.INFRA),
        (255, Verdict.INFRA),
        (-9, Verdict.INFRA),
        (None, Verdict.INFRA),
    ],
)
def test_exit_codes_follow_git_bisect_run(code, verdict):
    assert verdict_from_exit(code) is verdict


def test_infra_reason_wins_over_exit_code():
    assert classify(RawResult(0, infra_reason="timeout after 5s"), None, None) is Verdict.INFRA


def test_metric_decides_not_exit_code():
    rule = MetricRule(threshold=0.002)
    assert classify(RawResult(0, 0.0065), rule, None) is Verdict.BAD
    assert classify(RawResult(1, 0.0003), rule, None) is Verdict.GOOD
    assert classify(RawResult(125, 0.0003), rule, None) is Verdict.SKIP
    assert classify(RawResult(255, 0.0003), rule, None) is Verdict.INFRA


def test_missing_metric():
    rule = MetricRule(threshold=0.002)
    assert classify(RawResult(0, None), rule, None) is Verdict.SKIP  # cannot be judged
    assert classify(RawResult(1, None), rule, None) is Verdict.BAD  # crashed before reporting


def test_boundary_is_the_geometric_middle_of_the_gap_when_endpoints_separate():
    rule = MetricRule(threshold=0.002)
    cut = rule.boundary([0.0003, 0.0004], [0.0065, 0.0070])
    assert cut == pytest.approx((0.0004 * 0.0065) ** 0.5)  # the same factor (about 4) from both sides
    # a broken commit reading low in the real incident's range (0.004-0.01) is still bad; the plain midpoint of the
    # gap (0.00345) would be nearer to it, and one of GOOD 0.0004 and BAD 0.0078 (0.0041) would pass it for good
    assert classify(RawResult(1, 0.004), rule, cut) is Verdict.BAD
    assert classify(RawResult(1, 0.004), rule, rule.boundary([0.0004], [0.0078, 0.0080])) is Verdict.BAD
    assert classify(RawResult(0, 0.0008), rule, cut) is Verdict.GOOD  # the top of the healthy range


def test_boundary_falls_back_to_threshold_then_means():
    assert MetricRule(threshold=0.5).boundary([0.1, 0.9], [0.4, 1.0]) == 0.5
    assert MetricRule().boundary([0.1, 0.9], [0.4, 1.0]) == pytest.approx((0.5 + 0.7) / 2)
    assert MetricRule().boundary([0.5, 0.9], [0.1, 0.4]) is None  # BAD is not worse


def test_lower_is_worse():
    rule = MetricRule(threshold=0.9, higher_is_worse=False)
    cut = rule.boundary([0.95, 0.97], [0.5, 0.6])
    assert cut == pytest.approx(math.sqrt(0.95 * 0.6))  # between GOOD's lowest and BAD's highest
    assert classify(RawResult(0, 0.7), rule, cut) is Verdict.BAD
    assert classify(RawResult(0, 0.8), rule, cut) is Verdict.GOOD


def test_one_reading_per_endpoint_cuts_at_their_geometric_mean():
    rule = MetricRule(threshold=0.002)
    cut = rule.boundary([0.0003], [0.0065])
    assert cut == pytest.approx(math.sqrt(0.0003 * 0.0065))
    assert classify(RawResult(0, 0.0065 / 2), rule, cut) is Verdict.BAD  # half BAD's reading is still far from GOOD's
    assert classify(RawResult(0, 0.0003 * 3), rule, cut) is Verdict.GOOD
    assert MetricRule(higher_is_worse=False).boundary([0.95], [0.5]) == pytest.approx(math.sqrt(0.95 * 0.5))
    assert MetricRule().boundary([-1.0], [3.0]) == pytest.approx(1.0)  # not both positive: the plain midpoint
    assert MetricRule().boundary([0.5], [0.1]) is None  # BAD is not worse
