"""The job queue and worker loop, on SQLite and PostgreSQL: each job is run once, failures recorded."""

import threading
import time
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from sqlalchemy import select

from bot.adapters.github.failures import classify
from bot.adapters.store import deliveries
from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.adapters.store.models import JobRow
from bot.domain.patience import Backoff
from bot.ingress.worker import Worker
from tests.support.sandbox import wait_for


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'q.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    return connect(url)


def enqueue(engine, n, handler="command"):
    deliveries = Deliveries(engine)
    for i in range(n):
        deliveries.record(Incoming(f"d-{i}", "issue_comment", "created", "acme/engine", handler, {"i": i}))


def test_each_job_is_claimed_exactly_once_by_competing_workers(engine):
    enqueue(engine, 40)
    seen, lock = [], threading.Lock()

    def handle(job):
        with lock:
            seen.append(job.payload["i"])

    workers = [Worker(Jobs(engine), {"command": handle}, classify=classify) for _ in range(4)]

    def drain(w):
        while w.run_once() is not None:
            pass

    threads = [threading.Thread(target=drain, args=(w,)) for w in workers]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == list(range(40))


def test_failures_are_recorded_and_do_not_stop_the_loop(engine):
    enqueue(engine, 2)
    enqueue_unknown = Deliveries(engine)
    enqueue_unknown.record(Incoming("d-x", "workflow_run", "completed", "acme/engine", "nightly_failure", {}))

    def boom(job):
        if job.payload["i"] == 0:
            raise RuntimeError("GitHub said 502")

    worker = Worker(
        Jobs(engine), {"command": boom}, classify=classify, backoff=Backoff(base_s=0.0)
    )  # retried at once, 5 times
    while worker.run_once() is not None:
        pass
    jobs = {j.delivery_id: (j.state, j.error) for j in Deliveries(engine).jobs()}
    states = sorted((state, (error or "")[:40]) for state, error in jobs.values())
    assert states == [
        ("done", ""),
        ("failed", "LookupError: no handler registered for '"),
        ("failed", "RuntimeError: GitHub said 502"),
    ]


@pytest.fixture
def queue_clock(monkeypatch):
    """The queue's clock (its leases, its backoffs), moved by the test: a lease ends when the test says,
    not when a loaded machine gets round to it."""
    clock = SimpleNamespace(now=datetime.now(UTC))

    def advance(seconds: float) -> None:
        clock.now += timedelta(seconds=seconds)

    clock.advance = advance
    monkeypatch.setattr(deliveries, "utcnow", lambda: clock.now)
    return clock


def lease_of(engine, job_id: int):
    with engine.connect() as conn:
        return conn.execute(select(JobRow.lease_until).where(JobRow.id == job_id)).scalar_one()


def test_jobs_left_running_by_a_dead_process_are_requeued_when_their_lease_ends(engine, queue_clock):
    enqueue(engine, 2)
    dead, live = Jobs(engine, lease_s=0.3), Jobs(engine, lease_s=30)
    assert dead.claim() is not None and live.claim() is not None and live.claim() is None
    assert live.requeue_expired() == 0  # both leases still run: another replica's job is never taken
    queue_clock.advance(0.4)
    assert live.requeue_expired() == 1  # the dead worker's lease ended; the live one's did not
    again = live.claim()
    assert again.attempts == 2 and live.claim() is None
    assert not dead.renew(again.id) and live.renew(again.id)  # it belongs to its new worker now


def test_a_worker_renews_the_lease_of_a_long_job(engine, queue_clock):
    enqueue(engine, 1)
    jobs, other = Jobs(engine, lease_s=0.3), Jobs(engine, lease_s=0.3)
    seen = []

    def slow(job):
        for _ in range(6):  # three leases long, in half-lease steps, each one renewed by the worker's heartbeat
            before = lease_of(engine, job.id)
            queue_clock.advance(0.15)
            wait_for(lambda: lease_of(engine, job.id) > before, timeout=60)  # noqa: B023 -- read at once
        seen.append(other.requeue_expired())

    Worker(jobs, {"command": slow}, classify=classify).run_once()
    assert seen == [0] and [j.state for j in Deliveries(engine).jobs()] == ["done"]


class FakeClock:
    def __init__(self):
        self.t = 0.0

    def __call__(self):
        return self.t


def job_rows(engine):
    import sqlalchemy

    with engine.connect() as conn:
        return conn.execute(
            sqlalchemy.text("SELECT state, attempts, waits, not_before, parked_at, error FROM jobs ORDER BY id")
        ).all()


def test_an_outage_parks_the_job_and_a_probe_github_answers_puts_it_back(engine):
    """GitHub refuses connections: each job is parked (no attempt used up), the probe backs off while GitHub does
    not answer, and the first answered probe sends the jobs back; they then complete."""
    import requests

    from bot.observability.reachability import Reachability

    enqueue(engine, 2)
    clock, github_up, probes, calls = FakeClock(), [False], [], []
    reach = Reachability(backoff=Backoff(base_s=1.0, cap_s=8.0, jitter=0.0), clock=clock, rng=lambda: 0.0)

    def handle(job):
        calls.append(job.payload["i"])
        if not github_up[0]:
            raise requests.ConnectionError("HTTPConnectionPool: Max retries exceeded ([Errno 111] Connection refused)")

    def probe():
        probes.append(clock.t)
        return github_up[0]

    worker = Worker(Jobs(engine), {"command": handle}, classify=classify, probe=probe, reach=reach)
    assert worker.run_once() is not None  # the first job meets the outage
    assert [r[:3] for r in job_rows(engine)] == [("parked", 1, 1), ("queued", 0, 0)]
    assert not reach.up
    assert worker.run_once() is not None  # the second one too: parked, not failed
    assert worker.run_once() is None and [r[:3] for r in job_rows(engine)] == [("parked", 1, 1), ("parked", 1, 1)]
    for t in range(0, 40):  # 40 s of outage, the loop looking every second
        clock.t = float(t)
        assert worker.tend_parked() == 0
    assert probes == [1.0, 3.0, 7.0, 15.0, 23.0, 31.0, 39.0]  # 1, 2, 4, 8 s apart, then at the cap
    assert calls == [0, 1] and [r[0] for r in job_rows(engine)] == ["parked", "parked"]
    github_up[0] = True
    clock.t = 47.0
    assert worker.tend_parked() == 2 and reach.up
    while worker.run_once() is not None:
        pass
    assert [r[:3] for r in job_rows(engine)] == [("done", 2, 1), ("done", 2, 1)]
    assert calls == [0, 1, 0, 1] and reach.seen().probes == {True: 1, False: 7}


def test_parked_jobs_resume_at_once_when_github_answered_this_process_since(engine):
    import requests

    from bot.observability.reachability import Reachability

    enqueue(engine, 1)
    reach, probes = Reachability(), []

    def refused(job):
        raise requests.ConnectionError("Connection refused")

    worker = Worker(
        Jobs(engine), {"command": refused}, classify=classify, probe=lambda: probes.append(1) or False, reach=reach
    )
    worker.run_once()
    assert job_rows(engine)[0][0] == "parked" and not reach.up
    time.sleep(0.01)
    reach.answered()  # another request of this process got its answer (a poll of a bisection in flight, say)
    assert worker.tend_parked() == 1 and probes == [] and job_rows(engine)[0][0] == "queued"


def test_a_failed_job_waits_out_its_backoff_before_it_is_claimed_again(engine):
    enqueue(engine, 1)
    seen = []

    def flaky(job):
        seen.append(time.monotonic())
        if len(seen) < 3:
            raise KeyError("number")

    jobs = Jobs(engine)
    worker = Worker(jobs, {"command": flaky}, classify=classify, backoff=Backoff(base_s=0.4, factor=2.0, jitter=0.0))
    worker.run_once()
    state, attempts, waits, not_before, _, error = job_rows(engine)[0]
    assert (state, attempts, waits, error) == ("queued", 1, 0, "KeyError: 'number'") and not_before is not None
    assert worker.run_once() is None  # held back by its backoff
    deadline = time.monotonic() + 10
    while len(seen) < 3 and time.monotonic() < deadline:
        worker.run_once()
        time.sleep(0.02)
    assert len(seen) == 3 and job_rows(engine)[0][:2] == ("done", 3)
    gaps = [b - a for a, b in zip(seen, seen[1:])]
    assert gaps[0] >= 0.4 and gaps[1] >= 0.8  # 0.4 s, then 0.8 s: exponential


def test_a_secondary_rate_limit_waits_what_retry_after_says_without_using_an_attempt(engine):
    from github import GithubException

    enqueue(engine, 1)
    seen = []

    def limited(job):
        seen.append(time.monotonic())
        if len(seen) == 1:
            message = "You have exceeded a secondary rate limit. Please wait a few minutes before you try again."
            raise GithubException(
                403,
                {"message": message},
                {"retry-after": "1"},
            )

    worker = Worker(
        Jobs(engine), {"command": limited}, classify=classify, max_attempts=1, backoff=Backoff(base_s=0.1, jitter=0.0)
    )
    worker.run_once()
    assert job_rows(engine)[0][:3] == ("queued", 1, 1)  # waited; with max_attempts=1 an error would have failed it
    deadline = time.monotonic() + 10
    while len(seen) < 2 and time.monotonic() < deadline:
        worker.run_once()
        time.sleep(0.02)
    assert job_rows(engine)[0][:3] == ("done", 2, 1) and seen[1] - seen[0] >= 1.0
