"""What the orchestrator needs from a place that runs bisect steps."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from runners.envs import EnvSpec


def new_ref() -> str:
    """A unique reference for one step's run (the Actions backend puts it in the run-name)."""
    return f"rb-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class RevertOf:
    """How a runner without the bot's revert commit makes the same tree: `onto` with `culprit` reverted."""

    culprit: str
    onto: str


@dataclass(frozen=True)
class StepSpec:
    step_id: int
    sha: str
    command: tuple[str, ...]
    timeout_s: float | None = None
    metric_regex: str | None = None
    env: dict[str, str] = field(default_factory=dict)
    revert: RevertOf | None = None  # set for HEAD + revert (A/B): `sha` exists only where the bot made it
    env_spec: EnvSpec | None = None  # an environment keyed by the commit's pins, else the runner's own
    ref: str | None = None  # recorded before dispatch: how the backend finds this step's run again after a restart


@dataclass(frozen=True)
class StepResult:
    step_id: int
    sha: str
    exit_code: int | None
    metric: float | None
    infra_reason: str | None
    runner: str
    duration_s: float
    log_tail: str
    started_at: datetime
    finished_at: datetime
    env_key: str | None = None
    env_reused: bool = False


class Backend(Protocol):
    @property
    def free(self) -> int:
        """Runners able to take a step now."""

    def submit(self, spec: StepSpec) -> None:
        """Start a step; never blocks on the step itself."""

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        """Take over a step submitted (at `since`) by a process that is gone; False if its run cannot survive that."""

    def wait(self, timeout: float | None) -> list[StepResult]:
        """Block until at least one step finishes (or timeout); return every finished one."""

    def waiting(self) -> dict[int, str]:
        """Steps submitted but not started, with why (no free runner with the labels, ...)."""

    def cancel(self, step_ids: list[int]) -> None:
        """Stop steps whose result is no longer wanted; they report nothing."""

    def close(self) -> None: ...
