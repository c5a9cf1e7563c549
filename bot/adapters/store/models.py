"""Tables: one row per bisection, one row per run attempt (its step)."""

from __future__ import annotations

from datetime import UTC, datetime

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    String,
    Text,
    UniqueConstraint,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship


def utcnow() -> datetime:
    return datetime.now(UTC)


class Base(DeclarativeBase):
    pass


class BisectionRow(Base):
    __tablename__ = "bisections"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repo: Mapped[str] = mapped_column(Text)
    good_rev: Mapped[str] = mapped_column(String(255))
    bad_rev: Mapped[str] = mapped_column(String(255))
    good: Mapped[str] = mapped_column(String(64))
    bad: Mapped[str] = mapped_column(String(64))
    command: Mapped[list] = mapped_column(JSON)
    settings: Mapped[dict] = mapped_column(JSON)
    # Its phase: its least advanced test's (each test's engine state is in `tests`), written before each dispatch.
    phase: Mapped[str] = mapped_column(String(32), index=True)
    # Revert verification: the branch head it is proven on, the revert commit or why there is none.
    head: Mapped[str | None] = mapped_column(String(64), nullable=True)
    revert: Mapped[str | None] = mapped_column(String(64), nullable=True)
    revert_error: Mapped[str | None] = mapped_column(Text, nullable=True)
    # Who asked, where: {"repo", "thread", "comment_id", "requested_by"} for a /revert-bisect bisection.
    origin: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # "owner/repo#comment:123" or "owner/repo@test:good..bad": one bisection per request or range.
    origin_key: Mapped[str | None] = mapped_column(String(512), nullable=True, index=True)
    commits: Mapped[list | None] = mapped_column(
        JSON, nullable=True
    )  # [sha, author, subject] of GOOD..BAD, first parent, oldest first
    cancel_requested_by: Mapped[str | None] = mapped_column(String(255), nullable=True)
    # Latest view, for status displays: the least advanced test's (bot.domain.bisect.ledger.summary).
    guess: Mapped[str | None] = mapped_column(String(64), nullable=True)
    guess_probability: Mapped[float | None] = mapped_column(Float, nullable=True)
    flake_rate: Mapped[float | None] = mapped_column(Float, nullable=True)
    boundary: Mapped[float | None] = mapped_column(Float, nullable=True)
    # Outcome, once done.
    status: Mapped[str | None] = mapped_column(String(32), nullable=True, index=True)
    outcome: Mapped[dict | None] = mapped_column(JSON, nullable=True)
    # its tests, one or several (bot.domain.bisect.ledger.Entry): each one's GOOD, engine state, latest view and
    # outcome; {} until a JUnit report named them
    tests: Mapped[dict] = mapped_column(JSON, nullable=True, default=dict)  # null only in rows never migrated
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow, onupdate=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)

    steps: Mapped[list[StepRow]] = relationship(back_populates="bisection", order_by="StepRow.id")


class StepRow(Base):
    __tablename__ = "steps"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    bisection_id: Mapped[int] = mapped_column(ForeignKey("bisections.id", ondelete="CASCADE"), index=True)
    sha: Mapped[str] = mapped_column(String(64))
    kind: Mapped[str] = mapped_column(String(16))
    round: Mapped[int] = mapped_column(Integer)
    # running -> done | lost. A lost step's process vanished; it is kept, never believed.
    state: Mapped[str] = mapped_column(String(16), index=True)
    exit_code: Mapped[int | None] = mapped_column(Integer, nullable=True)
    metric: Mapped[float | None] = mapped_column(Float, nullable=True)
    infra_reason: Mapped[str | None] = mapped_column(Text, nullable=True)
    verdict: Mapped[str | None] = mapped_column(String(16), nullable=True)
    runner: Mapped[str | None] = mapped_column(String(255), nullable=True)
    backend: Mapped[str | None] = mapped_column(
        String(32), nullable=True
    )  # local, github_actions (metrics group by it)
    duration_s: Mapped[float | None] = mapped_column(Float, nullable=True)
    log_tail: Mapped[str | None] = mapped_column(Text, nullable=True)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    env_key: Mapped[str | None] = mapped_column(String(64), nullable=True)  # the environment, by dependency pins
    env_reused: Mapped[bool | None] = mapped_column(Boolean, nullable=True)
    runner_ref: Mapped[str | None] = mapped_column(String(128), nullable=True)  # how the backend finds its run again
    # each test it carries (bot.domain.bisect.ledger.Result): its kind of run and, once done, its own result
    results: Mapped[dict] = mapped_column(JSON, nullable=True, default=dict)

    bisection: Mapped[BisectionRow] = relationship(back_populates="steps")


class DeliveryRow(Base):
    """One webhook delivery as received; GitHub's delivery id is unique, so a redelivery is a no-op."""

    __tablename__ = "deliveries"
    __table_args__ = (UniqueConstraint("delivery_id", name="uq_deliveries_delivery_id"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[str] = mapped_column(String(64))
    event: Mapped[str] = mapped_column(String(64))
    action: Mapped[str | None] = mapped_column(String(64), nullable=True)
    repository: Mapped[str | None] = mapped_column(String(255), nullable=True)
    handler: Mapped[str | None] = mapped_column(String(64), nullable=True)  # None: nothing listens to it
    payload: Mapped[dict] = mapped_column(JSON)
    received_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class JobRow(Base):
    """Work a delivery asks for, done by the worker loop, not by the request that received it."""

    __tablename__ = "jobs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    delivery_id: Mapped[int] = mapped_column(ForeignKey("deliveries.id", ondelete="CASCADE"), index=True)
    handler: Mapped[str] = mapped_column(String(64))
    # queued -> running -> done | failed; running -> parked (GitHub unreachable) -> queued when it answers again
    state: Mapped[str] = mapped_column(String(16), index=True, default="queued")
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    waits: Mapped[int] = mapped_column(Integer, default=0, server_default="0")  # claims that used up no attempt
    not_before: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)  # a backoff's end
    parked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    error: Mapped[str | None] = mapped_column(Text, nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)
    owner: Mapped[str | None] = mapped_column(String(128), nullable=True)  # the worker holding it while running
    lease_until: Mapped[datetime | None] = mapped_column(DateTime(timezone=True), nullable=True)


class HoldRow(Base):
    """Something the kill switch held back (a red run not bisected, a bisection not started, a revert not opened),
    kept so the dashboard lists it; `key` is unique, so a retried job records it once."""

    __tablename__ = "holds"
    __table_args__ = (UniqueConstraint("key", name="uq_holds_key"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(512))
    repository: Mapped[str] = mapped_column(String(255), index=True)
    guard: Mapped[str] = mapped_column(String(32))  # bot.domain.guards.GUARDS key
    what: Mapped[str] = mapped_column(Text)  # the sentence posted on the kill-switch issue
    link: Mapped[str | None] = mapped_column(Text, nullable=True)  # the red run, the thread, or the culprit PR
    issue: Mapped[int | None] = mapped_column(Integer, nullable=True)  # the kill-switch issue
    culprit: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class FlakeRow(Base):
    """A watched test that failed and then passed on the same commit (a re-run attempt, or the suite runner's own
    retry): not bisected, counted per test in the trust report; one row per (repository, test, run)."""

    __tablename__ = "flakes"
    __table_args__ = (UniqueConstraint("repository", "test", "run_id", name="uq_flakes_run_test"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repository: Mapped[str] = mapped_column(String(255), index=True)
    test: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[int] = mapped_column(BigInteger)  # GitHub's run ids are int64, past 2**31 (migration 0019)
    sha: Mapped[str] = mapped_column(String(64))
    how: Mapped[str] = mapped_column(Text)  # "failed, then passed on re-run attempt 2", "passed on ... own retry"
    url: Mapped[str | None] = mapped_column(Text, nullable=True)  # the run's page
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)


class SeriesPointRow(Base):
    """One metric of a watched benchmark as one run of its workflow read it (bot.ports.store.SeriesPoint): one row
    per (repository, test, metric, run), its newest attempt's reading; `value` NULL when the run reported none (a
    crash, a skipped batch size), kept so the series shows the gap. Ordered by `started_at` (the run's creation)."""

    __tablename__ = "series_points"
    __table_args__ = (
        UniqueConstraint("repository", "test", "metric", "run_id", name="uq_series_points_run"),
        Index("ix_series_points_series", "repository", "test", "metric", "started_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    repository: Mapped[str] = mapped_column(String(255))
    test: Mapped[str] = mapped_column(String(128))
    metric: Mapped[str] = mapped_column(String(128))
    run_id: Mapped[int] = mapped_column(BigInteger)  # GitHub's run ids are past 2**31
    run_attempt: Mapped[int] = mapped_column(Integer)
    sha: Mapped[str] = mapped_column(String(64))
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    value: Mapped[float | None] = mapped_column(Float, nullable=True)
    url: Mapped[str | None] = mapped_column(Text, nullable=True)  # the run's page
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), default=utcnow)
