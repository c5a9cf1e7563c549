"""Rows as the code before a migration wrote them, inserted with SQLAlchemy Core (never through today's Store, whose
models follow the newest revision): what a migration test upgrades."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import sqlalchemy as sa

# `bisections` as revisions 0001-0015 had it (the columns these tests write)
bisections = sa.table(
    "bisections",
    sa.column("id", sa.Integer),
    sa.column("repo", sa.Text),
    sa.column("good_rev", sa.String),
    sa.column("bad_rev", sa.String),
    sa.column("good", sa.String),
    sa.column("bad", sa.String),
    sa.column("command", sa.JSON),
    sa.column("settings", sa.JSON),
    sa.column("phase", sa.String),
    sa.column("merges", sa.JSON),
    sa.column("confirm_round", sa.Integer),
    sa.column("confirmations", sa.Integer),
    sa.column("status", sa.String),
    sa.column("outcome", sa.JSON),
    sa.column("tests", sa.JSON),
    sa.column("created_at", sa.DateTime(timezone=True)),
    sa.column("updated_at", sa.DateTime(timezone=True)),
)


def old_bisection(engine: sa.Engine, **values: Any) -> int:
    """A bisection row of 0015's shape (or earlier), `values` over a finished-looking default; its id."""
    now = datetime.now(UTC)
    row = dict(
        repo="/r",
        good_rev="v1",
        bad_rev="main",
        good="a" * 40,
        bad="b" * 40,
        command=["./t.sh"],
        settings={},
        phase="done",
        merges=[],
        confirm_round=0,
        confirmations=0,
        created_at=now,
        updated_at=now,
    )
    row.update(values)
    with engine.begin() as conn:
        return conn.execute(sa.insert(bisections).values(**row).returning(bisections.c.id)).scalar_one()
