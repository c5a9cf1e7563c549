"""Drives one bisection: engine decisions in, steps out, everything through the store first.

Order of writes, so that a process killed at any line resumes cleanly:
  1. the engine's new state is saved;
  2. the steps about to run are recorded as `running`;
  3. only then are they dispatched; each result is written as it arrives.
On resume, steps still `running` belong to a process that is gone: they become `lost` (infra,
never evidence) and the engine simply plans around them; finished steps are never re-run.

A bisection of several tests (bot.domain.bisect.group) is driven the same way: a step carries the tests the
group decided, runs them together and is read per test; a bisection of one is a group of one.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import replace
from datetime import UTC, datetime

from bot.domain.bisect.group import GroupDecision, Step, decide_group
from bot.domain.bisect.model import Decision, Kind, Outcome, Phase, Probe, Problem, Run, State, Status
from bot.domain.bisect.verdict import RawResult, Verdict
from bot.domain.outcome import members
from bot.domain.reasons import Reason
from bot.observability.heartbeat import beat
from bot.ports.store import BisectionRecord, BisectionStore, NewStep
from bot.service.as_ci import ci_failures, naming_the_runner, read_as_ci
from bot.service.config import BisectConfig
from bot.service.discovery import CANCELLED, discover
from bot.service.group_rows import (
    SOLO,
    classify_all,
    group_of,
    group_outcome,
    is_group,
    outcome_json,
    raw_results,
    runs_of,
    state_json,
    step_report,
    step_results,
    step_verdict,
)
from bot.service.snapshot import Snapshot, TestView
from runners.spec import Backend, RevertOf, StepResult, StepSpec, new_ref

# After a result, wait a little for its round-mates before planning again, so that equal-length
# runs form real rounds instead of one probe placed on stale information.
GATHER_FRACTION = 0.5
CANCEL_POLL_S = 1.0  # how often a cancellable bisection looks up from waiting
GATHER_FLOOR_S = 0.2


Observer = Callable[[Snapshot], None]
Reverter = Callable[[str, str], "tuple[str | None, str | None]"]  # (culprit, onto) -> (revert sha, or why not)
_PHASES = list(Phase)


def finished_runs(row: BisectionRecord) -> list[Run]:
    """Runs the engine learns from: done and lost steps (cancelled ones said nothing), one per test they carried."""
    return [run for step in row.steps for run in runs_of(step)]


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
        if isinstance(found, dict):
            return None
        if found == CANCELLED:
            outcome = Outcome(Status.CANCELLED, found)
        else:
            facts = dict(endpoint="BAD", side="bad", sha=self.problem.bad)
            outcome = Outcome(Status.UNTESTABLE, found, reason=Reason.ENDPOINT_UNTESTABLE, facts=facts)
        self.store.save_progress(
            self.id,
            phase=Phase.DONE.value,
            status=outcome.status.value,
            finished_at=datetime.now(UTC),
            outcome=outcome_json(outcome),
        )
        return outcome

    def _run(self) -> Outcome:
        row = self.store.get(self.id)
        if row.tests == {} and (ended := self._discovered()) is not None:
            return ended
        row = self.store.get(self.id)
        self.group, states = group_of(self.problem, row, self.config.settings_for)
        self.grouped = is_group(row)
        ci_kinds = ci_failures(row, self.group, self.grouped)  # how CI's red run failed each test
        self.tests: dict[str, dict] = {t: dict(info) for t, info in (row.tests or {}).items()}
        flying = self._adopt(row, states)
        left = [s.id for s in row.steps if s.state == "running" and s.id not in flying]
        self.store.mark_lost(self.id, "lost: the process driving this step stopped before it finished", step_ids=left)
        row = self.store.get(self.id)
        runs = finished_runs(row)
        durations = [s.duration_s for s in row.steps if s.duration_s]
        snap = Snapshot(self.id, _phase(states), len(self.problem.graph))
        for step in row.steps:
            if step.state in ("done", "lost"):
                snap.runs.append((step.sha, step.kind, Verdict(step.verdict or "infra"), step.metric))
                if step.infra_reason:
                    snap.infra.append((step.sha, step.infra_reason))
        if self.grouped:
            snap.tests = {t: self._view(t, info, runs) for t, info in self.tests.items()}
        boundaries: dict[str, float | None] = {t: info.get("boundary") for t, info in self.tests.items()}
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
            outcome = self._save(states, decision)
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
                raws = (
                    raw_results(result, list(kinds))
                    if self.grouped
                    else {SOLO: RawResult(result.exit_code, result.metric, result.infra_reason)}
                )
                raws = read_as_ci(result, raws, ci_kinds)
                verdicts = classify_all(raws, self.group, boundaries)
                verdict = step_verdict(list(verdicts.values()))
                results = step_results(kinds, raws, verdicts) if self.grouped else None
                self.store.finish_step(result.step_id, step_report(result, verdict, results, raws.get(SOLO)))
                runs += [Run(result.sha, kinds[t], raws[t], step[0].round, t) for t in kinds]
                snap.runs.append((result.sha, step[0].kind.value, verdict, result.metric))
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
                    self.tests.setdefault(test, {})["state"] = state_json(states[test])
            if not self.grouped:
                self.store.save_progress(self.id, revert=sha, revert_error=error)
        if self.grouped:
            self.store.save_progress(self.id, tests=_copy(self.tests))
        return states

    def _save(self, old: dict[str, State], decision: GroupDecision) -> Outcome | None:
        """The decision written before anything acts on it; the bisection's outcome once every test has one."""
        if not self.grouped:
            solo = decision.decisions.get(SOLO)
            if solo is not None:
                self._save_solo(old[SOLO], solo)
            return solo.outcome if solo is not None else None
        for test, d in decision.decisions.items():
            entry = self.tests.setdefault(test, {})
            entry.update(
                state=state_json(d.state),
                guess=d.guess.sha if d.guess else None,
                guess_probability=d.guess.probability if d.guess else None,
                flake_rate=d.flake_rate,
                boundary=d.boundary,
            )
            if d.outcome is not None:
                entry.update(status=d.outcome.status.value, outcome=outcome_json(d.outcome))
        fields: dict = dict(tests=_copy(self.tests), phase=_phase(decision.states).value)
        ended = None
        if decision.done:
            status, told = group_outcome({t: self.tests[t] for t in self.group.tests})
            fields.update(status=status.value, finished_at=datetime.now(UTC), outcome=told.as_json())
            fields.update(guess=told.culprit or told.best_guess, guess_probability=told.confidence)
            ended = Outcome(
                status,
                told.message or "",
                culprit=told.culprit,
                confidence=told.confidence or 0.0,
                best_guess=told.best_guess,
            )
        self.store.save_progress(self.id, **fields)
        return ended

    def _save_solo(self, old: State, decision: Decision) -> None:
        new = decision.state
        fields = dict(
            guess=decision.guess.sha if decision.guess else None,
            guess_probability=decision.guess.probability if decision.guess else None,
            flake_rate=decision.flake_rate,
            boundary=decision.boundary,
        )
        if new != old:
            fields.update(state_json(new))  # the state machine's columns, named as its JSON
        if decision.outcome is not None:
            out = decision.outcome
            fields.update(status=out.status.value, finished_at=datetime.now(UTC), outcome=outcome_json(out))
        self.store.save_progress(self.id, **fields)

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
                {p.test: {"kind": p.kind.value} for p in step} if self.grouped else None,
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
        own, named = self.own_test, ()
        if own is not None and self.grouped:  # the step runs exactly the tests (the file's cases) it carries
            own = replace(own, cases=tuple(sorted(p.test for p in step)))
        if self.config.members:  # several of the policy's tests: each it carries, in turn
            named = self.config.named_runs(p.test for p in step)
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
        )

    def _adopt(self, row: BisectionRecord, states: dict[str, State]) -> dict[int, Step]:
        """Steps left running by a process that is gone and whose runs outlive it (Actions runs): wait for them
        instead of losing GPU time; the others become `lost`."""
        adopted: dict[int, Step] = {}
        for step in row.steps:
            if step.state == "running" and step.runner_ref:
                kinds = {t: r["kind"] for t, r in step.results.items()} if step.results else {SOLO: step.kind}
                probes = tuple(Probe(step.sha, Kind(k), step.round, t) for t, k in kinds.items())
                if self.backend.adopt(self._spec(step.id, probes, states, step.runner_ref), step.started_at):
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
        snap.phase = _phase(decision.states)
        snap.in_flight = [step[0].sha for step in flying.values()]
        waiting = self.backend.waiting()
        snap.waiting = [f"{flying[i][0].sha[:12]}: {why}" for i, why in sorted(waiting.items()) if i in flying]
        solo = decision.decisions.get(SOLO)
        if solo is not None:
            if solo.guess:
                snap.guess, snap.guess_probability = solo.guess.sha, solo.guess.probability
            snap.flake_rate = solo.flake_rate
        for test in decision.decisions if self.grouped else ():
            snap.tests[test] = self._view(test, self.tests[test], runs)
        self.observer(snap)

    @staticmethod
    def _view(test: str, info: dict, runs: list[Run]) -> TestView:
        (member,) = members({test: info})
        return TestView(
            member.status,
            info.get("guess"),
            info.get("guess_probability") or 0.0,
            member.culprit,
            sum(1 for r in runs if r.test == test and r.raw.infra_reason is None),
        )


def _phase(states: dict[str, State]) -> Phase:
    """A group's phase: its least advanced test's (DONE once every test is)."""
    return min((s.phase for s in states.values()), key=_PHASES.index, default=Phase.DONE)


def _ended(states: dict[str, State], outcome: Outcome) -> GroupDecision:
    """Every test still running ends with `outcome` (cancelled, or stopped by the driver's own guard)."""
    decisions = {
        t: Decision(replace(s, phase=Phase.DONE), outcome=outcome)
        for t, s in states.items()
        if s.phase is not Phase.DONE
    }
    return GroupDecision({**states, **{t: d.state for t, d in decisions.items()}}, decisions)


def _copy(tests: dict[str, dict]) -> dict[str, dict]:
    """A fresh value for the JSON column (an update must not hand the store the dict it will compare against)."""
    return {t: dict(info) for t, info in tests.items()}
