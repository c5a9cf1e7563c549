"""What the orchestrator needs from a place that runs bisect steps."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol


@dataclass(frozen=True)
class StepSpec:
    step_id: int
    sha: str
    command: tuple[str, ...]
    timeout_s: float | None = None
    metric_regex: str | None = None
    env: dict[str, str] = field(default_factory=dict)


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


class Backend(Protocol):
    @property
    def free(self) -> int:
        """Runners able to take a step now."""

    def submit(self, spec: StepSpec) -> None:
        """Start a step; never blocks on the step itself."""

    def wait(self, timeout: float | None) -> list[StepResult]:
        """Block until at least one step finishes (or timeout); return every finished one."""

    def cancel(self, step_ids: list[int]) -> None:
        """Stop steps whose result is no longer wanted; they report nothing."""

    def close(self) -> None: ...
