"""The job queue and worker loop, on SQLite and PostgreSQL: each job is run once, failures recorded."""

import threading

import pytest

from bot.store.db import connect
from bot.store.deliveries import Deliveries, Incoming, Jobs
from bot.worker import Worker


@pytest.fixture(params=["sqlite", "postgres"])
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
    assert states == [("done", ""), ("failed", "LookupError: no handler registered for '"), ("failed", "RuntimeError: GitHub said 502")]


def test_jobs_left_running_by_a_dead_process_are_requeued(engine):
    enqueue(engine, 1)
    jobs = Jobs(engine)
    assert jobs.claim() is not None and jobs.claim() is None
    assert jobs.requeue_running() == 1
    assert jobs.claim().attempts == 2
