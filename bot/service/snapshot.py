"""What a progress display shows of a running bisection (the CLI's live display, the status comment)."""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from bot.domain.bisect.ledger import Entry
from bot.domain.bisect.model import Phase
from bot.domain.bisect.verdict import Verdict


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
    tests: dict[str, Entry] = field(default_factory=dict)  # its tests, as they stand
    test_runs: dict[str, int] = field(default_factory=dict)  # each test's results (its own steps and those it rode)
