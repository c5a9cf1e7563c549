"""every bisection stored as its tests: a bisection of one test, which kept its engine state in its own columns and
each step's result in the step's columns, gets the entry of one test in `bisections.tests` and each step's result
under that test in `steps.results`, as a bisection of several always had (issue 31); the state machine's columns
(merges, confirming, confirm_round, confirmations) go; `tests` and `results` are written for every bisection and
step from now on (the columns stay nullable: SQLite cannot change that without copying the table).

The one test is named as the bisection was asked for: its origin's test (a red run's, a `/revert-bisect` comment's),
else the command it runs. A downgrade puts back in the columns every bisection that reads the whole step (neither a
JUnit report nor several of a policy's tests: the settings' `junit` and `members` unset), exactly those this upgrade
converted. The rewrite is done here in Python, the same on SQLite and PostgreSQL, and depends on nothing of the
application's (bot.domain.bisect.ledger reads what it writes; it may change, this must not).

Revision ID: 0016
Revises: 0015
"""

import shlex
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

STATE = ("merges", "confirming", "confirm_round", "confirmations")
VIEW = ("guess", "guess_probability", "flake_rate", "boundary")

bisections = sa.table(
    "bisections",
    sa.column("id", sa.Integer),
    sa.column("command", sa.JSON),
    sa.column("settings", sa.JSON),
    sa.column("origin", sa.JSON),
    sa.column("phase", sa.String),
    sa.column("merges", sa.JSON),
    sa.column("confirming", sa.String),
    sa.column("confirm_round", sa.Integer),
    sa.column("confirmations", sa.Integer),
    sa.column("revert", sa.String),
    sa.column("revert_error", sa.Text),
    sa.column("guess", sa.String),
    sa.column("guess_probability", sa.Float),
    sa.column("flake_rate", sa.Float),
    sa.column("boundary", sa.Float),
    sa.column("status", sa.String),
    sa.column("outcome", sa.JSON),
    sa.column("tests", sa.JSON),
)
steps = sa.table(
    "steps",
    sa.column("id", sa.Integer),
    sa.column("bisection_id", sa.Integer),
    sa.column("kind", sa.String),
    sa.column("state", sa.String),
    sa.column("exit_code", sa.Integer),
    sa.column("metric", sa.Float),
    sa.column("infra_reason", sa.Text),
    sa.column("verdict", sa.String),
    sa.column("results", sa.JSON),
)


def test_name(row: Any) -> str:
    """The one test's id: as asked for (the origin's test), else the command."""
    origin = row.origin if isinstance(row.origin, dict) else {}
    if isinstance(origin.get("test"), str) and origin["test"]:
        return origin["test"]
    return shlex.join(str(a) for a in (row.command or [])) or "the command"


def reads_whole_step(settings: Any) -> bool:
    """A bisection whose one test is the whole step (its exit code, its metric): neither a JUnit report's tests nor
    several of a policy's."""
    settings = settings if isinstance(settings, dict) else {}
    return not settings.get("junit") and not settings.get("members")


def entry_of(row: Any) -> dict[str, Any]:
    """The bisection's columns as the entry of its one test."""
    state = dict(
        phase=row.phase,
        merges=list(row.merges or []),
        confirming=row.confirming,
        confirm_round=row.confirm_round or 0,
        confirmations=row.confirmations or 0,
        revert=row.revert,
        revert_error=row.revert_error,
    )
    out: dict[str, Any] = dict(state=state, **{k: getattr(row, k) for k in VIEW})
    if row.status:
        out["status"] = row.status
    if row.outcome:
        out["outcome"] = row.outcome
    return out


def result_of(step: Any) -> dict[str, Any]:
    """A step's own columns as its one test's result (a result only once it reported: done)."""
    if step.state != "done":
        return {"kind": step.kind}
    out: dict[str, Any] = dict(kind=step.kind, exit_code=step.exit_code, metric=step.metric, verdict=step.verdict)
    if step.exit_code is None and step.infra_reason:
        out["infra_reason"] = step.infra_reason
    return out


def upgrade() -> None:
    conn = op.get_bind()
    # a None written through the JSON type is JSON's null, not SQL's: both are read back as None, so tell them here
    for row in conn.execute(sa.select(bisections)).all():
        if row.tests is not None:
            continue
        name = test_name(row)
        conn.execute(bisections.update().where(bisections.c.id == row.id).values(tests={name: entry_of(row)}))
        for step in conn.execute(sa.select(steps).where(steps.c.bisection_id == row.id)).all():
            conn.execute(steps.update().where(steps.c.id == step.id).values(results={name: result_of(step)}))
    for step in conn.execute(sa.select(steps.c.id, steps.c.results)).all():
        if step.results is None:  # a step of a JUnit report's that said nothing of its tests
            conn.execute(steps.update().where(steps.c.id == step.id).values(results={}))
    for column in STATE:
        drop_column("bisections", column)


def drop_column(table: str, column: str) -> None:
    """Dropped in place: SQLite's batch mode would copy the table and drop the old one, whose ON DELETE CASCADE
    empties `steps` (foreign keys are on, and cannot be turned off inside the migration's transaction)."""
    if op.get_bind().dialect.name == "sqlite":
        op.execute(f"ALTER TABLE {table} DROP COLUMN {column}")  # SQLite >= 3.35
    else:
        op.drop_column(table, column)


def downgrade() -> None:
    # added in place, NOT NULL with a default (the same reason as drop_column: no copy of the table)
    op.add_column("bisections", sa.Column("merges", sa.JSON(), nullable=False, server_default="[]"))
    op.add_column("bisections", sa.Column("confirming", sa.String(length=64), nullable=True))
    op.add_column("bisections", sa.Column("confirm_round", sa.Integer(), nullable=False, server_default="0"))
    op.add_column("bisections", sa.Column("confirmations", sa.Integer(), nullable=False, server_default="0"))
    conn = op.get_bind()
    for row in conn.execute(sa.select(bisections)).all():
        tests = row.tests if isinstance(row.tests, dict) else {}
        if not (reads_whole_step(row.settings) and len(tests) == 1):
            continue
        (entry,) = tests.values()
        state = entry.get("state") or {}
        conn.execute(
            bisections.update()
            .where(bisections.c.id == row.id)
            .values(
                tests=sa.null(),
                merges=list(state.get("merges") or []),
                confirming=state.get("confirming"),
                confirm_round=state.get("confirm_round") or 0,
                confirmations=state.get("confirmations") or 0,
            )
        )
        conn.execute(steps.update().where(steps.c.bisection_id == row.id).values(results=sa.null()))
