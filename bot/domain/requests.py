"""What a trigger asks the service for: one bisection, described by plain values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class StartRequest:
    """A validated request to bisect, handed to whatever runs bisections for this deployment."""

    repo: str
    thread: int
    comment_id: int
    requested_by: str
    test: str
    good: str | None
    bad: str | None
    followup: int | None
    dry_run: bool
