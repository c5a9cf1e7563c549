"""CI's readings as free evidence: scheduled runs inside the range narrow the search before a GPU run is spent,
stand for a flaky test's second calibration run when they agree with the first, and never stand for the bisect
runner's own FAIL at the culprit and PASS at its parent (nor for confirmation)."""

from __future__ import annotations

import random

from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Kind, Phase, Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import FlakyTest, linear_graph, simulate
from bot.domain.bisect.verdict import RawResult


def test_scheduled_runs_inside_the_range_narrow_the_search_before_any_gpu_run():
    n, culprit = 120, 77
    every = list(range(12, n, 12))  # a scheduled run every 12 commits
    without = simulate(n, FlakyTest(culprit), 4, Settings(flake_rate=None))
    with_ci = simulate(n, FlakyTest(culprit), 4, Settings(flake_rate=None), ci=every)
    assert without.culprit_index() == with_ci.culprit_index() == culprit
    assert with_ci.runs_by_kind[Kind.CI] == len(every)
    assert with_ci.runs < without.runs  # CI's readings were free: fewer runs on the bisect runner
    assert with_ci.runs_by_kind[Kind.SEARCH] < without.runs_by_kind[Kind.SEARCH]


def test_the_first_round_searches_only_between_the_ci_readings_that_bracket_the_culprit():
    graph, good, bad = linear_graph(60)
    problem = Problem(graph, good, bad, Settings(flake_rate=None))
    ci = [Run(f"c{i}", Kind.CI, RawResult(0 if i < 33 else 1)) for i in (10, 20, 30, 40, 50)]
    decision = decide(problem, State(), ci, (), 4)
    searched = sorted(int(p.sha[1:]) for p in decision.probes if p.kind is Kind.SEARCH)
    assert searched and all(30 < i <= 40 for i in searched)


def test_ci_readings_never_stand_for_the_runners_fail_at_the_culprit_and_pass_at_its_parent():
    # CI pins the culprit exactly (c32 passes, c33 fails): the runner still tests both before it is named.
    for flake_rate in (0.0, None):
        result = simulate(60, FlakyTest(33), 4, Settings(flake_rate=flake_rate), ci=[32, 33])
        assert result.outcome.status is Status.FOUND and result.culprit_index() == 33
        ran = _runner_runs(60, 33, flake_rate, ci=[32, 33])
        assert {"c32", "c33"} <= {r.sha for r in ran if r.kind is not Kind.CI}


def test_ci_agreeing_with_the_first_calibration_run_saves_the_second():
    settings = Settings(flake_rate=0.05)  # a flaky test: two calibration runs per endpoint
    rng = random.Random(1)
    plain = simulate(40, FlakyTest(20, 0.0, rng), 4, settings)
    with_ci = simulate(40, FlakyTest(20, 0.0, random.Random(1)), 4, settings, ci=[0, 40])
    assert plain.runs_by_kind[Kind.CALIBRATE] == 4
    assert with_ci.runs_by_kind[Kind.CALIBRATE] == 2  # one per endpoint on the bisect runner, always
    assert with_ci.culprit_index() == plain.culprit_index() == 20


def test_ci_disagreeing_with_the_runner_saves_nothing():
    graph, good, bad = linear_graph(40)
    problem = Problem(graph, good, bad, Settings(flake_rate=0.05))
    # CI read GOOD as failing (a flake there, or another runner class): the runner's first reading passes
    runs = [Run("c0", Kind.CI, RawResult(1)), Run("c0", Kind.CALIBRATE, RawResult(0), 1)]
    runs += [Run("c40", Kind.CALIBRATE, RawResult(1), 1), Run("c40", Kind.CALIBRATE, RawResult(1), 1)]
    decision = decide(problem, State(), runs, (), 4)
    assert decision.state.phase is Phase.CALIBRATING
    assert [p.sha for p in decision.probes if p.kind is Kind.CALIBRATE] == ["c0"]


def test_confirmation_reruns_are_the_same_with_or_without_ci():
    settings = Settings(flake_rate=0.05)
    a = simulate(64, FlakyTest(41), 4, settings)
    b = simulate(64, FlakyTest(41), 4, settings, ci=list(range(8, 64, 8)))
    assert a.culprit_index() == b.culprit_index() == 41
    assert a.runs_by_kind[Kind.CONFIRM] == b.runs_by_kind[Kind.CONFIRM] > 0


def test_the_run_budget_counts_only_the_bisect_runners_results():
    graph, good, bad = linear_graph(30)
    problem = Problem(graph, good, bad, Settings(flake_rate=None, max_runs=3))
    ci = [Run(f"c{i}", Kind.CI, RawResult(0 if i < 15 else 1)) for i in range(1, 30)]
    decision = decide(problem, State(), ci, (), 2)
    assert decision.outcome is None and decision.probes  # 29 CI readings spent none of the 3 runs


def _runner_runs(n: int, culprit: int, flake_rate: float | None, ci: list[int]) -> list[Run]:
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings(flake_rate=flake_rate))
    test = FlakyTest(culprit)
    state, runs = State(), [Run(f"c{i}", Kind.CI, test.run(f"c{i}")) for i in ci]
    while True:
        decision = decide(problem, state, runs, (), 4)
        state = decision.state
        if decision.outcome is not None:
            return runs
        runs += [Run(p.sha, p.kind, test.run(p.sha), p.round) for p in decision.probes]


def test_ci_readings_without_a_metric_are_cis_verdicts_never_an_untestable_endpoint():
    """A metric test: CI's passing run at GOOD printed no reading (only failures print `avg_kl_div=... >`)."""
    from bot.domain.bisect.verdict import MetricRule

    graph, good, bad = linear_graph(20)
    problem = Problem(graph, good, bad, Settings(flake_rate=None, metric=MetricRule(threshold=0.002)))
    ci = [Run(good, Kind.CI, RawResult(0, None)), Run(bad, Kind.CI, RawResult(1, 0.0065))]
    decision = decide(problem, State(), ci, (), 4)
    assert decision.outcome is None
    assert sorted(p.sha for p in decision.probes if p.kind is Kind.CALIBRATE) == sorted([good, bad])
    ci_skip = [Run(good, Kind.CI, RawResult(125, None)), Run(bad, Kind.CI, RawResult(1, 0.0065))]
    assert decide(problem, State(), ci_skip, (), 4).outcome is None  # CI's word never makes an endpoint untestable


def test_the_runs_that_back_a_culprit_ci_pinned_are_never_cancelled_as_settled():
    """CI's readings settle the posterior at the culprit, so its own FAIL run (and its parent's PASS) look settled:
    the engine must not cancel the very runs it asked for to back the answer (the demo once dispatched and
    cancelled the culprit's run 1,600 times)."""
    graph, good, bad = linear_graph(60)
    problem = Problem(graph, good, bad, Settings(flake_rate=None))
    # five scheduled runs read c32 green and c33 red: one pass is not proof where a culprit may fail only some of
    # the time (bot.domain.bisect.intermittent), five pin it at P > 0.99
    reads = {0: 1, 32: 5, 33: 5, 40: 1, 60: 1}
    runs = [Run(f"c{i}", Kind.CI, RawResult(0 if i < 33 else 1)) for i, times in reads.items() for _ in range(times)]
    runs += [Run("c0", Kind.CALIBRATE, RawResult(0), 1), Run("c60", Kind.CALIBRATE, RawResult(1), 1)]
    first = decide(problem, State(), runs, (), 4)
    wanted = {p.sha for p in first.probes}
    assert first.guess.sha == "c33" and first.guess.probability >= 0.99 and {"c32", "c33"} <= wanted
    again = decide(problem, first.state, runs, first.probes, 0)
    assert not {p.sha for p in again.obsolete} & {"c32", "c33"}
    assert again.outcome is None and again.probes == ()  # it waits for them
