"""Recording webhook deliveries and queueing their jobs, in one transaction; the job queue."""

from __future__ import annotations

import json
import os
import socket
import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy import Connection, Engine, func, insert, select, text, update
from sqlalchemy.dialects.sqlite import insert as sqlite_insert
from sqlalchemy.orm import sessionmaker

from bot.adapters.store.models import DeliveryRow, JobRow, utcnow
from bot.ports.store import ClaimedJob, Incoming, Recorded


class Deliveries:
    def __init__(self, engine: Engine):
        self._engine = engine
        self._session = sessionmaker(engine, expire_on_commit=False)

    def record(self, incoming: Incoming) -> Recorded:
        """Store the delivery and, when a handler listens, its job; a known delivery id changes nothing."""
        with self._engine.begin() as conn:
            return store_batch(conn, [incoming])[0]

    def jobs(self) -> list[JobRow]:
        with self._session() as s:
            return list(s.scalars(select(JobRow).order_by(JobRow.id)))


# PostgreSQL: a batch of deliveries and their jobs in one statement (one round trip, prepared once, whatever the
# batch's size; atomic on its own, so it needs no BEGIN or COMMIT round trip either). The batch is one JSON array
# with each payload's text spliced in as received, so nothing is serialised or escaped again on the way, and
# PostgreSQL parses it once. Rows go in in delivery-id order, so two replicas' batches sharing ids never deadlock; a
# known id is skipped (ON CONFLICT DO NOTHING) and only new deliveries' jobs are queued.
_PG_BATCH = text(
    """
WITH incoming AS (
    SELECT * FROM json_to_recordset(CAST(:batch AS json))
        AS r(delivery_id text, event text, action text, repository text, handler text, payload json)
), stored AS (
    INSERT INTO deliveries (delivery_id, event, action, repository, handler, payload, received_at)
    SELECT delivery_id, event, action, repository, handler, payload, now() FROM incoming ORDER BY delivery_id
    ON CONFLICT (delivery_id) DO NOTHING
    RETURNING id, delivery_id, handler
), queued AS (
    INSERT INTO jobs (delivery_id, handler, state, attempts, waits, created_at)
    SELECT id, handler, 'queued', 0, 0, now() FROM stored WHERE handler IS NOT NULL
    RETURNING id, delivery_id
)
SELECT stored.delivery_id, queued.id FROM stored LEFT JOIN queued ON queued.delivery_id = stored.id
"""
)


def store_batch(conn: Connection, batch: list[Incoming]) -> list[Recorded]:
    """Store new deliveries (and their jobs) inside the caller's transaction (on PostgreSQL, an autocommit
    connection will do: it is one statement): one Recorded per item, in order; an id already stored, or met
    earlier in the batch, is a duplicate."""
    first: dict[str, Incoming] = {}
    for item in batch:
        first.setdefault(item.delivery_id, item)
    if conn.dialect.name == "postgresql":
        new = _store_pg(conn, list(first.values()))
    else:
        new = _store_generic(conn, list(first.values()))
    return [
        Recorded(False, new[item.delivery_id])
        if item.delivery_id in new and first[item.delivery_id] is item
        else Recorded(True, None)
        for item in batch
    ]


def _body(item: Incoming) -> str:
    return item.body if item.body is not None else json.dumps(item.payload)


def _store_pg(conn: Connection, items: list[Incoming]) -> dict[str, int | None]:
    d = json.dumps
    batch = ",".join(
        f'{{"delivery_id":{d(i.delivery_id)},"event":{d(i.event)},"action":{d(i.action)},'
        f'"repository":{d(i.repository)},"handler":{d(i.handler)},"payload":{_body(i)}}}'
        for i in items
    )
    rows = conn.execute(_PG_BATCH, {"batch": f"[{batch}]"})
    return {delivery_id: job_id for delivery_id, job_id in rows}


def _store_generic(conn: Connection, items: list[Incoming]) -> dict[str, int | None]:
    """SQLite (and any other dialect): one INSERT per delivery, skipping known ids, then one per job."""
    deliveries, jobs = DeliveryRow.__table__, JobRow.__table__
    new: dict[str, int | None] = {}
    now = utcnow()
    for item in sorted(items, key=lambda i: i.delivery_id):
        row_id = conn.execute(
            sqlite_insert(deliveries)
            .values(
                delivery_id=item.delivery_id,
                event=item.event,
                action=item.action,
                repository=item.repository,
                handler=item.handler,
                payload=item.payload,
                received_at=now,
            )
            .on_conflict_do_nothing(index_elements=["delivery_id"])
            .returning(deliveries.c.id)
        ).scalar()
        if row_id is None:
            continue
        job_id = None
        if item.handler:
            job_id = conn.execute(
                insert(jobs)
                .values(delivery_id=row_id, handler=item.handler, state="queued", attempts=0, waits=0, created_at=now)
                .returning(jobs.c.id)
            ).scalar()
        new[item.delivery_id] = job_id
    return new


LEASE_S = 60.0


class Jobs:
    """The job queue. A job is claimed under a row lock that skips rows other workers hold
    (PostgreSQL) and by a conditional UPDATE (both databases), so of several workers or replicas
    on one database exactly one wins it. A running job is leased to its worker, which renews the
    lease while it works; a job whose lease ran out (its worker died) goes back to the queue. A job tried
    again later is queued with `not_before` (its backoff) and not claimed before; a job waiting for GitHub
    to answer again is `parked` until `resume_parked` (bot.domain.patience decides which)."""

    def __init__(self, engine: Engine, lease_s: float = LEASE_S, owner: str | None = None):
        self._session = sessionmaker(engine, expire_on_commit=False)
        self.lease_s = lease_s
        self.owner = owner or f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"

    def _lease(self):
        return utcnow() + timedelta(seconds=self.lease_s)

    def claim(self) -> ClaimedJob | None:
        with self._session.begin() as s:
            ready = (JobRow.not_before.is_(None)) | (JobRow.not_before <= utcnow())  # a backoff holds it back
            queued = select(JobRow.id).where(JobRow.state == "queued", ready).order_by(JobRow.id).limit(5)
            candidates = s.scalars(queued.with_for_update(skip_locked=True)).all()
            for job_id in candidates:
                won = s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.state == "queued")
                    .values(state="running", attempts=JobRow.attempts + 1, owner=self.owner, lease_until=self._lease())
                )
                if won.rowcount == 1:
                    job = s.get(JobRow, job_id)
                    delivery = s.get(DeliveryRow, job.delivery_id)
                    return ClaimedJob(
                        job.id,
                        job.handler,
                        delivery.delivery_id,
                        delivery.event,
                        delivery.payload,
                        job.attempts,
                        job.waits or 0,
                    )
        return None

    def finish(self, job_id: int, error: str | None = None, retry: bool = False) -> None:
        """done, failed, or (retry) back in the queue at once with the error kept for the record."""
        state = "queued" if retry else "failed" if error else "done"
        with self._session.begin() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(state=state, error=error, finished_at=None if retry else utcnow(), not_before=None)
            )

    def later(self, job_id: int, error: str, after_s: float, counts: bool = True) -> None:
        """Back in the queue, not claimed for `after_s` (a backoff, GitHub's Retry-After); `counts=False`: the
        attempt it made is not counted against its limit (GitHub asked it to wait)."""
        with self._session.begin() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(
                    state="queued",
                    error=error,
                    owner=None,
                    lease_until=None,
                    not_before=utcnow() + timedelta(seconds=max(0.0, after_s)),
                    waits=JobRow.waits + (0 if counts else 1),
                )
            )

    def park(self, job_id: int, reason: str) -> None:
        """Waiting for GitHub to answer again (`resume_parked`), however long that takes; no attempt used up."""
        with self._session.begin() as s:
            s.execute(
                update(JobRow)
                .where(JobRow.id == job_id)
                .values(
                    state="parked",
                    error=reason,
                    owner=None,
                    lease_until=None,
                    not_before=None,
                    parked_at=utcnow(),
                    waits=JobRow.waits + 1,
                )
            )

    def parked_since(self) -> datetime | None:
        """When the longest-parked job (of any replica) was parked; None when none is."""
        with self._session() as s:
            oldest = s.scalar(select(func.min(JobRow.parked_at)).where(JobRow.state == "parked"))
        return None if oldest is None else oldest if oldest.tzinfo else oldest.replace(tzinfo=UTC)

    def resume_parked(self) -> int:
        """GitHub answers again: every parked job goes back to the queue, to be claimed at once."""
        with self._session.begin() as s:
            return s.execute(
                update(JobRow).where(JobRow.state == "parked").values(state="queued", parked_at=None, not_before=None)
            ).rowcount

    def renew(self, job_id: int) -> bool:
        """Extend this worker's lease on a running job; False when it is no longer ours."""
        with self._session.begin() as s:
            return (
                s.execute(
                    update(JobRow)
                    .where(JobRow.id == job_id, JobRow.state == "running", JobRow.owner == self.owner)
                    .values(lease_until=self._lease())
                ).rowcount
                == 1
            )

    def requeue_expired(self) -> int:
        """Running jobs whose worker stopped renewing (a killed process) go back to the queue; handlers
        are idempotent. Jobs of live workers, on this replica or another, are left alone."""
        with self._session.begin() as s:
            stale = (JobRow.lease_until.is_(None)) | (JobRow.lease_until < utcnow())
            return s.execute(
                update(JobRow).where(JobRow.state == "running", stale).values(state="queued", owner=None)
            ).rowcount
