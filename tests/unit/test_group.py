"""Several red tests in one search (bot.domain.bisect.group): a posterior per test over shared steps."""

from __future__ import annotations

import random

from bot.domain.bisect.group import BAD_READINGS, Group, decide_group
from bot.domain.bisect.model import Kind, Phase, Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import FlakyTest, RedFirst, linear_graph, red_tests, simulate, simulate_group
from bot.domain.bisect.verdict import RawResult

N = 64


def deterministic(culprit: int) -> FlakyTest:
    return FlakyTest(culprit, 0.0, random.Random(culprit))


def test_tests_sharing_a_culprit_converge_together_and_every_step_carries_them_all():
    graph, good, bad = linear_graph(N)
    group = Group({t: Problem(graph, good, bad) for t in ("a", "b", "c")})
    tests = {t: deterministic(23) for t in group.tests}
    states, runs, steps = {t: State() for t in group.tests}, [], []
    while True:
        decision = decide_group(group, states, runs, (), 2)
        states = dict(decision.states)
        if decision.done:
            break
        for step in decision.steps:
            assert {p.test for p in step} == set(group.tests), step  # one step, every test aboard
            steps.append(step)
            runs += [Run(p.sha, p.kind, tests[p.test].run(p.sha), p.round, p.test) for p in step]
    decided = {t: d for t, d in decision.decisions.items()}
    assert all(d.outcome.status is Status.FOUND and d.outcome.culprit == "c23" for d in decided.values())
    alone = simulate(N, deterministic(23), 2).runs
    # three tests for the price of one, plus the group's re-reading of BAD
    assert len(steps) <= alone + BAD_READINGS - 1, (len(steps), alone)


def test_tests_with_different_culprits_share_steps_until_they_part_and_each_ends_with_its_own():
    graph, good, bad = linear_graph(N)
    group = Group({t: Problem(graph, good, bad) for t in ("early", "late")})
    tests = {"early": deterministic(9), "late": deterministic(50)}
    states, runs, carried = {t: State() for t in group.tests}, [], []
    while not (decision := decide_group(group, states, runs, (), 1)).done:
        states = dict(decision.states)
        for step in decision.steps:
            carried.append((step[0].sha, {p.test for p in step}))
            runs += [Run(p.sha, p.kind, tests[p.test].run(p.sha), p.round, p.test) for p in step]
    first_search = next(tests_ for sha, tests_ in carried if sha not in (good, bad))
    assert first_search == {"early", "late"}  # one range, one posterior each: they split it together first
    assert any(tests_ == {"early"} for _, tests_ in carried) and any(tests_ == {"late"} for _, tests_ in carried)
    result = simulate_group(N, {"early": deterministic(9), "late": deterministic(50)}, 1)
    assert result.outcomes["early"].culprit == "c9" and result.outcomes["late"].culprit == "c50"
    assert {o.status for o in result.outcomes.values()} == {Status.FOUND}


def test_a_flaky_test_that_passes_at_bad_leaves_with_no_culprit_and_rides_no_further_step():
    graph, good, bad = linear_graph(N)
    group = Group({t: Problem(graph, good, bad) for t in ("real", "flaky")})
    real = deterministic(30)
    states = {t: State() for t in group.tests}
    # the red run's reading: both failed at BAD; the flaky one passes whenever it runs again
    runs = [Run(bad, Kind.CALIBRATE, RawResult(1), 1, t) for t in group.tests]
    ended_at = None
    outcomes = {}
    for _ in range(40):
        decision = decide_group(group, states, runs, (), 1)
        states = dict(decision.states)
        outcomes.update(decision.outcomes)
        if "flaky" in decision.outcomes:
            told = decision.outcomes["flaky"]
            assert told.status in (Status.NOT_REPRODUCIBLE, Status.NO_CULPRIT) and told.culprit is None, told
            ended_at = len(runs)
        if decision.done:
            break
        for step in decision.steps:
            if ended_at is not None:
                assert "flaky" not in {p.test for p in step}, step  # it spends nothing more
            for p in step:
                raw = RawResult(0) if p.test == "flaky" else real.run(p.sha)
                runs.append(Run(p.sha, p.kind, raw, p.round, p.test))
    assert ended_at is not None
    assert decision.done and outcomes["real"].culprit == "c30"


def test_a_test_whose_own_good_is_later_is_never_run_below_it():
    result = simulate_group(N, {"wide": deterministic(40), "narrow": deterministic(40)}, 2, goods={"narrow": 32})
    assert result.outcomes["narrow"].culprit == "c40" and result.outcomes["wide"].culprit == "c40"
    graph, good, bad = linear_graph(N)
    scope = Problem(graph, "c32", bad).scope(())
    assert scope.candidates[0] == "c33" and scope.position("c12") is None


def test_a_culprit_of_several_tests_is_reverted_once_and_its_ab_steps_carry_them_all():
    graph, good, bad = linear_graph(N)
    head = bad
    group = Group({t: Problem(graph, good, bad, Settings(), head) for t in ("a", "b")})
    test = deterministic(12)
    states, runs = {t: State() for t in group.tests}, []
    reverts = []
    for _ in range(60):
        decision = decide_group(group, states, runs, (), 2)
        states = dict(decision.states)
        if decision.done:
            break
        if decision.wants_revert:
            reverts.append(decision.wants_revert)
            states = {
                t: s
                if s.confirming not in decision.wants_revert
                else State(**{**s.__dict__, "revert": "r" + s.confirming})
                for t, s in states.items()
            }
            continue
        for step in decision.steps:
            kinds = {p.kind for p in step}
            if Kind.AB_HEAD in kinds or Kind.AB_REVERT in kinds:
                assert {p.test for p in step} == {"a", "b"}, step
            for p in step:
                raw = RawResult(0) if p.kind is Kind.AB_REVERT else test.run(p.sha)
                runs.append(Run(p.sha, p.kind, raw, p.round, p.test))
    assert reverts == [("c12",)]
    for d in decision.decisions.values():
        assert d.outcome.status is Status.FOUND and d.outcome.ab is not None and d.outcome.ab.passed


def test_at_five_percent_flakes_every_culprit_is_as_right_as_alone_for_at_most_0_6_times_the_runs():
    together_runs = alone_runs = judged = 0
    right = {"together": 0, "alone": 0}
    for seed in range(200):
        shape = red_tests(random.Random(seed), N)

        def tests(shape=shape, seed=seed) -> dict[str, RedFirst]:
            return {
                t: RedFirst(
                    FlakyTest(N + 1 if c is None else c, 0.3 if c is None else 0.05, random.Random(seed * 10 + i)),
                    f"c{N}",
                )
                for i, (t, c) in enumerate(shape.items())
            }

        together = simulate_group(N, tests(), 4)
        alone = {t: simulate(N, x, 4) for t, x in tests().items()}
        together_runs += together.runs
        alone_runs += sum(r.runs for r in alone.values())
        for t, c in shape.items():
            if c is None:  # a flaky test: nothing may be blamed on it
                assert together.outcomes[t].status not in (Status.FOUND, Status.AMBIGUOUS), (seed, t)
                continue
            judged += 1
            right["together"] += together.outcomes[t].culprit == f"c{c}"
            right["alone"] += alone[t].outcome.culprit == f"c{c}"
    assert right["together"] / judged >= 0.99, (right, judged)
    assert right["together"] >= right["alone"], right
    assert together_runs <= 0.6 * alone_runs, (together_runs, alone_runs)


def test_a_done_group_decides_nothing_more():
    graph, good, bad = linear_graph(8)
    group = Group({"a": Problem(graph, good, bad)})
    decision = decide_group(group, {"a": State(Phase.DONE)}, [], (), 2)
    assert decision.done and not decision.steps and not decision.decisions
