"""A bisection's tests and each step's result per test: one shape for a bisection of one test or several (pure).

Every bisection keeps, per test, an `Entry` (its own GOOD, CI's readings of it inside the range -- free evidence,
never a step -- the engine's state, its latest view and, once it ended, its status and outcome) in
`bisections.tests`, and every step keeps, per test it carried, a `Result` in `steps.results`. This module is the only
place that parses and dumps them (migration 0016 wrote the bisections stored before as entries of one test, 0018 the
CI readings stored before as steps into their tests). The bisection's own columns (phase, guess, ...) are what
`summary` derives from its entries, for listings and displays: its phase is the least advanced test's.

The rows it reads are its own Protocols (the store's rows have these fields), so the domain imports no port.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from typing import Any, Protocol

from bot.domain.bisect.model import Decision, Kind, Outcome, Phase, Run, State, Status
from bot.domain.bisect.verdict import RawResult, Verdict
from bot.domain.outcome import AB, BisectionOutcome, StoredEffect, best_guess_of, culprit_of, parse_outcome
from bot.domain.requests import CiReading

_PHASES = list(Phase)


class StepRow(Protocol):
    """What the ledger reads of a stored step (bot.ports.store.StepRecord has it)."""

    sha: str
    kind: str
    round: int
    state: str
    infra_reason: str | None
    results: Mapping[str, Any] | None


# -- the engine's state, as stored ------------------------------------------------------------------------------


def state_json(state: State) -> dict[str, Any]:
    return dict(
        phase=state.phase.value,
        merges=list(state.merges),
        confirming=state.confirming,
        confirm_round=state.confirm_round,
        confirmations=state.confirmations,
        revert=state.revert,
        revert_error=state.revert_error,
    )


def state_from_json(data: Mapping[str, Any] | None) -> State:
    if not data:
        return State()
    return State(
        Phase(data["phase"]),
        tuple(data.get("merges") or ()),
        data.get("confirming"),
        data.get("confirm_round", 0),
        data.get("confirmations", 0),
        data.get("revert"),
        data.get("revert_error"),
    )


# -- a step's result for one test ------------------------------------------------------------------------------


@dataclass(frozen=True)
class Result:
    """One test's part of one step: the kind of run it was for that test and, once the step reported, what the test
    did there (as read: bot.service.as_ci) and its verdict. `reported` is False while the step runs, and for a test
    a finished step said nothing of."""

    kind: Kind
    reported: bool = False
    exit_code: int | None = None
    metric: float | None = None
    verdict: Verdict | None = None
    infra_reason: str | None = None  # the test's own (it errored); a step's infrastructure failure is the step's

    @classmethod
    def of(cls, kind: Kind, raw: RawResult, verdict: Verdict) -> Result:
        infra = raw.infra_reason if raw.exit_code is None else None
        return cls(kind, True, raw.exit_code, raw.metric, verdict, infra)

    def as_json(self) -> dict[str, Any]:
        if not self.reported:
            return {"kind": self.kind.value}
        out: dict[str, Any] = dict(
            kind=self.kind.value,
            exit_code=self.exit_code,
            metric=self.metric,
            verdict=self.verdict.value if self.verdict else None,
        )
        if self.infra_reason:
            out["infra_reason"] = self.infra_reason
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> Result:
        verdict = data.get("verdict")
        return cls(
            Kind(data["kind"]),
            "exit_code" in data,
            data.get("exit_code"),
            data.get("metric"),
            Verdict(verdict) if verdict else None,
            data.get("infra_reason"),
        )


def results_of(step: StepRow) -> dict[str, Result]:
    return {t: Result.from_json(r) for t, r in (step.results or {}).items()}


def dump_results(results: Mapping[str, Result]) -> dict[str, Any]:
    return {t: r.as_json() for t, r in results.items()}


def runs_of(step: StepRow) -> list[Run]:
    """What the engine learns from a step: one run per test it carried (done and lost steps; cancelled ones said
    nothing). A lost step, or one that failed on infrastructure, is an infra run for each of its tests."""
    if step.state not in ("done", "lost"):
        return []
    runs = []
    for test, r in results_of(step).items():
        infra = step.infra_reason or r.infra_reason or (None if r.reported else "the step reported nothing for it")
        runs.append(Run(step.sha, r.kind, RawResult(r.exit_code, r.metric, infra), step.round, test))
    return runs


def step_verdict(verdicts: Iterable[Verdict]) -> Verdict:
    """One word for a step, for displays: infra, else bad if any test failed, else good if any passed, else skip."""
    said = set(verdicts)
    return next((v for v in (Verdict.INFRA, Verdict.BAD, Verdict.GOOD) if v in said), Verdict.SKIP)


# -- a test of the bisection ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Entry:
    """One test of a bisection: its own GOOD (None: the bisection's), CI's readings of it (scheduled runs inside
    its range, oldest first: what CI already paid for), the engine's state, the latest view (the most likely culprit
    and its probability, the flake rate, a metric's boundary) and, once it ended, its status and outcome."""

    test: str
    good: str | None = None
    ci: tuple[CiReading, ...] = ()
    state: State = field(default_factory=State)
    guess: str | None = None
    guess_probability: float | None = None
    flake_rate: float | None = None
    boundary: float | None = None
    status: Status | None = None
    outcome: BisectionOutcome | None = None

    @property
    def word(self) -> str:
        """How it stands: its phase while it runs, its status once it ended."""
        return self.status.value if self.status else self.state.phase.value

    @property
    def told(self) -> BisectionOutcome:
        return self.outcome or BisectionOutcome()

    @property
    def culprit(self) -> str | None:
        """Its culprit, once its own search found one (the commit to revert)."""
        return culprit_of(self.status.value if self.status else None, self.told)

    @property
    def best_guess(self) -> str | None:
        """The commit an answer short of found points at (never reverted); while it runs, the engine's guess."""
        if self.status is None:
            return self.guess
        return best_guess_of(self.status.value, self.told)

    @property
    def probability(self) -> float:
        """Its culprit's (or best guess's) posterior once it ended; while it runs, the engine's guess's."""
        return (self.told.confidence if self.status else self.guess_probability) or 0.0

    def decided(self, decision: Decision) -> Entry:
        """This test after the engine's decision: its new state and view and, when it ended, its outcome."""
        out = decision.outcome
        return replace(
            self,
            state=decision.state,
            guess=decision.guess.sha if decision.guess else None,
            guess_probability=decision.guess.probability if decision.guess else None,
            flake_rate=decision.flake_rate,
            boundary=decision.boundary,
            status=out.status if out else self.status,
            outcome=outcome_model(out) if out else self.outcome,
        )

    def as_json(self) -> dict[str, Any]:
        out: dict[str, Any] = dict(
            state=state_json(self.state),
            guess=self.guess,
            guess_probability=self.guess_probability,
            flake_rate=self.flake_rate,
            boundary=self.boundary,
        )
        if self.good is not None:
            out["good"] = self.good
        if self.ci:
            out["ci"] = [asdict(c) for c in self.ci]
        if self.status is not None:
            out["status"] = self.status.value
        if self.outcome is not None:
            out["outcome"] = self.outcome.as_json()
        return out

    @classmethod
    def from_json(cls, test: str, data: Mapping[str, Any]) -> Entry:
        status = data.get("status")
        return cls(
            test,
            data.get("good"),
            tuple(CiReading(**c) for c in data.get("ci") or ()),
            state_from_json(data.get("state")),
            data.get("guess"),
            data.get("guess_probability"),
            data.get("flake_rate"),
            data.get("boundary"),
            Status(status) if status else None,
            parse_outcome(data["outcome"]) if data.get("outcome") else None,
        )


def ci_runs(tests: Iterable[Entry]) -> list[Run]:
    """What the engine learns from CI's readings of each test: a run each, of kind CI (never dispatched, never a
    confirmation), before any of the bisection's own."""
    return [Run(c.sha, Kind.CI, RawResult(0 if c.passed else 1, c.metric), 0, e.test) for e in tests for c in e.ci]


def entries(tests: Mapping[str, Any] | None) -> list[Entry]:
    """A bisection's tests (bisections.tests), in order; [] before a JUnit report named them."""
    return [Entry.from_json(t, data or {}) for t, data in (tests or {}).items()]


def dump(tests: Iterable[Entry]) -> dict[str, Any]:
    return {e.test: e.as_json() for e in tests}


def entry(tests: Mapping[str, Any] | None, test: str) -> Entry:
    """One test's entry (an empty one when the bisection does not have it)."""
    return next((e for e in entries(tests) if e.test == test), Entry(test))


def outcome_model(out: Outcome) -> BisectionOutcome:
    """The engine's outcome as stored."""
    return BisectionOutcome(
        message=out.message,
        culprit=out.culprit,
        first_parent_culprit=out.first_parent_culprit,
        best_guess=out.best_guess,
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
            **({"head_from": out.ab.head_from} if out.ab.head_from else {}),
        ),
        **({"effect": StoredEffect.of(out.effect)} if out.effect else {}),
    )


# -- what the bisection's own columns derive -------------------------------------------------------------------


def phase_of(states: Iterable[State]) -> Phase:
    """A bisection's phase: its least advanced test's (DONE once every test is)."""
    return min((s.phase for s in states), key=_PHASES.index, default=Phase.DONE)


def lead(tests: Sequence[Entry]) -> Entry | None:
    """The test a one-line display follows: the least advanced one (the first of them)."""
    if not tests:
        return None
    phase = phase_of(e.state for e in tests)
    return next(e for e in tests if e.state.phase is phase)


@dataclass(frozen=True)
class Summary:
    """The bisection's own columns, derived from its tests: its phase, the lead test's view, the revert of the
    culprit its tests are confirming, and once every test ended, the bisection's status and outcome."""

    phase: Phase
    guess: str | None
    guess_probability: float | None
    flake_rate: float | None
    boundary: float | None
    revert: str | None
    revert_error: str | None
    status: Status | None = None
    outcome: BisectionOutcome | None = None


def summary(tests: Sequence[Entry]) -> Summary:
    first = lead(tests) or Entry("")
    phase = phase_of(e.state for e in tests)
    reverted = next((e.state for e in tests if e.state.revert or e.state.revert_error), first.state)
    if phase is not Phase.DONE or not tests:
        return Summary(
            phase, first.guess, first.guess_probability, first.flake_rate, first.boundary, *_revert(reverted)
        )
    status, told = conclusion(tests)
    guess = told.culprit or told.best_guess
    return Summary(phase, guess, told.confidence, first.flake_rate, first.boundary, *_revert(reverted), status, told)


def _revert(state: State) -> tuple[str | None, str | None]:
    return state.revert, state.revert_error


# A bisection's status, from its tests': found when every bisected test found a culprit, else the first of these a
# test ended with (what most needs the user's eye first).
_WORST_FIRST = (
    Status.CANCELLED,
    Status.INCONCLUSIVE,
    Status.AMBIGUOUS,
    Status.UNTESTABLE,
    Status.NO_CULPRIT,
    Status.GOOD_FAILS,
    Status.NOT_REPRODUCIBLE,
)
_NOT_BISECTED = (Status.NOT_REPRODUCIBLE, Status.GOOD_FAILS, Status.NO_CULPRIT)  # nothing to revert, nothing wrong


def conclusion(tests: Sequence[Entry]) -> tuple[Status, BisectionOutcome]:
    """The bisection's status (see _WORST_FIRST) and outcome, from its ended tests: the culprit when every test is
    answered and they agree on one. A test's own outcome is the bisection's when it is its only test; with several,
    a line per test in the message. A bisection not found names no culprit (a test's own found one stays in its
    entry): the test that decided its status gives its best guess, if it has one, with that guess's probability."""
    statuses = {e.test: e.status or Status.INCONCLUSIVE for e in tests}
    outcomes = {e.test: e.told for e in tests}
    culprits = list(dict.fromkeys(c for e in tests if (c := e.culprit)))
    found = bool(culprits) and all(s is Status.FOUND or s in _NOT_BISECTED for s in statuses.values())
    status = Status.FOUND if found else next(s for s in (*_WORST_FIRST, Status.FOUND) if s in statuses.values())
    deciding = next(t for t, s in statuses.items() if s is status)
    first = outcomes[deciding]
    if len(tests) == 1:  # its own outcome, as its search told it
        return status, first
    one = found and len(culprits) == 1
    head = f"{len(culprits)} culprit{'s' if len(culprits) != 1 else ''} for {len(tests)} tests"
    lines = [f"{t}: {statuses[t].value}: {o.message}" for t, o in outcomes.items()]
    guess = None if found else first.best_guess
    return status, BisectionOutcome(
        message="; ".join([head, *lines]),
        culprit=culprits[0] if one else None,
        first_parent_culprit=first.first_parent_culprit if one else None,
        best_guess=guess,
        confidence=(first.confidence or 0.0)
        if guess
        else min((o.confidence or 0.0 for t, o in outcomes.items() if statuses[t] is Status.FOUND), default=0.0),
        ab=first.ab if one else None,
        reason=None if found else first.reason,
        facts={} if found else dict(first.facts),
    )
