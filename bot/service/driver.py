"""Drives one bisection: engine decisions in, steps out, everything through the store first.

Order of writes, so that a process killed at any line resumes cleanly:
  1. the engine's new state is saved;
  2. the steps about to run are recorded as `running`;
  3. only then are they dispatched; each result is written as it arrives.
On resume, steps still `running` belong to a process that is gone: they become `lost` (infra,
never evidence) and the engine simply plans around them; finished steps are never re-run.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Decision, Kind, Outcome, Phase, Probe, Problem, Run, State, Status
from bot.domain.bisect.verdict import RawResult, Verdict, classify
from bot.domain.outcome import AB, BisectionOutcome
from bot.ports.store import BisectionRecord, BisectionStore, NewStep, StepRecord, StepReport
from bot.service.config import BisectConfig
from runners.spec import Backend, RevertOf, StepResult, StepSpec, new_ref

# After a result, wait a little for its round-mates before planning again, so that equal-length
# runs form real rounds instead of one probe placed on stale information.
GATHER_FRACTION = 0.5
CANCEL_POLL_S = 1.0  # how often a cancellable bisection looks up from waiting
GATHER_FLOOR_S = 0.2


@dataclass
class Snapshot:
    """What a progress display shows."""

    bisection_id: int
    phase: Phase
    candidates: int
    runs: list[tuple[str, str, Verdict, float | None]] = field(default_factory=list)  # sha, kind, verdict, metric
    in_flight: list[str] = field(default_factory=list)
    waiting: list[str] = field(default_factory=list)  # steps not started yet, and why (no free runner, ...)
    infra: list[tuple[str, str]] = field(default_factory=list)  # sha, reason: runs that said nothing about their commit
    guess: str | None = None
    guess_probability: float = 0.0
    flake_rate: float = 0.0
    started: float = field(default_factory=time.monotonic)


Observer = Callable[[Snapshot], None]


def state_of(row: BisectionRecord) -> State:
    return State(
        Phase(row.phase),
        tuple(row.merges or ()),
        row.confirming,
        row.confirm_round,
        row.confirmations,
        row.revert,
        row.revert_error,
    )


Reverter = Callable[[str, str], "tuple[str | None, str | None]"]  # (culprit, onto) -> (revert sha, or why not)


def run_of(step: StepRecord) -> Run:
    return Run(step.sha, Kind(step.kind), RawResult(step.exit_code, step.metric, step.infra_reason), step.round)


def finished_runs(row: BisectionRecord) -> list[Run]:
    """Runs the engine learns from: done and lost steps (cancelled ones said nothing)."""
    return [run_of(s) for s in row.steps if s.state in ("done", "lost")]


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
        row = self.store.get(self.id)
        state = state_of(row)
        flying = self._adopt(row, state)
        left = [s.id for s in row.steps if s.state == "running" and s.id not in flying]
        self.store.mark_lost(self.id, "lost: the process driving this step stopped before it finished", step_ids=left)
        row = self.store.get(self.id)
        runs = finished_runs(row)
        durations = [s.duration_s for s in row.steps if s.duration_s]
        snap = Snapshot(self.id, state.phase, len(self.problem.graph))
        for step in row.steps:
            if step.state in ("done", "lost"):
                snap.runs.append((step.sha, step.kind, Verdict(step.verdict or "infra"), step.metric))
                if step.infra_reason:
                    snap.infra.append((step.sha, step.infra_reason))
        # A guard on the engine itself: runs it asked for and then cancelled as settled are runner time spent for
        # nothing; more of them than the run budget means a bug in the engine, so stop rather than burn GPUs.
        settled_cancels, budget = 0, self.problem.settings.run_budget(len(self.problem.graph))
        try:
            while True:
                if self.cancelled and self.cancelled():
                    decision = Decision(
                        replace(state, phase=Phase.DONE),
                        outcome=Outcome(Status.CANCELLED, "cancelled on request before an answer"),
                    )
                elif settled_cancels > budget:
                    found = (
                        f"stopped: the engine cancelled {settled_cancels} runs it had asked for, as already settled, "
                        f"more than its run budget of {budget} (a bug in revert-bisect: please report it)"
                    )
                    decision = Decision(replace(state, phase=Phase.DONE), outcome=Outcome(Status.INCONCLUSIVE, found))
                else:
                    decision = decide(self.problem, state, runs, list(flying.values()), self.backend.free)
                self._save(state, decision)
                state = decision.state
                self._show(snap, decision, flying)
                if decision.outcome is not None:
                    self._cancel(flying, list(flying), "cancelled: the bisection finished without it")
                    return decision.outcome
                if decision.obsolete:
                    stale = [i for i, p in flying.items() if p in decision.obsolete]
                    self._cancel(flying, stale, "cancelled: other results already settled this commit")
                    settled_cancels += len(stale)
                if decision.wants_revert:
                    state = self._revert(state, decision.wants_revert)
                    continue
                if decision.probes:
                    self._dispatch(decision.probes, flying, state)
                    self._show(snap, decision, flying)
                    continue
                if not flying:
                    raise RuntimeError("the engine asked to wait with nothing in flight")
                for result in self._collect(
                    durations, flying, lambda decision=decision: self._show(snap, decision, flying)
                ):
                    probe = flying.pop(result.step_id, None)
                    if probe is None:  # cancelled as obsolete while its result was on its way: the store says cancelled
                        continue
                    raw = RawResult(result.exit_code, result.metric, result.infra_reason)
                    verdict = classify(raw, self.problem.settings.metric, decision.boundary)
                    self.store.finish_step(
                        result.step_id,
                        StepReport(
                            result.exit_code,
                            result.metric,
                            result.infra_reason,
                            verdict.value,
                            result.runner,
                            result.duration_s,
                            result.log_tail,
                            result.env_key,
                            result.env_reused if result.env_key else None,
                        ),
                    )
                    runs.append(Run(result.sha, probe.kind, raw, probe.round))
                    snap.runs.append((result.sha, probe.kind.value, verdict, result.metric))
                    if result.infra_reason:
                        snap.infra.append((result.sha, result.infra_reason))
                    if result.infra_reason is None:
                        durations.append(result.duration_s)
        finally:
            self.backend.close()

    def _revert(self, state: State, culprit: str) -> State:
        """Make (or find, after a restart) the culprit's revert on the branch head; record it first."""
        if self.reverter is None:
            sha, error = None, "no reverter configured"
        else:
            sha, error = self.reverter(culprit, self.problem.head)
        self.store.save_progress(self.id, revert=sha, revert_error=error)
        return replace(state, revert=sha, revert_error=error)

    def _save(self, old: State, decision: Decision) -> None:
        new = decision.state
        fields = dict(
            guess=decision.guess.sha if decision.guess else None,
            guess_probability=decision.guess.probability if decision.guess else None,
            flake_rate=decision.flake_rate,
            boundary=decision.boundary,
        )
        if new != old:
            fields.update(
                phase=new.phase.value,
                merges=list(new.merges),
                confirming=new.confirming,
                confirm_round=new.confirm_round,
                confirmations=new.confirmations,
                revert=new.revert,
                revert_error=new.revert_error,
            )
        if decision.outcome is not None:
            out = decision.outcome
            fields.update(
                status=out.status.value,
                finished_at=datetime.now(UTC),
                outcome=BisectionOutcome(
                    message=out.message,
                    culprit=out.culprit,
                    first_parent_culprit=out.first_parent_culprit,
                    confidence=out.confidence,
                    candidates=list(out.candidates),
                    revert_error=out.revert_error,
                    reason=out.reason.value if out.reason else None,
                    facts=dict(out.facts),
                    ab=None
                    if out.ab is None
                    else AB(
                        head=out.ab.head,
                        revert=out.ab.revert,
                        passed=out.ab.passed,
                        head_verdicts=[v.value for v in out.ab.head_verdicts],
                        revert_verdicts=[v.value for v in out.ab.revert_verdicts],
                    ),
                ).as_json(),
            )
        self.store.save_progress(self.id, **fields)

    def _dispatch(self, probes: tuple[Probe, ...], flying: dict[int, Probe], state: State) -> None:
        refs = [new_ref() for _ in probes]  # stored first: a restarted driver finds the runs by them
        # the backend's name ('local', 'github_actions') is what the metrics group by; a test double may have none
        backend = getattr(self.backend, "name", None)
        ids = self.store.add_steps(
            self.id, [NewStep(p.sha, p.kind.value, p.round, ref, backend) for p, ref in zip(probes, refs)]
        )
        for step_id, probe, ref in zip(ids, probes, refs):
            flying[step_id] = probe
            self.backend.submit(self._spec(step_id, probe, state, ref))

    def _spec(self, step_id: int, probe: Probe, state: State, ref: str | None) -> StepSpec:
        revert = (
            RevertOf(state.confirming, self.problem.head)
            if probe.kind is Kind.AB_REVERT and state.confirming and self.problem.head
            else None
        )
        return StepSpec(
            step_id,
            probe.sha,
            self.config.command,
            self.config.timeout_s,
            self.config.metric_regex,
            revert=revert,
            env_spec=self.env_spec,
            ref=ref,
            test=self.own_test,
            needs=self.needs,
            higher_is_worse=self.config.higher_is_worse,
        )

    def _adopt(self, row: BisectionRecord, state: State) -> dict[int, Probe]:
        """Steps left running by a process that is gone and whose runs outlive it (Actions runs): wait for them
        instead of losing GPU time; the others become `lost`."""
        adopted = {}
        for step in row.steps:
            if step.state == "running" and step.runner_ref:
                probe = Probe(step.sha, Kind(step.kind), step.round)
                if self.backend.adopt(self._spec(step.id, probe, state, step.runner_ref), step.started_at):
                    adopted[step.id] = probe
        return adopted

    def _collect(self, durations: list[float], flying: dict[int, Probe], idle: Callable[[], None]) -> list[StepResult]:
        """The next results (with their round-mates); [] when the bisection was cancelled meanwhile."""
        while not (results := self.backend.wait(timeout=CANCEL_POLL_S)):
            if self.cancelled and self.cancelled():
                return []
            idle()  # still waiting: the display shows why (a step queued for a runner, say)
        if results and len(results) < len(flying):
            typical = statistics.median(durations) if durations else results[0].duration_s
            deadline = time.monotonic() + max(GATHER_FLOOR_S, GATHER_FRACTION * typical)
            while len(results) < len(flying) and (left := deadline - time.monotonic()) > 0:
                results += self.backend.wait(timeout=left)
        return results

    def _cancel(self, flying: dict[int, Probe], step_ids: list[int], reason: str) -> None:
        if step_ids:
            self.backend.cancel(step_ids)
            self.store.mark_lost(self.id, reason, state="cancelled", step_ids=step_ids)
            for step_id in step_ids:
                flying.pop(step_id, None)

    def _show(self, snap: Snapshot, decision: Decision, flying: dict[int, Probe]) -> None:
        snap.phase = decision.state.phase
        snap.in_flight = [p.sha for p in flying.values()]
        waiting = self.backend.waiting()
        snap.waiting = [f"{flying[i].sha[:12]}: {why}" for i, why in sorted(waiting.items()) if i in flying]
        if decision.guess:
            snap.guess, snap.guess_probability = decision.guess.sha, decision.guess.probability
        snap.flake_rate = decision.flake_rate
        self.observer(snap)
