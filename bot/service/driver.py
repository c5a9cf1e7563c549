"""Drives one bisection: engine decisions in, steps out, everything through the store first.

Order of writes, so that a process killed at any line resumes cleanly:
  1. the engine's new state is saved;
  2. the steps about to run are recorded as `running`;
  3. only then are they dispatched; each result is written as it arrives.
On resume, steps still `running` belong to a process that is gone: they become `lost` (infra,
never evidence) and the engine simply plans around them; finished steps are never re-run.

A bisection is its tests (bot.domain.bisect.ledger), one or several, searched together (bot.domain.bisect.group):
a step carries the tests the group decided, runs them together and is read per test.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Iterable
from dataclasses import replace

from bot.domain.bisect.group import GroupDecision, Step, decide_group
from bot.domain.bisect.ledger import (
    Entry,
    Result,
    ci_runs,
    entries,
    outcome_model,
    phase_of,
    results_of,
    runs_of,
    summary,
)
from bot.domain.bisect.model import Decision, Kind, Outcome, Phase, Probe, Problem, Run, State, Status
from bot.domain.bisect.verdict import Verdict
from bot.domain.outcome import BisectionOutcome
from bot.domain.reasons import Reason
from bot.observability.heartbeat import beat
from bot.ports.store import BisectionRecord, BisectionStore, NewStep
from bot.service.as_ci import ci_failures, naming_the_runner, read_as_ci
from bot.service.config import BisectConfig
from bot.service.discovery import CANCELLED, discover
from bot.service.group_rows import classify_all, group_of, raw_results, step_report
from bot.service.snapshot import Snapshot
from runners.spec import Backend, RevertOf, StepResult, StepSpec, new_ref

# After a result, wait a little for its round-mates before planning again, so that equal-length
# runs form real rounds instead of one probe placed on stale information.
GATHER_FRACTION = 0.5
CANCEL_POLL_S = 1.0  # how often a cancellable bisection looks up from waiting
GATHER_FLOOR_S = 0.2


Observer = Callable[[Snapshot], None]
Reverter = Callable[[str, str], "tuple[str | None, str | None]"]  # (culprit, onto) -> (revert sha, or why not)


def finished_runs(row: BisectionRecord) -> list[Run]:
    """Runs the engine learns from: CI's readings of each test first, then the done and lost steps (cancelled ones
    said nothing), one per test they carried."""
    return ci_runs(entries(row.tests)) + [run for step in row.steps for run in runs_of(step)]


class Driver:
    def __init__(
        self,
        store: BisectionStore,
        bisection_id: int,
        problem: Problem,
        config: BisectConfig,
        backend: Backend,
        observer: Observer | None = None,
        reverter: Reverter | None = None,
        cancelled: Callable[[], bool] | None = None,
    ):
        self.reverter = reverter
        self.cancelled = cancelled
        self.store = store
        self.id = bisection_id
        self.problem = problem
        self.config = config
        self.backend = backend
        self.observer = observer or (lambda snap: None)
        self.env_spec = config.env_spec()
        self.own_test, self.needs = config.own_test(), config.needed()

    def run(self) -> Outcome:
        try:
            return self._run()
        finally:
            self.backend.close()

    def _discovered(self) -> Outcome | None:
        """The tests of a JUnit report, learnt first (bot.service.discovery); the outcome when there are none."""
        found = discover(
            self.store,
            self.id,
            self.problem,
            self.config.tests,
            self.problem.settings.max_infra_per_commit,
            self.backend,
            lambda step_id, sha, ref: self._spec(step_id, (Probe(sha, Kind.CALIBRATE),), {}, ref),
            self.cancelled or (lambda: False),
        )
        if not isinstance(found, str):
            return None
        if found == CANCELLED:
            outcome = Outcome(Status.CANCELLED, found)
        else:
            facts = dict(endpoint="BAD", side="bad", sha=self.problem.bad)
            outcome = Outcome(Status.UNTESTABLE, found, reason=Reason.ENDPOINT_UNTESTABLE, facts=facts)
        self.store.save_outcome(self.id, outcome.status.value, outcome_model(outcome))
        return outcome

    def _run(self) -> Outcome:
        row = self.store.get(self.id)
        if row.tests == {} and (ended := self._discovered()) is not None:
            return ended
        row = self.store.get(self.id)
        self.group, states = group_of(self.problem, row, self.config.settings_for, self.config.metrics is not None)
        ci_kinds = ci_failures(row, self.group)  # how CI's red run failed each test
        self.tests: dict[str, Entry] = {e.test: e for e in entries(row.tests)}
        flying = self._adopt(row, states)
        left = [s.id for s in row.steps if s.state == "running" and s.id not in flying]
        self.store.mark_lost(self.id, "lost: the process driving this step stopped before it finished", step_ids=left)
        row = self.store.get(self.id)
        runs = finished_runs(row)
        durations = [s.duration_s for s in row.steps if s.duration_s]
        snap = Snapshot(self.id, phase_of(states.values()), len(self.problem.graph))
        for step in row.steps:
            if step.state in ("done", "lost"):
                snap.runs.append((step.sha, step.kind, Verdict(step.verdict or "infra"), step.metric))
                if step.infra_reason:
                    snap.infra.append((step.sha, step.infra_reason))
        _view(snap, self.tests.values(), runs)
        boundaries: dict[str, float | None] = {t: e.boundary for t, e in self.tests.items()}
        # A guard on the engine itself: runs it asked for and then cancelled as settled are runner time spent for
        # nothing; more of them than the run budget means a bug in the engine, so stop rather than burn GPUs.
        settled_cancels = 0
        budget = sum(p.settings.run_budget(len(self.problem.graph)) for p in self.group.problems.values())
        while True:
            if self.cancelled and self.cancelled():
                decision = _ended(states, Outcome(Status.CANCELLED, "cancelled on request before an answer"))
            elif settled_cancels > budget:
                found = (
                    f"stopped: the engine cancelled {settled_cancels} runs it had asked for, as already settled, "
                    f"more than its run budget of {budget} (a bug in revert-bisect: please report it)"
                )
                decision = _ended(states, Outcome(Status.INCONCLUSIVE, found))
            else:
                busy = [p for step in flying.values() for p in step]
                decision = naming_the_runner(decide_group(self.group, states, runs, busy, self.backend.free), runs)
            boundaries.update({t: d.boundary for t, d in decision.decisions.items()})
            outcome = self._save(decision)
            states = dict(decision.states)
            self._show(snap, decision, flying, runs)
            if outcome is not None:
                self._cancel(flying, list(flying), "cancelled: the bisection finished without it")
                return outcome
            stale = [i for i, step in flying.items() if all(p in decision.obsolete for p in step)]
            if stale:
                self._cancel(flying, stale, "cancelled: other results already settled this commit")
                settled_cancels += len(stale)
            if decision.wants_revert:
                states = self._revert(states, decision.wants_revert)
                continue
            if decision.steps:
                self._dispatch(decision.steps, flying, states)
                self._show(snap, decision, flying, runs)
                continue
            if not flying:
                raise RuntimeError("the engine asked to wait with nothing in flight")
            for result in self._collect(
                durations, flying, lambda decision=decision, runs=runs: self._show(snap, decision, flying, runs)
            ):
                step = flying.pop(result.step_id, None)
                if step is None:  # cancelled as obsolete while its result was on its way: the store says cancelled
                    continue
                kinds = {p.test: p.kind for p in step}
                whole = self.config.whole_step
                raws = read_as_ci(result, raw_results(result, list(kinds), whole), ci_kinds, whole)
                verdicts = classify_all(raws, self.group, boundaries)
                results = {t: Result.of(kinds[t], raws[t], verdicts[t]) for t in kinds}
                report = step_report(result, results)
                self.store.finish_step(result.step_id, report)
                runs += [Run(result.sha, kinds[t], raws[t], step[0].round, t) for t in kinds]
                snap.runs.append((result.sha, step[0].kind.value, Verdict(report.verdict), result.metric))
                for said in dict.fromkeys(r.infra_reason for r in raws.values() if r.infra_reason):
                    snap.infra.append((result.sha, said))
                if result.infra_reason is None:
                    durations.append(result.duration_s)

    def _revert(self, states: dict[str, State], culprits: tuple[str, ...]) -> dict[str, State]:
        """Make (or find, after a restart) each culprit's revert on the branch head, once for all the tests it
        broke; record it first."""
        states = dict(states)
        for culprit in culprits:
            if self.reverter is None:
                sha, error = None, "no reverter configured"
            else:
                sha, error = self.reverter(culprit, self.problem.head)
            for test, state in states.items():
                if state.phase is Phase.CONFIRMING and state.confirming == culprit:
                    states[test] = replace(state, revert=sha, revert_error=error)
                    self.tests[test] = replace(self.tests[test], state=states[test])
        self.store.save_tests(self.id, list(self.tests.values()))
        return states

    def _save(self, decision: GroupDecision) -> Outcome | None:
        """The decision written before anything acts on it; the bisection's outcome once every test has one."""
        for test, d in decision.decisions.items():
            self.tests[test] = self.tests[test].decided(d)
        tests = list(self.tests.values())
        self.store.save_tests(self.id, tests)
        told = summary(tests)
        if told.status is None or told.outcome is None:
            return None
        return _outcome(told.status, told.outcome)

    def _dispatch(self, steps: tuple[Step, ...], flying: dict[int, Step], states: dict[str, State]) -> None:
        refs = [new_ref() for _ in steps]  # stored first: a restarted driver finds the runs by them
        # the backend's name ('local', 'github_actions') is what the metrics group by; a test double may have none
        backend = getattr(self.backend, "name", None)
        news = [
            NewStep(
                step[0].sha,
                step[0].kind.value,
                step[0].round,
                ref,
                backend,
                {p.test: Result(p.kind) for p in step},
            )
            for step, ref in zip(steps, refs)
        ]
        ids = self.store.add_steps(self.id, news)
        for step_id, step, ref in zip(ids, steps, refs):
            flying[step_id] = step
            self.backend.submit(self._spec(step_id, step, states, ref))

    def _spec(self, step_id: int, step: Step, states: dict[str, State], ref: str | None) -> StepSpec:
        reverting = next((states[p.test].confirming for p in step if p.kind is Kind.AB_REVERT), None)
        revert = RevertOf(reverting, self.problem.head) if reverting and self.problem.head else None
        own, named, metrics = self.own_test, (), ()
        if own is not None and not self.config.whole_step and not self.config.metrics:
            own = replace(own, cases=tuple(sorted(p.test for p in step)))  # it runs exactly the cases it carries
        if self.config.members:  # several of the policy's tests: each it carries, in turn
            named = self.config.named_runs(p.test for p in step)
        if self.config.metrics:  # a slowdown's metrics: its one run read for each it carries
            metrics = self.config.named_metrics(p.test for p in step)
        return StepSpec(
            step_id,
            step[0].sha,
            self.config.command,
            self.config.timeout_s,
            self.config.metric_regex,
            metric_file=self.config.metric_file,
            revert=revert,
            env_spec=self.env_spec,
            ref=ref,
            test=own,
            needs=self.needs,
            higher_is_worse=self.config.higher_is_worse,
            junit=self.config.junit,
            tests=named,
            metrics=metrics,
        )

    def _adopt(self, row: BisectionRecord, states: dict[str, State]) -> dict[int, Step]:
        """Steps left running by a process that is gone and whose runs outlive it (Actions runs): wait for them
        instead of losing GPU time; the others become `lost`."""
        adopted: dict[int, Step] = {}
        for step in row.steps:
            if step.state == "running" and step.runner_ref:
                probes = tuple(Probe(step.sha, r.kind, step.round, t) for t, r in results_of(step).items())
                if probes and self.backend.adopt(self._spec(step.id, probes, states, step.runner_ref), step.started_at):
                    adopted[step.id] = probes
        return adopted

    def _collect(self, durations: list[float], flying: dict[int, Step], idle: Callable[[], None]) -> list[StepResult]:
        """The next results (with their round-mates); [] when the bisection was cancelled meanwhile."""
        while not (results := self.backend.wait(timeout=CANCEL_POLL_S)):
            beat()  # still waiting for steps, not stuck: the worker's liveness (/healthz) knows
            if self.cancelled and self.cancelled():
                return []
            idle()  # still waiting: the display shows why (a step queued for a runner, say)
        if results and len(results) < len(flying):
            typical = statistics.median(durations) if durations else results[0].duration_s
            deadline = time.monotonic() + max(GATHER_FLOOR_S, GATHER_FRACTION * typical)
            while len(results) < len(flying) and (left := deadline - time.monotonic()) > 0:
                results += self.backend.wait(timeout=left)
        return results

    def _cancel(self, flying: dict[int, Step], step_ids: list[int], reason: str) -> None:
        if step_ids:
            self.backend.cancel(step_ids)
            self.store.mark_lost(self.id, reason, state="cancelled", step_ids=step_ids)
            for step_id in step_ids:
                flying.pop(step_id, None)

    def _show(self, snap: Snapshot, decision: GroupDecision, flying: dict[int, Step], runs: list[Run]) -> None:
        snap.phase = phase_of(decision.states.values())
        snap.in_flight = [step[0].sha for step in flying.values()]
        waiting = self.backend.waiting()
        snap.waiting = [f"{flying[i][0].sha[:12]}: {why}" for i, why in sorted(waiting.items()) if i in flying]
        told = summary(list(self.tests.values()))
        snap.guess, snap.guess_probability = told.guess, told.guess_probability or 0.0
        snap.flake_rate = told.flake_rate or 0.0
        _view(snap, [self.tests[t] for t in decision.decisions], runs)
        self.observer(snap)


def _view(snap: Snapshot, tests: Iterable[Entry], runs: list[Run]) -> None:
    """The display's view of `tests`: each as it stands, with the results it got."""
    for test in tests:
        snap.tests[test.test] = test
        snap.test_runs[test.test] = sum(1 for r in runs if r.test == test.test and r.raw.infra_reason is None)


def _outcome(status: Status, told: BisectionOutcome) -> Outcome:
    """The bisection's outcome, for its caller (the CLI prints its culprit and candidates)."""
    return Outcome(
        status,
        told.message or "",
        culprit=told.culprit,
        first_parent_culprit=told.first_parent_culprit,
        confidence=told.confidence or 0.0,
        candidates=tuple(told.candidates),
        best_guess=told.best_guess,
    )


def _ended(states: dict[str, State], outcome: Outcome) -> GroupDecision:
    """Every test still running ends with `outcome` (cancelled, or stopped by the driver's own guard)."""
    decisions = {
        t: Decision(replace(s, phase=Phase.DONE), outcome=outcome)
        for t, s in states.items()
        if s.phase is not Phase.DONE
    }
    return GroupDecision({**states, **{t: d.state for t, d in decisions.items()}}, decisions)
