"""Recording webhook deliveries and queueing their jobs, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, func, select, update
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from bot.store.models import DeliveryRow, JobRow, utcnow


@dataclass(frozen=True)
class Incoming:
    delivery_id: str
    event: str
    action: str | None
    repository: str | None
    handler: str | None
    payload: dict


@dataclass(frozen=True)
class Recorded:
    duplicate: bool
    job_id: int | None


class Deliveries:
    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def record(self, incoming: Incoming) -> Recorded:
        """Store the delivery and, when a handler listens, its job; a known delivery id changes nothing."""
        try:
            with self._session.begin() as s:
                row = DeliveryRow(**incoming.__dict__)
                s.add(row)
                s.flush()
                job = None
                if incoming.handler:
                    job = JobRow(delivery_id=row.id, handler=incoming.handler, state="queued", attempts=0)
                    s.add(job)
                    s.flush()
                return Recorded(False, job.id if job else None)
        except IntegrityError:
            return Recorded(True, None)

    def count(self) -> int:
        with self._session() as s:
            return s.scalar(select(func.count()).select_from(DeliveryRow))

    def jobs(self) -> list[JobRow]:
        with self._session() as s:
            return list(s.scalars(select(JobRow).order_by(JobRow.id)))


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    handler: str
    delivery_id: str
    event: str
    payload: dict
    attempts: int


class Jobs:
    """The job queue. A job is claimed by a conditional UPDATE, so of several workers (or
    replicas on one database) exactly one wins it, on SQLite and PostgreSQL alike."""

    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def claim(self) -> ClaimedJob | None:
        with self._session.begin() as s:
            candidates = s.scalars(select(JobRow.id).where(JobRow.state == "queued").order_by(JobRow.id).limit(5)).all()
            for job_id in candidates:
                won = s.execute(update(JobRow).where(JobRow.id == job_id, JobRow.state == "queued").values(state="running", attempts=JobRow.attempts + 1))
                if won.rowcount == 1:
                    job = s.get(JobRow, job_id)
                    delivery = s.get(DeliveryRow, job.delivery_id)
                    return ClaimedJob(job.id, job.handler, delivery.delivery_id, delivery.event, delivery.payload, job.attempts)
        return None

    def finish(self, job_id: int, error: str | None = None, retry: bool = False) -> None:
        """done, failed, or (retry) back in the queue with the error kept for the record."""
        state = "queued" if retry else "failed" if error else "done"
        with self._session.begin() as s:
            s.execute(update(JobRow).where(JobRow.id == job_id).values(state=state, error=error, finished_at=None if retry else utcnow()))

    def requeue_running(self) -> int:
        """Jobs a killed process left running go back to the queue (handlers are idempotent)."""
        with self._session.begin() as s:
            return s.execute(update(JobRow).where(JobRow.state == "running").values(state="queued")).rowcount
