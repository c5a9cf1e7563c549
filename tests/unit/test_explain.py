"""bot.domain.bisect.explain: what the dashboard shows is what the engine decided."""

from types import SimpleNamespace

import pytest

from bot.domain.bisect.engine import decide
from bot.domain.bisect.explain import explain
from bot.domain.bisect.model import Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import FlakyTest, linear_graph


def _run_engine(n: int, culprit: int, workers: int, flake: float):
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings())
    test = FlakyTest(culprit, flake)
    state, runs, steps = State(), [], []
    while True:
        decision = decide(problem, state, runs, (), workers)
        state = decision.state
        if decision.outcome is not None:
            return problem, decision, steps
        for p in decision.probes:
            raw = test.run(p.sha)
            runs.append(Run(p.sha, p.kind, raw, p.round))
            steps.append(
                SimpleNamespace(
                    id=len(steps) + 1,
                    sha=p.sha,
                    kind=p.kind.value,
                    round=p.round,
                    state="done",
                    verdict=None,
                    exit_code=raw.exit_code,
                    metric=raw.metric,
                    infra_reason=raw.infra_reason,
                )
            )


@pytest.mark.parametrize("n, culprit, workers", [(40, 23, 1), (64, 1, 3), (17, 17, 2)])
def test_the_explanation_agrees_with_the_engines_answer(n, culprit, workers):
    problem, decision, steps = _run_engine(n, culprit, workers, 0.0)
    assert decision.outcome.status is Status.FOUND
    recorded = sorted((sha for sha in problem.graph if sha != problem.good), key=lambda sha: int(sha[1:]))
    told = explain(problem.good, problem.bad, Settings(), steps, recorded, decision.flake_rate)
    assert told.recorded and told.order == [problem.good, *recorded]
    assert set(told.verdicts) == {s.id for s in steps}  # every finished run has the engine's verdict
    best = max(told.posterior.by_position, key=told.posterior.by_position.get)
    assert told.order[best] == decision.outcome.culprit
    assert told.posterior.by_position[best] >= decision.outcome.confidence - 1e-9


def test_without_a_recorded_range_the_order_is_replayed_and_a_bisection_without_runs_has_no_posterior():
    problem, decision, steps = _run_engine(40, 23, 2, 0.0)
    told = explain(problem.good, problem.bad, Settings(), steps, [], decision.flake_rate)
    assert not told.recorded and [int(sha[1:]) for sha in told.order] == sorted(int(sha[1:]) for sha in told.order)
    empty = explain(problem.good, problem.bad, Settings(), [], [], None)
    assert empty.order == [problem.good, problem.bad] and empty.posterior.note == "no results yet"
