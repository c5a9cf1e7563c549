"""The webhook's acknowledgement on both stores: a 202 only for a delivery already committed, one job per delivery
id however many times (and however concurrently) it arrives, and a delivery the store refuses never takes its
batch-mates down with it."""

import asyncio
import json
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy

from bot.adapters.store.db import connect
from bot.adapters.store.recorder import Recorder
from bot.app import create_app
from bot.ingress.webhooks.signature import sign
from bot.ports.store import Incoming
from bot.settings import BotSettings

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"
SECRET = "ack-secret-" + uuid.uuid4().hex
COMMENT = (FIXTURES / "issue_comment.created.json").read_bytes()
PUSH = (FIXTURES / "push.json").read_bytes()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db(request, tmp_path):
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path / 'bot.db'}"
    return request.getfixturevalue("pg_url")


def headers(body: bytes, event: str, delivery: str) -> dict[str, str]:
    return {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
        "Content-Type": "application/json",
    }


def rows(db: str, sql: str) -> list[tuple]:
    engine = sqlalchemy.create_engine(db)
    try:
        with engine.connect() as conn:
            return [tuple(r) for r in conn.execute(sqlalchemy.text(sql))]
    finally:
        engine.dispose()


def test_concurrent_deliveries_and_redeliveries_store_each_id_once_with_one_job(db):
    app = create_app(BotSettings(webhook_secret=SECRET, db=db), handlers={})
    ids = [str(uuid.uuid4()) for _ in range(12)]
    # every id three times at once (the same body: a redelivery), comments queue a job, pushes do not
    sends = [(d, COMMENT if i % 2 else PUSH, "issue_comment" if i % 2 else "push") for i, d in enumerate(ids)] * 3

    async def send_all():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            return await asyncio.gather(
                *(client.post("/webhooks/github", content=b, headers=headers(b, e, d)) for d, b, e in sends)
            )

    answers = asyncio.run(send_all())
    assert {r.status_code for r in answers} == {202}
    outcomes: dict[str, list[str]] = {}
    for (delivery, _, _), r in zip(sends, answers):
        outcomes.setdefault(delivery, []).append(r.json()["message"])
    for i, delivery in enumerate(ids):
        first = "queued" if i % 2 else "ignored: nothing handles push"
        assert sorted(outcomes[delivery]) == sorted([first] + ["already received this delivery; nothing to do"] * 2)
    stored = rows(
        db,
        "SELECT d.delivery_id, count(j.id) FROM deliveries d LEFT JOIN jobs j ON j.delivery_id = d.id "
        "GROUP BY d.delivery_id",
    )
    assert dict(stored) == {d: i % 2 for i, d in enumerate(ids)}
    job_ids = {r.json()["job"] for r in answers if r.json()["message"] == "queued"}
    assert job_ids == {r[0] for r in rows(db, "SELECT id FROM jobs")}


def test_an_acknowledged_delivery_is_already_committed_with_its_payload(db):
    app = create_app(BotSettings(webhook_secret=SECRET, db=db), handlers={})
    delivery = str(uuid.uuid4())

    async def send():
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://bot") as client:
            return await client.post(
                "/webhooks/github", content=COMMENT, headers=headers(COMMENT, "issue_comment", delivery)
            )

    assert asyncio.run(send()).status_code == 202
    # read at once from another connection: the answer came after the commit, not before
    (payload,) = rows(db, f"SELECT payload FROM deliveries WHERE delivery_id = '{delivery}'")[0]
    assert (json.loads(payload) if isinstance(payload, str) else payload) == json.loads(COMMENT)


@pytest.mark.postgres  # SQLite does not enforce a column's length: nothing there to refuse
def test_a_delivery_the_store_refuses_fails_alone_and_its_batch_mates_are_stored(pg_url):
    db = pg_url
    engine = connect(db)
    recorder = Recorder(engine)
    good = [Incoming(f"good-{i}", "issue_comment", "created", "o/r", "command", {"i": i}) for i in range(5)]
    bad = Incoming("bad", "issue_comment", "x" * 100, "o/r", "command", {})  # longer than deliveries.action holds

    async def record_all():
        return await asyncio.gather(*(recorder.record(i) for i in [*good[:2], bad, *good[2:]]), return_exceptions=True)

    try:
        results = asyncio.run(record_all())
    finally:
        recorder.stop()
    assert isinstance(results[2], sqlalchemy.exc.SQLAlchemyError)
    assert all(not r.duplicate and r.job_id for r in results[:2] + results[3:])
    assert sorted(r[0] for r in rows(db, "SELECT delivery_id FROM deliveries")) == [g.delivery_id for g in good]
