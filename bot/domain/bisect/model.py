"""The culprit finder's vocabulary: phases, kinds of run, settings, inputs and decisions (plain data)."""

from __future__ import annotations

import enum
import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any

from bot.domain.bisect.candidates import Graph, Scope, first_parent_scope, merge_scope
from bot.domain.bisect.posterior import Posterior
from bot.domain.bisect.readings import Effect
from bot.domain.bisect.verdict import MetricRule, RawResult, Verdict
from bot.domain.reasons import Reason


class Phase(str, enum.Enum):
    CALIBRATING = "calibrating"
    SEARCHING = "searching"
    CONFIRMING = "confirming"
    DONE = "done"


class Kind(str, enum.Enum):
    CALIBRATE = "calibrate"
    SEARCH = "search"
    CONFIRM = "confirm"
    AB_HEAD = "ab_head"  # the branch head, for the revert's A/B
    AB_REVERT = "ab_revert"  # the branch head plus the revert
    CI = "ci"  # a reading CI already paid for (a scheduled run at that commit): never dispatched, never confirmation


CONFIRMATION_KINDS = (Kind.CONFIRM, Kind.AB_HEAD, Kind.AB_REVERT)
BISECT_KINDS = (Kind.CALIBRATE, Kind.SEARCH, Kind.CONFIRM)  # runs on commits of the range, on the bisect runner
RANGE_KINDS = BISECT_KINDS + (Kind.CI,)  # every result about a commit of the range


class Status(str, enum.Enum):
    FOUND = "found"
    AMBIGUOUS = "ambiguous"
    NO_CULPRIT = "no_culprit"
    NOT_REPRODUCIBLE = "not_reproducible"
    GOOD_FAILS = "good_fails"
    UNTESTABLE = "untestable"
    INCONCLUSIVE = "inconclusive"
    CANCELLED = "cancelled"  # stopped on request, before an answer


REPRODUCED_RATE = 0.7  # the least failure rate at BAD that calibration is sized to reproduce (Settings.reproduce_runs)


@dataclass(frozen=True)
class Settings:
    confidence: float = 0.99
    flake_rate: float | None = None  # None: estimate it ("auto")
    flake_floor: float = 0.02
    calibration_runs: int = 2  # per endpoint for a flaky test; a trusted deterministic one gets 1 (engine docstring)
    metric: MetricRule | None = None
    descend_merges: bool = False
    max_infra_per_commit: int = 3
    max_confirmations: int = 3
    max_runs: int | None = None  # None: a generous bound derived from the range size
    trusted_reruns: int = 1  # re-runs of a trusted (deterministic-looking) test's culprit under auto
    samples: int = 3  # a sampled metric (bot.domain.bisect.sampled): readings at culprit and parent, per A/B batch
    max_ab_samples: int = 20  # ... and at most this many per side of the A/B (the endpoints: sampled.ENDPOINT_MOST)
    # GOOD passes and BAD fails as CI read them (or as the user says): no endpoint run before the search; one runs
    # only when the search contradicts it (bot.domain.bisect.calibration.calibration_needs)
    trust_endpoints: bool = False
    # GOOD alone taken as read (the CLI's default: the user's word, as `git bisect run` takes it; the nightly path's
    # GOOD, read green by CI): BAD still runs first, GOOD only when the search points at its child
    good_as_read: bool = False

    @property
    def reads_endpoints(self) -> bool:
        """Whether any endpoint is taken as read (bot.domain.bisect.calibration.taken_as_read)."""
        return self.trust_endpoints or self.good_as_read

    def run_budget(self, n: int) -> int:
        return self.max_runs or 12 * max(1, math.ceil(math.log2(n + 1))) + 8 * self.calibration_runs + 20

    @property
    def reproduce_runs(self) -> int:
        """Passes in a row at BAD before it is called not reproducible: enough that a culprit failing 70% of the
        time (an intermittent regression, bot.domain.bisect.intermittent) shows a failure with probability >= C."""
        return max(self.calibration_runs, math.ceil(math.log(1 - self.confidence) / math.log(1 - REPRODUCED_RATE)))

    def confirm_runs(self, flake: float) -> int:
        """x = ceil(log(1-C) / log f): runs each for culprit and parent so x agreeing runs beat a flake."""
        f = max(flake, self.flake_floor)
        return max(1, math.ceil(math.log(1 - self.confidence) / math.log(f)))


@dataclass(frozen=True)
class Problem:
    graph: Graph
    good: str
    bad: str
    settings: Settings = field(default_factory=Settings)
    head: str | None = None  # when set, the culprit's revert on top of it is verified (A/B)

    @cached_property
    def _scopes(self) -> dict[tuple[str, ...], Scope]:
        return {}

    def scope(self, merges: tuple[str, ...]) -> Scope:
        """The linear search space: first-parent GOOD..BAD, or the commits the innermost merge
        brought in. Computed once per problem (O(range)); decisions then cost O(tested commits)."""
        if merges not in self._scopes:
            scope = (
                merge_scope(self.graph, merges[-1]) if merges else first_parent_scope(self.graph, self.good, self.bad)
            )
            scope.position(scope.candidates[-1])  # build its sha -> position index now, not in a decision
            self._scopes[merges] = scope
        return self._scopes[merges]


@dataclass(frozen=True)
class Run:
    """One finished attempt on one commit (infra attempts included: they are counted, not believed)."""

    sha: str
    kind: Kind
    raw: RawResult
    round: int = 0
    test: str = ""  # which test of a group (bot.domain.bisect.group) this result is; "" for a bisection of one


@dataclass(frozen=True)
class Probe:
    sha: str
    kind: Kind
    round: int = 0
    test: str = ""


@dataclass(frozen=True)
class State:
    """The durable part of the state machine, persisted before acting on a decision."""

    phase: Phase = Phase.CALIBRATING
    merges: tuple[str, ...] = ()  # merge culprits descended into, outermost first
    confirming: str | None = None
    confirm_round: int = 0
    confirmations: int = 0
    revert: str | None = None  # HEAD + revert of `confirming`, once the caller made it
    revert_error: str | None = None  # why there is no revert to verify (conflict, already reverted)


@dataclass(frozen=True)
class ABResult:
    """The revert's proof: the branch head fails, the head plus the revert passes."""

    head: str
    revert: str
    head_verdicts: tuple[Verdict, ...]
    revert_verdicts: tuple[Verdict, ...]
    head_from: str = ""  # what stood for HEAD's side instead of its own runs (bot.domain.bisect.confirmation)

    @property
    def passed(self) -> bool:
        return (
            bool(self.head_verdicts and self.revert_verdicts)
            and all(v is Verdict.BAD for v in self.head_verdicts)
            and all(v is Verdict.GOOD for v in self.revert_verdicts)
        )


@dataclass(frozen=True)
class Outcome:
    """How a bisection ended. `culprit` (and `first_parent_culprit`) only when FOUND: a script reads it to revert, so
    an answer short of that keeps its commit under `best_guess` instead (an ambiguous block's last commit, an
    inconclusive search's most likely one); `confidence` is the culprit's posterior, else the best guess's."""

    status: Status
    message: str
    culprit: str | None = None
    first_parent_culprit: str | None = None
    confidence: float = 0.0
    candidates: tuple[str, ...] = ()
    ab: ABResult | None = None
    revert_error: str | None = None
    reason: Reason | None = None  # why there is no answer to act on; each surface words its remedy (bot.domain.reasons)
    facts: Mapping[str, Any] = field(default_factory=dict)  # the reason's numbers and shas
    best_guess: str | None = None  # the commit an answer short of FOUND points at, never to be reverted
    effect: Effect | None = None  # a sampled metric's: what the culprit did to it (bot.domain.bisect.sampled)

    def __post_init__(self) -> None:
        found = self.status is Status.FOUND
        if not found and (self.culprit is not None or self.first_parent_culprit is not None):
            raise ValueError(f"a {self.status.value} outcome names no culprit (its commit is its best_guess)")
        if found and self.best_guess is not None:
            raise ValueError("a found outcome names its culprit, not a best guess")


@dataclass(frozen=True)
class Guess:
    sha: str | None  # None: "no culprit"
    probability: float


@dataclass(frozen=True)
class Decision:
    state: State
    probes: tuple[Probe, ...] = ()
    obsolete: tuple[Probe, ...] = ()  # in-flight runs whose result can no longer change anything
    outcome: Outcome | None = None
    guess: Guess | None = None
    flake_rate: float = 0.0
    boundary: float | None = None
    wants_revert: str | None = None  # make the revert of this culprit on problem.head, then decide again
    posterior: Posterior | None = None  # while searching: over problem.scope(state.merges), for a group's riders


# -- evidence ---------------------------------------------------------------------------------
