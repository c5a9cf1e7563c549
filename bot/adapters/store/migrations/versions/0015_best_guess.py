"""an outcome names a culprit only once found: an answer short of it (inconclusive, ambiguous, a group not every test
of which was found) kept the commit it points at under `culprit`, where a script reading it would revert an innocent
commit; it is moved to `best_guess`, in the bisection's outcome and in each test's of a group (issue 33)

No column changes: the culprit lives in the outcome's JSON (bisections.outcome, bisections.tests[test].outcome). The
rewrite is done here in Python, the same on SQLite and PostgreSQL, and depends on nothing of the application's (the
code that writes outcomes may change; this must not). A downgrade puts each best guess back under `culprit`, as the
code before wrote it; `first_parent_culprit`, cleared with the culprit, is not restored (it equals the culprit outside
merges the search descended into).

Revision ID: 0015
Revises: 0014
"""

from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

FOUND = "found"

bisections = sa.table(
    "bisections",
    sa.column("id", sa.Integer),
    sa.column("status", sa.String),
    sa.column("outcome", sa.JSON),
    sa.column("tests", sa.JSON),
)


def to_best_guess(status: Any, outcome: Any) -> Any:
    """The outcome of an answer with `status` with a culprit only when found; `outcome` itself when nothing moves."""
    if status == FOUND or not isinstance(outcome, dict):
        return outcome
    if not (outcome.get("culprit") or outcome.get("first_parent_culprit")):
        return outcome
    culprit = outcome.get("culprit")
    moved = {**outcome, "culprit": None, "first_parent_culprit": None}
    if not moved.get("best_guess") and isinstance(culprit, str) and culprit:
        moved["best_guess"] = culprit
    return moved


def to_culprit(status: Any, outcome: Any) -> Any:
    """The outcome as written before this revision: a best guess under `culprit`."""
    if status == FOUND or not isinstance(outcome, dict) or "best_guess" not in outcome:
        return outcome
    moved = dict(outcome)
    guess = moved.pop("best_guess")
    if guess and not moved.get("culprit"):
        moved["culprit"] = guess
    return moved


def _rewrite(move) -> None:
    conn = op.get_bind()
    rows = conn.execute(
        sa.select(bisections.c.id, bisections.c.status, bisections.c.outcome, bisections.c.tests).where(
            bisections.c.status.isnot(None)
        )
    ).all()
    for row in rows:
        changes: dict[str, Any] = {}
        outcome = move(row.status, row.outcome)
        if outcome is not row.outcome:
            changes["outcome"] = outcome
        if isinstance(row.tests, dict):
            tests = {}
            for test, entry in row.tests.items():
                if isinstance(entry, dict) and "outcome" in entry:
                    told = move(entry.get("status"), entry["outcome"])
                    entry = entry if told is entry["outcome"] else {**entry, "outcome": told}
                tests[test] = entry
            if any(tests[t] is not row.tests[t] for t in tests):
                changes["tests"] = tests
        if changes:
            conn.execute(bisections.update().where(bisections.c.id == row.id).values(**changes))


def upgrade() -> None:
    _rewrite(to_best_guess)


def downgrade() -> None:
    _rewrite(to_culprit)
