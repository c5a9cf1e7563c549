"""Flakes seen per test: recorded once per (repository, test, run) by the nightly job, counted on /trust and in
/api/trust; and the worker's NotYet, which queues a job again without using an attempt (a red run's grace period)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
from sqlalchemy import select
from starlette.testclient import TestClient

from bot.adapters.github.failures import classify
from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.adapters.store.flakes import Flakes
from bot.adapters.store.models import JobRow
from bot.app import create_app
from bot.domain.patience import NotYet
from bot.domain.signals import Flake
from bot.ingress.worker import Worker
from bot.settings import BotSettings

RUN = "https://github.com/sgl-project/sglang/actions/runs/{}"


def flake(run_id, test="qwen3-next-models", how="failed, then passed on re-run attempt 2", repo=None):
    return Flake(repo or "sgl-project/sglang", test, run_id, "a" * 40, how, RUN.format(run_id))


def test_a_flake_is_recorded_once_per_run_and_counted_per_test(tmp_path):
    flakes = Flakes(connect(f"sqlite:///{tmp_path / 's.db'}"))
    assert flakes.record(flake(1)) and not flakes.record(flake(1))  # a retried job, a second webhook
    assert flakes.record(flake(2, how="passed on the suite runner's own retry"))
    assert flakes.record(flake(2, test="other")) and flakes.record(flake(3, repo="o/r"))
    [kl, *rest] = flakes.per_test()
    assert (kl.repository, kl.test, kl.count, kl.last_url) == (
        "sgl-project/sglang",
        "qwen3-next-models",
        2,
        RUN.format(2),
    )
    assert kl.last_how == "passed on the suite runner's own retry"
    assert sorted((f.repository, f.test, f.count) for f in rest) == [
        ("o/r", "qwen3-next-models", 1),
        ("sgl-project/sglang", "other", 1),
    ]


@pytest.mark.parametrize("backend", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_a_real_runs_id_past_2_to_the_31_is_recorded(backend, tmp_path, request):
    """GitHub's run ids are int64 and past 2**31 today (SGLang's nightly runs number about 1.9e10)."""
    url = f"sqlite:///{tmp_path / 's.db'}" if backend == "sqlite" else request.getfixturevalue("pg_url")
    flakes = Flakes(connect(url))
    assert flakes.record(flake(19_512_345_678))
    assert [f.last_url for f in flakes.per_test()] == [RUN.format(19_512_345_678)]


def test_trust_shows_the_flakes_seen_per_test(tmp_path):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    app = create_app(BotSettings(webhook_secret="whsec-flakes", db=db, workspace=tmp_path / "w"), handlers={})
    client = TestClient(app, client=("127.0.0.1", 50123))
    assert client.get("/api/trust").json()["flakes"] == []
    assert "No flake seen" in client.get("/trust").text
    Flakes(connect(db)).record(flake(7))
    Flakes(connect(db)).record(flake(9, how="passed on the suite runner's own retry"))
    [row] = client.get("/api/trust").json()["flakes"]
    assert (row["repository"], row["test"], row["count"], row["last_url"]) == (
        "sgl-project/sglang",
        "qwen3-next-models",
        2,
        RUN.format(9),
    )
    page = client.get("/trust").text
    line = re.sub(r"\s+", " ", re.search(r'<li class="flake".*?</li>', page, re.S).group(0))
    assert "<code>qwen3-next-models</code>: 2 flakes" in line and "not bisected" in line
    assert f'href="{RUN.format(9)}"' in line and "passed on the suite runner&#39;s own retry" in line


def test_not_yet_queues_the_job_again_later_without_using_an_attempt(tmp_path):
    engine = connect(f"sqlite:///{tmp_path / 'q.db'}")
    Deliveries(engine).record(Incoming("d-1", "workflow_run", "completed", "o/r", "nightly_failure", {}))
    calls = []

    def grace(job):
        calls.append(job.failed_attempts)
        raise NotYet(1800, "run 40 attempt 1: waiting 1800s for re-runs to start")

    worker = Worker(Jobs(engine), {"nightly_failure": grace}, classify=classify, max_attempts=1)
    before = datetime.now(UTC)
    worker.run_once()
    assert worker.run_once() is None  # not claimed again before its time
    with engine.connect() as conn:
        row = conn.execute(select(JobRow)).one()
    assert row.state == "queued" and row.waits == 1 and "waiting 1800s" in row.error
    not_before = row.not_before if row.not_before.tzinfo else row.not_before.replace(tzinfo=UTC)
    assert before + timedelta(seconds=1790) <= not_before <= datetime.now(UTC) + timedelta(seconds=1800)
    with engine.begin() as conn:  # its time has come
        conn.execute(JobRow.__table__.update().values(not_before=datetime.now(UTC) - timedelta(seconds=1)))
    worker.run_once()
    assert calls == [1, 1]  # the wait used no attempt: the second claim is still the first attempt
