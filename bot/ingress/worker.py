"""The worker loop: claims queued jobs and hands each to the handler its route names.

A job that fails is not tried again at once (bot.domain.patience decides): after an error, once its backoff
(exponential, with jitter) has passed, up to `max_attempts`; after a rate limit, when GitHub said; when GitHub
does not answer, it is *parked*, and the loop probes GitHub (with backoff) until it answers, then puts every
parked job back in the queue. While GitHub is down, a job claimed meets it at its first request, which
fails at once without the network (bot.observability.reachability), and is parked too: listed as waiting
for GitHub on the dashboard and in /metrics.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable, Mapping

from bot.domain.liveness import LoopBeat
from bot.domain.patience import JOB_BACKOFF, Backoff, Failure, GiveUp, Later, NotYet, Park, after_failure
from bot.observability import bind
from bot.observability.heartbeat import beating
from bot.observability.reachability import Reachability
from bot.ports.store import ClaimedJob, JobQueue

log = logging.getLogger("revert_bisect.worker")

Handler = Callable[[ClaimedJob], None]
Probe = Callable[[], bool]  # does GitHub answer? (bot.observability.reachability.probe on the API's URL)
# what an exception means: an outage, a rate limit or another error (bot.adapters.github.failures.classify)
Classify = Callable[[BaseException], Failure]


MAX_ATTEMPTS = 5


class Worker:
    def __init__(
        self,
        jobs: JobQueue,
        handlers: Mapping[str, Handler],
        *,
        classify: Classify,
        idle_s: float = 0.5,
        max_attempts: int = MAX_ATTEMPTS,
        probe: Probe | None = None,
        reach: Reachability | None = None,  # GitHub's (the app passes its host's); None: a private one
        backoff: Backoff = JOB_BACKOFF,
        rng: Callable[[], float] = random.random,
    ):
        self.jobs = jobs
        self.handlers = handlers
        self.classify = classify
        self.idle_s = idle_s
        self.max_attempts = max_attempts
        self.probe = probe
        self.reach = reach or Reachability()
        self.backoff = backoff
        self.rng = rng
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._patience_lock = threading.Lock()
        self._beats: dict[str, float] = {}  # each loop's last heartbeat (monotonic)
        self._ended: dict[str, str] = {}  # loops that died, and why
        self.on_death: Callable[[str], None] | None = None  # told when a loop dies (`serve` exits on it)

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
        except NotYet as wait:  # not due yet: back in the queue for a while, no attempt used
            self.jobs.later(job.id, wait.reason, wait.after_s, counts=False)
            log.info("job %s (%s) not due yet; again in %.0fs: %s", job.id, job.handler, wait.after_s, wait.reason)
        except Exception as exc:  # recorded with its reason and retried (handlers are idempotent); the loop goes on
            self._failed(job, handler is not None, exc)
        else:
            self.jobs.finish(job.id)
            log.info("job %s (%s) done in %.1fs", job.id, job.handler, time.monotonic() - started)
        finally:
            done.set()
        return job

    def _failed(self, job: ClaimedJob, handled: bool, exc: Exception) -> None:
        failure = self.classify(exc)
        error = f"{type(exc).__name__}: {exc}"
        if not handled:
            decision = GiveUp(error)
        else:
            decision = after_failure(failure, job.failed_attempts, self.max_attempts, self.rng(), self.backoff)
        if isinstance(decision, Park):
            self.reach.mark_down()  # the API or the git host: either way, stop asking until a probe is answered
            self.jobs.park(job.id, decision.reason)
            log.warning("job %s (%s) parked until GitHub answers again: %s", job.id, job.handler, failure.detail)
        elif isinstance(decision, Later):
            self.jobs.later(job.id, error, decision.after_s, counts=decision.counts)
            log.warning(
                "job %s (%s, delivery %s) failed, attempt %s; tried again in %.1fs: %s",
                job.id,
                job.handler,
                job.delivery_id,
                job.failed_attempts,
                decision.after_s,
                decision.reason,
                exc_info=failure.trouble == "error",
            )
        else:
            log.error(
                "job %s (%s, delivery %s) failed for good after %s attempt(s)",
                job.id,
                job.handler,
                job.delivery_id,
                job.failed_attempts,
                exc_info=exc,
            )
            self.jobs.finish(job.id, error)

    def tend_parked(self) -> int:
        """Parked jobs back in the queue once GitHub answers: at once when it answered this process since they
        were parked, else when the probe (at most one at a time, on its backoff schedule) is answered. The
        number of jobs put back."""
        if not self._patience_lock.acquire(blocking=False):
            return 0
        try:
            parked = self.jobs.parked_since()
            if parked is None:
                if not self.reach.up and self.probe is not None and self.reach.claim_trial():
                    self.reach.trial_done(self.probe(), probe=True)  # a job in flight may be waiting on GitHub
                return 0
            if not self.reach.answered_since(parked.timestamp()):
                if self.probe is None or not self.reach.claim_trial():
                    return 0
                answered = self.probe()
                self.reach.trial_done(answered, probe=True)
                if not answered:
                    log.info("GitHub still does not answer; next probe in %.0fs", self.reach.next_trial_in())
                    return 0
            if n := self.jobs.resume_parked():
                log.info("GitHub answers again: %s parked job(s) back in the queue", n)
            return n
        finally:
            self._patience_lock.release()

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
            name = f"revert-bisect-worker-{i}"
            self._beats[name] = time.monotonic()
            thread = threading.Thread(target=self._guarded, args=(name,), name=name, daemon=True)
            thread.start()
            started.append(thread)
        return started

    def loops(self) -> list[LoopBeat]:
        """Each started loop's last heartbeat, and why it ended if it did (bot.domain.liveness judges them)."""
        return [LoopBeat(name, beat, self._ended.get(name)) for name, beat in list(self._beats.items())]

    def wake(self) -> None:
        """A job was queued: an idle loop claims it now instead of after its idle wait."""
        self._wake.set()

    def _guarded(self, name: str) -> None:
        def beat() -> None:
            self._beats[name] = time.monotonic()

        try:
            with beating(beat):
                self._loop(beat)
        except BaseException as exc:  # noqa: BLE001 -- the loop is gone: say so (/healthz, on_death), never silently
            reason = f"{type(exc).__name__}: {exc}" if str(exc) else type(exc).__name__
            log.critical("worker loop %s died: %s", name, reason, exc_info=exc)
            try:
                if self.on_death is not None:
                    self.on_death(f"{name} died: {reason}")
            finally:
                self._ended[name] = reason  # /healthz fails from here on

    def _loop(self, beat: Callable[[], None]) -> None:
        next_sweep = 0.0
        while not self._stop.is_set():
            beat()
            if time.monotonic() >= next_sweep:  # jobs of a dead worker (any replica) come back when their lease ends
                self._sweep()
                next_sweep = time.monotonic() + self.jobs.lease_s / 2
            try:
                self.tend_parked()
            except Exception:  # noqa: BLE001 -- the store is briefly unreachable: the loop goes on
                log.warning("cannot look at the parked jobs", exc_info=True)
            try:
                ran = self.run_once()
            except Exception:  # noqa: BLE001 -- no job claimed (the store is briefly unreachable): the loop goes on
                log.warning("cannot claim a job", exc_info=True)
                ran = None
            if ran is None:
                self._wake.wait(self.idle_s)
                self._wake.clear()

    def _sweep(self) -> None:
        try:
            if n := self.jobs.requeue_expired():
                log.info("requeued %s job(s) whose worker stopped renewing its lease", n)
        except Exception:  # noqa: BLE001 -- the store is briefly unreachable: the loop goes on
            log.warning("cannot requeue expired jobs", exc_info=True)

    def stop(self) -> None:
        self._stop.set()
        self._wake.set()
