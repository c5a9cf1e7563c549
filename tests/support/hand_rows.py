"""Hand-made bisections brought where a test needs them, as the driver and the publisher write them: through the
store's typed calls (its one test's entry, bot.domain.bisect.ledger), or, for an outcome no typed call writes (one
stored by hand or by an older version, malformed perhaps), straight into its column."""

from __future__ import annotations

import json
import sqlite3
from dataclasses import replace
from typing import Any

from bot.adapters.store.store import Store
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import Phase, State, Status
from bot.domain.outcome import parse_outcome


def progress(
    store: Store,
    bid: int,
    phase: str = "done",
    status: str | None = None,
    outcome: dict[str, Any] | None = None,
    **view: Any,
) -> None:
    """The bisection's one test brought to `phase` (and, once it ended, `status` and `outcome`, parsed as a stored
    one), with the engine's view (`guess`, `guess_probability`, `flake_rate`, `boundary`)."""
    (test,) = entries(store.get(bid).tests)
    told = parse_outcome(outcome) if outcome is not None else None
    state = State(Phase(phase))
    store.save_tests(bid, [replace(test, state=state, status=Status(status) if status else None, outcome=told, **view)])


def stored_outcome(db: str, bid: int, outcome: dict[str, Any]) -> None:
    """`outcome` written into a SQLite store's row as it is, whatever it holds."""
    with sqlite3.connect(db.removeprefix("sqlite:///")) as conn:
        conn.execute("UPDATE bisections SET outcome = ? WHERE id = ?", (json.dumps(outcome), bid))
