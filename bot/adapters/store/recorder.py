"""Deliveries stored in batches by one thread, for the webhook's request path.

A request hands its delivery to the recorder and awaits the commit of the batch that carries it: a 202 is only
sent for a delivery that is durably stored, and a crash before the commit loses only deliveries not yet
acknowledged (GitHub shows them failed; they can be redelivered). While one batch commits, the next gathers,
so under load one round trip to the store carries many deliveries. A few threads (`writers`, each with its own
connection) take batches from one inbox: the store works on one batch while it commits another, and a busy machine's
scheduler gives the store more than one process's share.
"""

from __future__ import annotations

import asyncio
import queue
import threading
from collections.abc import Callable
from dataclasses import dataclass

from sqlalchemy import Connection, Engine
from sqlalchemy.exc import DBAPIError, OperationalError, SQLAlchemyError

from bot.adapters.store.deliveries import store_batch
from bot.ports.store import Incoming, Recorded

MAX_BATCH = 500
WRITERS = 3


@dataclass(frozen=True)
class _Item:
    incoming: Incoming
    future: asyncio.Future
    loop: asyncio.AbstractEventLoop


class Recorder:
    """bot.ports.store.DeliveryRecorder over one store; `queued` is called after a batch queued a job (the
    worker's wake-up)."""

    def __init__(
        self,
        engine: Engine,
        queued: Callable[[], None] | None = None,
        max_batch: int = MAX_BATCH,
        writers: int = WRITERS,
    ):
        self._engine = engine
        self.queued = queued
        self._max_batch = max_batch
        self._writers = writers if engine.dialect.name == "postgresql" else 1  # SQLite has one writer at a time
        self._inbox: queue.SimpleQueue[_Item | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._local = threading.local()  # each writer's connection
        self._autocommit = engine.dialect.name == "postgresql"

    async def record(self, incoming: Incoming) -> Recorded:
        loop = asyncio.get_running_loop()
        future = loop.create_future()
        if not self._threads or not self._threads[0].is_alive():
            self._start()
        self._inbox.put(_Item(incoming, future, loop))
        return await future

    def alive(self) -> bool:
        """False only when a writer was started and is gone (they never stop on their own)."""
        return all(t.is_alive() for t in self._threads)

    def _start(self) -> None:
        with self._lock:  # started on first use, so an app served without its lifespan records too
            self._threads = [t for t in self._threads if t.is_alive()]
            for i in range(len(self._threads), self._writers):
                thread = threading.Thread(target=self._run, name=f"revert-bisect-recorder-{i}", daemon=True)
                thread.start()
                self._threads.append(thread)

    def stop(self) -> None:
        """Store what was handed over, then end the writers."""
        with self._lock:
            threads, self._threads = self._threads, []
        live = [t for t in threads if t.is_alive()]
        for _ in live:
            self._inbox.put(None)
        for thread in live:
            thread.join(timeout=30)

    def _run(self) -> None:
        stopping = False
        while not stopping:
            first = self._inbox.get()
            if first is None:
                break
            batch = [first]
            while len(batch) < self._max_batch:
                try:
                    item = self._inbox.get_nowait()
                except queue.Empty:
                    break
                if item is None:
                    stopping = True
                    break
                batch.append(item)
            try:
                results = self._store(batch)
            except Exception as exc:  # noqa: BLE001 -- a bug here must not leave requests waiting forever
                results = [exc] * len(batch)
            self._settle(batch, results)
        self._drop()

    def _store(self, batch: list[_Item]) -> list[Recorded | BaseException]:
        incoming = [item.incoming for item in batch]
        try:
            return list(self._commit(incoming))
        except SQLAlchemyError as exc:
            if len(batch) == 1 or _unreachable(exc):
                return [exc] * len(batch)
        # one delivery the store refuses (not an outage) must not refuse its batch-mates: each on its own
        out: list[Recorded | BaseException] = []
        for one in incoming:
            try:
                out += self._commit([one])
            except SQLAlchemyError as exc:
                out.append(exc)
        return out

    def _commit(self, incoming: list[Incoming]) -> list[Recorded]:
        for attempt in (1, 2):
            conn = getattr(self._local, "conn", None)
            try:
                if conn is None:
                    conn = self._local.conn = self._connect()
                if self._autocommit:
                    recorded = store_batch(conn, incoming)
                else:
                    with conn.begin():
                        recorded = store_batch(conn, incoming)
                break
            except DBAPIError as exc:
                self._drop()
                # a connection that went stale while idle (the server restarted): once more on a new one
                if attempt == 2 or not exc.connection_invalidated:
                    raise
            except SQLAlchemyError:
                self._drop()
                raise
        if self.queued is not None and any(r.job_id is not None for r in recorded):
            self.queued()
        return recorded

    def _connect(self) -> Connection:
        if self._autocommit:  # the batch is one statement: it commits on its own, in one round trip
            return self._engine.connect().execution_options(isolation_level="AUTOCOMMIT")
        return self._engine.connect()

    def _drop(self) -> None:
        conn, self._local.conn = getattr(self._local, "conn", None), None
        if conn is not None:
            try:
                conn.close()
            except SQLAlchemyError:
                pass

    @staticmethod
    def _settle(batch: list[_Item], results: list[Recorded | BaseException]) -> None:
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[asyncio.Future, Recorded | BaseException]]] = {}
        for item, result in zip(batch, results):
            by_loop.setdefault(item.loop, []).append((item.future, result))
        for loop, pairs in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, pairs)
            except RuntimeError:  # that loop is closed: nobody awaits these any more
                pass


def _resolve(pairs: list[tuple[asyncio.Future, Recorded | BaseException]]) -> None:
    for future, result in pairs:
        if future.done():  # the request was cancelled (its client went away); the row stays stored
            continue
        if isinstance(result, BaseException):
            future.set_exception(result)
        else:
            future.set_result(result)


def _unreachable(exc: SQLAlchemyError) -> bool:
    return isinstance(exc, OperationalError) or isinstance(exc, DBAPIError) and exc.connection_invalidated
