"""A scoped red run's CI readings, as the bisection receives them: oldest first, from GOOD's pass to BAD's failure,
the runs without a signal left out."""

from bot.domain.scope import FailedTest, Scoped
from bot.domain.signals import Outcome, Signal
from bot.service.bisections import ci_readings
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
