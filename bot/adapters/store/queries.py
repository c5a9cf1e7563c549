"""The dashboard's reads of the store (bot.ports.store.DashboardReads and ParkedJobs; the writers stay in
bot.adapters.store.store). Rows and counts come back as stored: turning them into pages is bot.web.views' work."""

from __future__ import annotations

from collections.abc import Callable

from sqlalchemy import Engine, case, func, select
from sqlalchemy.orm import selectinload, sessionmaker

from bot.adapters.store.models import BisectionRow, DeliveryRow, JobRow, StepRow
from bot.ports.store import FINISHED_STEP_STATES, PHASES, ParkedJob, Progress

SCAN_CHUNK = 500


class Bisections:
    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def get(self, bisection_id: int) -> BisectionRow | None:
        with self._session() as s:
            return s.scalar(
                select(BisectionRow).where(BisectionRow.id == bisection_id).options(selectinload(BisectionRow.steps))
            )

    def progress(self, bisection_id: int) -> Progress | None:
        """One aggregate query, not the row with its steps."""
        finished = func.sum(case((StepRow.state.in_(FINISHED_STEP_STATES), 1), else_=0))
        query = (
            select(BisectionRow.phase, BisectionRow.status, BisectionRow.updated_at, func.count(StepRow.id), finished)
            .outerjoin(StepRow, StepRow.bisection_id == BisectionRow.id)
            .where(BisectionRow.id == bisection_id)
            .group_by(BisectionRow.id)
        )
        with self._session() as s:
            row = s.execute(query).first()
        if row is None:
            return None
        phase, status, updated_at, steps, done = row
        return Progress(phase, status, updated_at, steps, int(done or 0))

    def newest(
        self, state: str | None, keep: Callable[[BisectionRow], bool], skip: int, wanted: int
    ) -> list[BisectionRow]:
        """Newest first, `skip` then up to `wanted` of the rows `keep` accepts; state filters in SQL, `keep` (what
        SQL cannot: the repository and test in the JSON origin) here, scanning in chunks."""
        query = select(BisectionRow).order_by(BisectionRow.id.desc())
        if state == "running":
            query = query.where(BisectionRow.status.is_(None))
        elif state in PHASES:
            query = query.where(BisectionRow.status.is_(None), BisectionRow.phase == state)
        elif state:
            query = query.where(BisectionRow.status == state)
        found: list[BisectionRow] = []
        offset = 0
        with self._session() as s:
            while len(found) < skip + wanted:
                rows = s.scalars(query.offset(offset).limit(SCAN_CHUNK)).all()
                if not rows:
                    break
                offset += len(rows)
                found += [r for r in rows if keep(r)]
        return found[skip : skip + wanted]

    def finished(self) -> list:
        """What the trust report reads of every finished bisection (no steps)."""
        columns = (
            BisectionRow.repo,
            BisectionRow.status,
            BisectionRow.outcome,
            BisectionRow.origin,
            BisectionRow.head,
            BisectionRow.good,
            BisectionRow.bad,
            BisectionRow.tests,
        )
        with self._session() as s:
            return list(
                s.execute(select(*columns).where(BisectionRow.status.is_not(None)).order_by(BisectionRow.id)).all()
            )


class Queue:
    """The dashboard's reads of the job queue."""

    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def parked(self, limit: int = 20) -> tuple[int, list[ParkedJob]]:
        """How many jobs are parked, and the longest-parked `limit` of them."""
        query = (
            select(JobRow.id, JobRow.handler, DeliveryRow.event, DeliveryRow.repository, JobRow.parked_at, JobRow.error)
            .join(DeliveryRow, DeliveryRow.id == JobRow.delivery_id)
            .where(JobRow.state == "parked")
            .order_by(JobRow.parked_at, JobRow.id)
        )
        with self._session() as s:
            total = s.scalar(select(func.count()).select_from(JobRow).where(JobRow.state == "parked")) or 0
            rows = s.execute(query.limit(limit)).all() if total else []
        return total, [ParkedJob(*row) for row in rows]
