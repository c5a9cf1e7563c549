"""A stored bisection's tests (bisections.tests) as bot.domain.bisect.ledger writes them, for tests that build rows
by hand: every bisection is its tests, one test or several."""

from __future__ import annotations

from typing import Any

from bot.domain.bisect.ledger import Entry, dump
from bot.domain.bisect.model import Phase, State, Status
from bot.domain.outcome import parse_outcome


def one_test(status: str | None, outcome: dict[str, Any] | None = None, test: str = "t", phase: str = "searching"):
    """The tests of a bisection of one test that ended with `status` and `outcome` (or still runs, in `phase`)."""
    state = State(Phase.DONE if status else Phase(phase))
    told = parse_outcome(outcome) if outcome else None
    return dump([Entry(test, state=state, status=Status(status) if status else None, outcome=told)])
