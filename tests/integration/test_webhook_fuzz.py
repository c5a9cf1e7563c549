"""The webhook endpoint under hostile input (hypothesis): random bodies, truncated JSON, wrong content
types, missing or forged headers, replays. Only 2xx/4xx answers, never a 500; nothing is stored for
a request that is not correctly signed."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import pytest
import sqlalchemy
from fastapi.testclient import TestClient
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bot.app import create_app
from bot.ingress.webhooks.signature import sign
from bot.settings import BotSettings

SECRET = "fuzz-secret-" + uuid.uuid4().hex
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"
BODIES = [p.read_bytes() for p in sorted(FIXTURES.glob("*.json"))]
EVENTS = ["issue_comment", "workflow_run", "workflow_job", "push", "ping", "", "x" * 100, "issue_comment\r\nX-Evil: 1"]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    db = f"sqlite:///{tmp_path_factory.mktemp('fuzz') / 'bot.db'}"
    with TestClient(
        create_app(BotSettings(webhook_secret=SECRET, db=db, max_body_bytes=64 * 1024), handlers={})
    ) as client:
        yield client, sqlalchemy.create_engine(db)


def deliveries(engine) -> int:
    with engine.connect() as conn:
        return conn.execute(sqlalchemy.text("SELECT count(*) FROM deliveries")).scalar()


def mutated(data: bytes, cut: int, flip: int) -> bytes:
    """Truncated at `cut`, one byte changed at `flip`."""
    data = data[: cut % (len(data) + 1)]
    if data and flip:
        i = flip % len(data)
        data = data[:i] + bytes([(data[i] + 1) % 256]) + data[i + 1 :]
    return data


bodies = st.one_of(
    st.binary(max_size=2048),
    st.builds(mutated, st.sampled_from(BODIES), st.integers(0, 10**6), st.integers(0, 10**6)),
    st.sampled_from(BODIES),
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.text(max_size=20),
        lambda c: st.lists(c, max_size=4) | st.dictionaries(st.text(max_size=10), c, max_size=4),
        max_leaves=20,
    ).map(lambda v: json.dumps(v).encode()),
)
signatures = st.sampled_from(["good", "none", "empty", "forged", "sha1", "garbage", "other-secret"])


def signature_for(kind: str, body: bytes) -> str | None:
    return {
        "good": sign(SECRET.encode(), body),
        "none": None,
        "empty": "",
        "forged": "sha256=" + "0" * 64,
        "sha1": "sha1=" + "0" * 40,
        "garbage": "sha256=zz",
        "other-secret": sign(b"not-the-secret", body),
    }[kind]


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    body=bodies,
    event=st.sampled_from(EVENTS),
    signature=signatures,
    delivery=st.one_of(st.none(), st.text(max_size=80)),
    content_type=st.sampled_from(
        ["application/json", "application/x-www-form-urlencoded", "text/plain", "", "application/json; charset=utf-16"]
    ),
)
def test_no_input_gets_a_500_and_unsigned_input_is_never_stored(app, body, event, signature, delivery, content_type):
    client, engine = app
    headers = {"Content-Type": content_type}
    if event:
        headers["X-GitHub-Event"] = event.replace("\r\n", " ")
    if delivery is not None:
        headers["X-GitHub-Delivery"] = "".join(ch for ch in delivery if 32 <= ord(ch) < 127)
    sig = signature_for(signature, body)
    if sig is not None:
        headers["X-Hub-Signature-256"] = sig
    before = deliveries(engine)
    answer = client.post("/webhooks/github", content=body, headers=headers)
    assert answer.status_code < 500, answer.text
    assert answer.status_code in (200, 202, 400, 401, 413)
    if signature != "good":
        assert answer.status_code == 401 and deliveries(engine) == before
    if answer.status_code >= 400:
        assert deliveries(engine) == before
        assert "error" in answer.json() or "message" in answer.json()


def test_oversized_bodies_are_refused_before_they_are_read_whole(app):
    client, engine = app
    body = b"{" + b" " * (64 * 1024 + 1) + b"}"
    before = deliveries(engine)
    answer = client.post(
        "/webhooks/github",
        content=body,
        headers={
            "X-GitHub-Event": "push",
            "X-GitHub-Delivery": "big",
            "X-Hub-Signature-256": sign(SECRET.encode(), body),
        },
    )
    assert answer.status_code == 413 and deliveries(engine) == before


def test_a_replayed_delivery_is_stored_once(app):
    client, engine = app
    body = (FIXTURES / "issue_comment.created.json").read_bytes()
    headers = {
        "X-GitHub-Event": "issue_comment",
        "X-GitHub-Delivery": str(uuid.uuid4()),
        "X-Hub-Signature-256": sign(SECRET.encode(), body),
    }
    before = deliveries(engine)
    answers = [client.post("/webhooks/github", content=body, headers=headers).status_code for _ in range(5)]
    assert answers == [202] * 5 and deliveries(engine) == before + 1
