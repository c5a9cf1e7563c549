"""A benchmark's revert PR (a sampled metric, no threshold): the shift with its interval, and the medians and spread
of the readings at the culprit and its parent, in place of "it failed and its parent passed"."""

from dataclasses import replace

from bot.domain.case import Overlap, Spread
from bot.service.case_facts import Case
from bot.service.pr_body import FailingTest, render
from tests.unit.test_pr_body_limit import evidence


def test_a_benchmarks_revert_states_the_shift_and_the_readings_at_culprit_and_parent():
    bench = replace(
        evidence(4, 3),
        test=FailingTest("text-models-perf", "output_throughput", None),
        before=[100.2, 99.1, 101.0],
        after=[96.3, 95.8, 96.9, 95.1],
        effect="-4.1% +/- 0.9% at the culprit (95%)",
        case=Case(None, False, "", None, (), Spread(0, None, None), Spread(0, None, None), Overlap({}, {}), 0),
    )
    body = render(bench, "revert-bisect/revert-x").body
    motivation = body.split("## Motivation")[1].split("## Bisect")[0]
    assert "-4.1% +/- 0.9% at the culprit (95%)" in motivation
    assert "the culprit reading median 96.05, sd 0.76 over 4 runs" in motivation
    assert "its parent median 100.2, sd 0.95 over 3 runs" in motivation
    why = body.split("## Why this revert")[1].split("## Motivation")[0]
    assert "noisy: its runs spread" in why and "The culprit reads median 96.05, sd 0.76 over 4 runs" in why
    assert "Its readings and its parent's tell the shift apart (posterior 0.9990)" in why
    assert "it failed and its parent passed" not in body.lower()
    assert "benchmark (no threshold)" in body
    plain = render(evidence(4, 3), "revert-bisect/revert-x").body
    assert "it failed and its parent passed on every re-run" in plain and "at the culprit (95%)" not in plain
