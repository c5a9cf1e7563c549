"""The driver against a backend whose timing the test controls: results that race a cancellation."""

from __future__ import annotations

import time
from datetime import UTC, datetime

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.domain.bisect.model import Status
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.describe import describe
from bot.service.driver import Driver
from bot.service.report import summary
from runners.spec import StepResult, StepSpec
from scenarios.synthetic import build


class EndpointsFirst:
    """Every step passes. The endpoints' results come back first, one per wait; the other steps' results
    are held back until something was cancelled, then delivered anyway: they finished just as the driver
    cancelled them, as a real runner's can."""

    def __init__(self, workers: int, endpoints: set[str]):
        self.workers, self.endpoints = workers, endpoints
        self.pending: list[StepSpec] = []
        self.cancelled: set[int] = set()

    @property
    def free(self) -> int:
        return self.workers - len([s for s in self.pending if s.step_id not in self.cancelled])

    def submit(self, spec: StepSpec) -> None:
        self.pending.append(spec)

    def wait(self, timeout: float | None) -> list[StepResult]:
        ready = list(self.pending) if self.cancelled else [s for s in self.pending if s.sha in self.endpoints][:1]
        if not ready:
            time.sleep(min(timeout or 0.01, 0.01))
            return []
        for spec in ready:
            self.pending.remove(spec)
        now = datetime.now(UTC)
        return [StepResult(s.step_id, s.sha, 0, None, None, "fake", 0.0, "", now, now) for s in ready]

    def cancel(self, step_ids: list[int]) -> None:
        self.cancelled.update(step_ids)  # too late: their results are already on their way

    def waiting(self) -> dict[int, str]:
        return {}

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        return False

    def close(self) -> None:
        pass


def test_a_result_arriving_for_a_step_cancelled_as_obsolete_is_ignored(tmp_path):
    """BAD passes while the search overlapped with calibration runs: the driver cancels those search runs,
    their results arrive anyway, and the bisection ends not reproducible instead of crashing."""
    repo = build(tmp_path / "repo", 12, 99)
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    loaded = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, BisectConfig(command=("true",), workers=4))
    backend = EndpointsFirst(4, {loaded.problem.good, loaded.problem.bad})
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, backend).run()
    assert outcome.status is Status.NOT_REPRODUCIBLE
    steps = store.get(loaded.id).steps
    searched = [s for s in steps if s.kind == "search"]
    assert searched and all(s.state == "cancelled" and s.verdict is None for s in searched)
    assert backend.cancelled == {s.id for s in searched}
    # the cancelled runs are paid for: the report counts them and the runner time they held
    row = store.get(loaded.id)
    doc = describe(row, loaded.problem)
    held = sum((s.finished_at - s.started_at).total_seconds() for s in searched)
    assert (doc.cancelled.runs, doc.cancelled.runner_seconds) == (len(searched), round(held, 1))
    assert doc.runner_seconds >= doc.cancelled.runner_seconds
    assert f"{len(searched)} runs cancelled after" in summary(doc)
    assert [s.state for s in doc.steps if s.kind == "search"] == ["cancelled"] * len(searched)  # listed, said nothing
    # BAD passing is read until a culprit failing 70% of the time would have failed there (Settings.reproduce_runs)
    bad_reads = loaded.problem.settings.reproduce_runs
    assert sorted(s.sha for s in steps if s.kind == "calibrate") == sorted([repo.good] * 2 + [repo.bad] * bad_reads)


def test_an_engine_that_cancels_what_it_asked_for_is_stopped_before_it_burns_the_runners(tmp_path, monkeypatch):
    """The engine once asked for a run, then cancelled it as settled, over and over (1,600 step runs in 80 s): the
    driver stops the bisection, inconclusive, once those cancellations exceed the run budget."""
    from bot.domain.bisect import group as group_module
    from bot.domain.bisect.model import Decision, Kind, Probe

    repo = build(tmp_path / "repo", 12, 99)
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    loaded = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, BisectConfig(command=("true",), workers=2))

    def looping(problem, state, runs, in_flight, free, next_round=None):
        probe = Probe(problem.bad, Kind.SEARCH, 1)
        return Decision(state, (probe,), tuple(in_flight))  # wanted again, and what flies is settled

    monkeypatch.setattr(group_module, "decide", looping)  # the engine each test of the driven group asks
    backend = EndpointsFirst(2, set())
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, backend).run()
    budget = loaded.problem.settings.run_budget(len(loaded.problem.graph))
    assert outcome.status is Status.INCONCLUSIVE and "a bug in revert-bisect" in outcome.message
    assert budget < len(backend.cancelled) <= budget + 2  # stopped at once, not after thousands
    assert store.get(loaded.id).status == "inconclusive"


def test_a_bisection_cancelled_while_it_learns_a_reports_tests_stops_its_runs_and_says_cancelled(tmp_path):
    """`--junit`: the first runs (BAD's report) are stopped by a cancellation like any other run."""
    repo = build(tmp_path / "repo", 8, 4)
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    config = BisectConfig(command=("true",), workers=2, junit="report.xml")
    loaded = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, config)
    backend = EndpointsFirst(2, set())  # nothing ever finishes until something was cancelled
    asked = []

    def cancelled() -> bool:
        asked.append(1)
        return len(asked) > 3  # once the discovery runs are in flight

    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, backend, cancelled=cancelled).run()
    assert outcome.status is Status.CANCELLED
    row = store.get(loaded.id)
    assert row.status == "cancelled" and {s.state for s in row.steps} == {"cancelled"}
    assert backend.cancelled == {s.id for s in row.steps}
