"""The worker loop: claims queued jobs and hands each to the handler its route names."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from bot.store.deliveries import ClaimedJob, Jobs

log = logging.getLogger("revert_bisect.worker")

Handler = Callable[[ClaimedJob], None]


class Worker:
    def __init__(self, jobs: Jobs, handlers: Mapping[str, Handler], idle_s: float = 0.5):
        self.jobs = jobs
        self.handlers = handlers
        self.idle_s = idle_s
        self._stop = threading.Event()

    def run_once(self) -> ClaimedJob | None:
        job = self.jobs.claim()
        if job is None:
            return None
        handler = self.handlers.get(job.handler)
        try:
            if handler is None:
                raise LookupError(f"no handler registered for {job.handler!r}")
            handler(job)
        except Exception as exc:  # a failed job is recorded with its reason; the loop goes on
            log.exception("job %s (%s, delivery %s) failed", job.id, job.handler, job.delivery_id)
            self.jobs.finish(job.id, f"{type(exc).__name__}: {exc}")
        else:
            self.jobs.finish(job.id)
        return job

    def run_forever(self) -> None:
        self.jobs.requeue_running()
        while not self._stop.is_set():
            if self.run_once() is None:
                self._stop.wait(self.idle_s)

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.run_forever, name="revert-bisect-worker", daemon=True)
        thread.start()
        return thread

    def stop(self) -> None:
        self._stop.set()
