"""The worker loop: claims queued jobs and hands each to the handler its route names."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping

from bot.adapters.store.deliveries import ClaimedJob, Jobs
from bot.observability import bind

log = logging.getLogger("revert_bisect.worker")

Handler = Callable[[ClaimedJob], None]


MAX_ATTEMPTS = 5


class Worker:
    def __init__(
        self, jobs: Jobs, handlers: Mapping[str, Handler], idle_s: float = 0.5, max_attempts: int = MAX_ATTEMPTS
    ):
        self.jobs = jobs
        self.handlers = handlers
        self.idle_s = idle_s
        self.max_attempts = max_attempts
        self._stop = threading.Event()

    def run_once(self) -> ClaimedJob | None:
        job = self.jobs.claim()
        if job is None:
            return None
        with bind(job_id=job.id, delivery_id=job.delivery_id):  # on every log line of the job, its handler's too
            return self._run(job)

    def _run(self, job: ClaimedJob) -> ClaimedJob:
        handler = self.handlers.get(job.handler)
        started = time.monotonic()
        log.info("job %s (%s, %s) started, attempt %s", job.id, job.handler, job.event, job.attempts)
        done = threading.Event()
        heartbeat = threading.Thread(
            target=self._renew, args=(job.id, done), name=f"revert-bisect-lease-{job.id}", daemon=True
        )
        heartbeat.start()
        try:
            if handler is None:
                raise LookupError(f"no handler registered for {job.handler!r}")
            handler(job)
        except Exception as exc:  # recorded with its reason and retried (handlers are idempotent); the loop goes on
            log.exception(
                "job %s (%s, delivery %s) failed, attempt %s", job.id, job.handler, job.delivery_id, job.attempts
            )
            retry = handler is not None and job.attempts < self.max_attempts
            self.jobs.finish(job.id, f"{type(exc).__name__}: {exc}", retry=retry)
        else:
            self.jobs.finish(job.id)
            log.info("job %s (%s) done in %.1fs", job.id, job.handler, time.monotonic() - started)
        finally:
            done.set()
        return job

    def _renew(self, job_id: int, done: threading.Event) -> None:
        """Keep the job's lease while its handler runs (a bisection can take hours)."""
        while not done.wait(self.jobs.lease_s / 3):
            try:
                self.jobs.renew(job_id)
            except Exception:  # noqa: BLE001 -- the store is briefly unreachable: try again next beat
                log.warning("cannot renew the lease of job %s", job_id, exc_info=True)

    def start(self, threads: int = 2) -> list[threading.Thread]:
        """Several loops, so a command (status, cancel) is answered while a bisection runs in another."""
        started = []
        for i in range(threads):
            thread = threading.Thread(target=self._loop, name=f"revert-bisect-worker-{i}", daemon=True)
            thread.start()
            started.append(thread)
        return started

    def _loop(self) -> None:
        next_sweep = 0.0
        while not self._stop.is_set():
            if time.monotonic() >= next_sweep:  # jobs of a dead worker (any replica) come back when their lease ends
                self._sweep()
                next_sweep = time.monotonic() + self.jobs.lease_s / 2
            if self.run_once() is None:
                self._stop.wait(self.idle_s)

    def _sweep(self) -> None:
        try:
            if n := self.jobs.requeue_expired():
                log.info("requeued %s job(s) whose worker stopped renewing its lease", n)
        except Exception:  # noqa: BLE001 -- the store is briefly unreachable: the loop goes on
            log.warning("cannot requeue expired jobs", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
