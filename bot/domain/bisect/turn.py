"""One call of the engine's `decide` as one value: what each phase's function reads (bot.domain.bisect.engine,
calibration, confirmation, sampled), built once per call and handed on, changed, from phase to phase."""

from __future__ import annotations

from collections.abc import Collection
from dataclasses import dataclass, replace
from typing import Any

from bot.domain.bisect.candidates import Scope
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.model import (
    CONFIRMATION_KINDS,
    Decision,
    Guess,
    Kind,
    Outcome,
    Phase,
    Probe,
    Problem,
    Settings,
    State,
)


@dataclass(frozen=True)
class Turn:
    """The problem, the state as this call has it so far (a phase hands on a changed one), what the runs so far say,
    the runs in flight, the runners free for new ones and the round new probes belong to."""

    problem: Problem
    state: State
    evidence: Evidence
    in_flight: tuple[Probe, ...]
    free: int
    round: int

    @property
    def settings(self) -> Settings:
        return self.problem.settings

    def moved(self, **changes: Any) -> Turn:
        """This turn with its state changed (`replace(state, **changes)`)."""
        return replace(self, state=replace(self.state, **changes))

    def probe(self, sha: str, kind: Kind) -> Probe:
        """A run of `sha` in this round."""
        return Probe(sha, kind, self.round)

    def flying(self, sha: str, kinds: Collection[Kind]) -> int:
        """The runs of `sha` of these kinds in flight."""
        return sum(1 for p in self.in_flight if p.sha == sha and p.kind in kinds)

    @property
    def confirming(self) -> bool:
        """Whether a confirmation or A/B run is in flight."""
        return any(p.kind in CONFIRMATION_KINDS for p in self.in_flight)

    def untestable_in(self, scope: Scope) -> set[int]:
        """The positions of `scope` the bisect runner cannot test (exit 125, or infra too often)."""
        return {p for p in (scope.position(sha) for sha in self.evidence.untestable(self.settings)) if p}

    def decision(self, probes: tuple[Probe, ...] = (), obsolete: tuple[Probe, ...] = (), **more: Any) -> Decision:
        """Go on in the turn's state: dispatch `probes` (possibly none: wait), cancel `obsolete`."""
        return Decision(self.state, probes, obsolete, boundary=self.evidence.boundary, **more)

    def end(self, outcome: Outcome, flake: float = 0.0, guess: Guess | None = None) -> Decision:
        """The bisection ends with `outcome`, in any phase."""
        done = replace(self.state, phase=Phase.DONE)
        return Decision(done, outcome=outcome, guess=guess, flake_rate=flake, boundary=self.evidence.boundary)
