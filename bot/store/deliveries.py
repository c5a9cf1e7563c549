"""Recording webhook deliveries and queueing their jobs, in one transaction."""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from bot.store.models import DeliveryRow, JobRow


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
