"""A scoped red run's CI readings, as the bisection receives them: oldest first, from GOOD's pass to BAD's failure,
the runs without a signal left out."""

from bot.domain.policy import Metric
from bot.domain.scope import FailedTest, Scoped
from bot.domain.signals import Outcome, Signal
from bot.service.intake import ci_readings
from tests.support.policies import POLICY


def test_readings_run_from_goods_pass_to_bads_failure_without_the_silent_runs():
    test = POLICY.tests[0]
    history = (  # newest first, as the history is read
        Signal(13, "d" * 40, Outcome.FAILED, "failed", 0.007, "u13"),
        Signal(12, "c" * 40, Outcome.NONE, "job skipped", None, "u12"),
        Signal(11, "b" * 40, Outcome.PASSED, "passed", 0.0004, "u11"),
    )
    good = Signal(10, "a" * 40, Outcome.PASSED, "passed", 0.0005, "u10")
    scoped = Scoped(FailedTest(test, "t.py", 0.0065, 0.002), "a" * 40, "e" * 40, 10, 14, history, good)
    got = ci_readings(scoped, "u14")
    assert [(r.sha[0], r.passed, r.metric, r.url) for r in got] == [
        ("a", True, 0.0005, "u10"),
        ("b", True, 0.0004, "u11"),
        ("d", False, 0.007, "u13"),
        ("e", False, 0.0065, "u14"),
    ]


def test_a_failure_without_a_reading_of_a_measured_test_is_no_evidence_but_a_pass_without_one_is():
    """A commit that does not build fails every test before the KL check prints `avg_kl_div=`: that failure is not
    the regression, and as evidence it would pull the search to the broken build instead of the culprit."""
    unmeasured = POLICY.tests[0]
    assert unmeasured.metric is None
    test = unmeasured.model_copy(update={"metric": Metric(name="avg_kl_div", threshold=0.002)})
    history = (
        Signal(13, "d" * 40, Outcome.FAILED, "failed", None, "u13"),  # died before measuring
        Signal(12, "c" * 40, Outcome.PASSED, "passed", None, "u12"),  # the job's conclusion spoke for it
    )
    scoped = Scoped(FailedTest(test, "t.py", 0.0065, 0.002), "a" * 40, "e" * 40, 10, 14, history, None)
    assert [(r.sha[0], r.passed) for r in ci_readings(scoped, "u14")] == [("c", True), ("e", False)]
    scoped = Scoped(FailedTest(unmeasured, "t.py"), "a" * 40, "e" * 40, 10, 14, history, None)
    assert [(r.sha[0], r.passed) for r in ci_readings(scoped, "u14")] == [("c", True), ("d", False), ("e", False)]
