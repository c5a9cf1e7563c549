"""CI's readings kept with their tests: a scheduled run's reading of a test inside the range was stored as a step
already done (kind `ci`, backend `ci`, the run's URL as its runner, the failing check's line as its log), which no
backend ever ran; each becomes a reading under its test's entry (`bisections.tests[test].ci`: sha, passed, metric,
url, line, oldest first as stored) and the step goes (issue 31).

A downgrade writes each reading back as such a step. The rewrite is done here in Python, the same on SQLite and
PostgreSQL, and depends on nothing of the application's (bot.domain.bisect.ledger reads what it writes).

Revision ID: 0018
Revises: 0017
"""

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0018"
down_revision = "0017"
branch_labels = None
depends_on = None

bisections = sa.table("bisections", sa.column("id", sa.Integer), sa.column("tests", sa.JSON))
steps = sa.table(
    "steps",
    sa.column("id", sa.Integer),
    sa.column("bisection_id", sa.Integer),
    sa.column("sha", sa.String),
    sa.column("kind", sa.String),
    sa.column("round", sa.Integer),
    sa.column("state", sa.String),
    sa.column("exit_code", sa.Integer),
    sa.column("metric", sa.Float),
    sa.column("verdict", sa.String),
    sa.column("runner", sa.String),
    sa.column("backend", sa.String),
    sa.column("duration_s", sa.Float),
    sa.column("log_tail", sa.Text),
    sa.column("started_at", sa.DateTime(timezone=True)),
    sa.column("finished_at", sa.DateTime(timezone=True)),
    sa.column("results", sa.JSON),
)


def reading_of(step: Any) -> dict[str, Any]:
    return dict(
        sha=step.sha,
        passed=step.exit_code == 0,
        metric=step.metric,
        url=step.runner or "",
        line=step.log_tail or "",
    )


def upgrade() -> None:
    conn = op.get_bind()
    ci = conn.execute(sa.select(steps).where(steps.c.kind == "ci").order_by(steps.c.id)).all()
    by_bisection: dict[int, list[Any]] = {}
    for step in ci:
        by_bisection.setdefault(step.bisection_id, []).append(step)
    for bisection_id, readings in by_bisection.items():
        tests = conn.execute(sa.select(bisections.c.tests).where(bisections.c.id == bisection_id)).scalar()
        tests = {t: dict(e) for t, e in (tests or {}).items()} if isinstance(tests, dict) else {}
        for step in readings:
            for test in step.results or {}:
                if test in tests:
                    tests[test]["ci"] = [*tests[test].get("ci", []), reading_of(step)]
        conn.execute(bisections.update().where(bisections.c.id == bisection_id).values(tests=tests))
    conn.execute(steps.delete().where(steps.c.kind == "ci"))


def downgrade() -> None:
    conn = op.get_bind()
    now = datetime.now(UTC)
    for row in conn.execute(sa.select(bisections).order_by(bisections.c.id)).all():
        tests = row.tests if isinstance(row.tests, dict) else {}
        if not any(isinstance(e, dict) and e.get("ci") for e in tests.values()):
            continue
        for test, entry in tests.items():
            for c in entry.get("ci") or []:
                code, verdict = (0, "good") if c.get("passed") else (1, "bad")
                conn.execute(
                    steps.insert().values(
                        bisection_id=row.id,
                        sha=c["sha"],
                        kind="ci",
                        round=0,
                        state="done",
                        exit_code=code,
                        metric=c.get("metric"),
                        verdict=verdict,
                        runner=c.get("url") or "",
                        backend="ci",
                        duration_s=0.0,
                        log_tail=c.get("line") or "",
                        started_at=now,
                        finished_at=now,
                        results={test: dict(kind="ci", exit_code=code, metric=c.get("metric"), verdict=verdict)},
                    )
                )
        kept = {t: {k: v for k, v in e.items() if k != "ci"} for t, e in tests.items()}
        conn.execute(bisections.update().where(bisections.c.id == row.id).values(tests=kept))
