"""The job queue and worker loop, on SQLite and PostgreSQL: each job is run once, failures recorded."""

import threading
import time

import pytest

from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.ingress.worker import Worker


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

    workers = [Worker(Jobs(engine), {"command": handle}) for _ in range(4)]

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

    worker = Worker(Jobs(engine), {"command": boom})
    while worker.run_once() is not None:
        pass
    jobs = {j.delivery_id: (j.state, j.error) for j in Deliveries(engine).jobs()}
    states = sorted((state, (error or "")[:40]) for state, error in jobs.values())
    assert states == [
        ("done", ""),
        ("failed", "LookupError: no handler registered for '"),
        ("failed", "RuntimeError: GitHub said 502"),
    ]


def test_jobs_left_running_by_a_dead_process_are_requeued_when_their_lease_ends(engine):
    enqueue(engine, 2)
    dead, live = Jobs(engine, lease_s=0.3), Jobs(engine, lease_s=30)
    assert dead.claim() is not None and live.claim() is not None and live.claim() is None
    assert live.requeue_expired() == 0  # both leases still run: another replica's job is never taken
    time.sleep(0.4)
    assert live.requeue_expired() == 1  # the dead worker's lease ended; the live one's did not
    again = live.claim()
    assert again.attempts == 2 and live.claim() is None
    assert not dead.renew(again.id) and live.renew(again.id)  # it belongs to its new worker now


def test_a_worker_renews_the_lease_of_a_long_job(engine):
    enqueue(engine, 1)
    jobs, other = Jobs(engine, lease_s=0.3), Jobs(engine, lease_s=0.3)
    seen = []

    def slow(job):
        time.sleep(1.0)  # three leases long
        seen.append(other.requeue_expired())

    Worker(jobs, {"command": slow}).run_once()
    assert seen == [0] and [j.state for j in Deliveries(engine).jobs()] == ["done"]
