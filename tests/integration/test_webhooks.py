"""The webhook service as a real process on loopback, fed GitHub's recorded payloads, signed."""

import json
import os
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import pytest
import sqlalchemy

from bot.ingress.webhooks.signature import sign
from tests.support.net import free_port

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"
PAYLOADS = sorted(FIXTURES.glob("*.json"))
SECRET = "test-secret-" + uuid.uuid4().hex


def event_of(path: Path) -> str:
    return path.name.split(".")[0]


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("serve")
    db = f"sqlite:///{tmp / 'bot.db'}"
    # a port number, not a bound socket: `revert-bisect serve` runs in another process and takes --port
    port = free_port()
    env = {
        **os.environ,
        "REVERT_BISECT_WEBHOOK_SECRET": SECRET,
        "XDG_DATA_HOME": str(tmp / "d"),
        "XDG_CACHE_HOME": str(tmp / "c"),
    }
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--db", db],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    base = f"http://127.0.0.1:{port}"
    # Ready when /healthz answers; a process that exits fails at once with its output. The deadline is for a
    # process that stays up and never answers: on a loaded 2-core machine the imports alone took over 30 s.
    deadline = time.monotonic() + 180
    while True:
        try:
            if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                break
        except httpx.HTTPError:
            pass
        assert proc.poll() is None, proc.stdout.read().decode()
        assert time.monotonic() < deadline, "the service did not start"
        time.sleep(0.1)
    yield base, sqlalchemy.create_engine(db)
    proc.terminate()
    proc.wait(timeout=10)


def post(base, body: bytes, event: str, delivery: str | None = None, signature: str | None = "sign", **headers):
    h = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery or str(uuid.uuid4()),
        "Content-Type": "application/json",
        **headers,
    }
    if signature == "sign":
        h["X-Hub-Signature-256"] = sign(SECRET.encode(), body)
    elif signature is not None:
        h["X-Hub-Signature-256"] = signature
    return httpx.post(base + "/webhooks/github", content=body, headers=h, timeout=10)


def stored(engine, delivery: str) -> int:
    with engine.connect() as conn:
        return conn.execute(
            sqlalchemy.text("SELECT count(*) FROM deliveries WHERE delivery_id = :d"), {"d": delivery}
        ).scalar()


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p.name)
def test_every_recorded_payload_is_accepted_when_signed(server, payload):
    base, engine = server
    delivery = str(uuid.uuid4())
    r = post(base, payload.read_bytes(), event_of(payload), delivery)
    assert r.status_code == (200 if event_of(payload) == "ping" else 202), r.text
    assert stored(engine, delivery) == 1


@pytest.mark.parametrize("payload", PAYLOADS, ids=lambda p: p.name)
@pytest.mark.parametrize("signature", [None, "sha256=" + "0" * 64, "sha1=abc", sign(b"another secret", b"{}")])
def test_unsigned_or_forged_deliveries_are_refused_and_not_stored(server, payload, signature):
    base, engine = server
    delivery = str(uuid.uuid4())
    r = post(base, payload.read_bytes(), event_of(payload), delivery, signature=signature)
    assert r.status_code == 401
    assert stored(engine, delivery) == 0


def test_handled_events_queue_one_job_and_a_redelivery_is_a_no_op(server):
    base, engine = server
    body = (FIXTURES / "workflow_run.completed.json").read_bytes()
    delivery = str(uuid.uuid4())
    first = post(base, body, "workflow_run", delivery)
    again = post(base, body, "workflow_run", delivery)
    assert first.status_code == 202 and first.json()["handler"] == "nightly_failure"
    assert again.status_code == 202 and "already received" in again.json()["message"]
    with engine.connect() as conn:
        jobs = conn.execute(
            sqlalchemy.text(
                "SELECT j.handler, j.state FROM jobs j JOIN deliveries d ON d.id = j.delivery_id "
                "WHERE d.delivery_id = :d"
            ),
            {"d": delivery},
        ).all()
    assert [tuple(j) for j in jobs] == [("nightly_failure", "queued")]


def test_unhandled_events_are_acknowledged_and_ignored(server):
    base, engine = server
    r = post(base, (FIXTURES / "push.json").read_bytes(), "push")
    assert r.status_code == 202 and r.json()["message"].startswith("ignored")


@pytest.mark.parametrize(
    "body, headers, status",
    [
        (b"{not json", {}, 400),
        (b"[1, 2]", {}, 400),
        (b"\xff\xfe", {}, 400),
        (b"{}", {"X-GitHub-Event": ""}, 400),
        (b"x" * (11 * 1024 * 1024), {}, 413),
    ],
)
def test_broken_requests_get_a_4xx(server, body, headers, status):
    base, engine = server
    delivery = str(uuid.uuid4())
    r = post(base, body, headers.pop("X-GitHub-Event", "issue_comment") or "", delivery, **headers)
    assert r.status_code == status
    assert stored(engine, delivery) == 0


def test_ping_answers_pong(server):
    base, _ = server
    body = (FIXTURES / "ping.json").read_bytes()
    r = post(base, body, "ping")
    assert r.status_code == 200 and r.json()["message"] == "pong" and r.json()["zen"] == json.loads(body)["zen"]


def test_serve_refuses_to_start_without_a_real_secret(tmp_path):
    env = {**os.environ, "REVERT_BISECT_WEBHOOK_SECRET": "changeme"}
    r = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "serve", "--db", f"sqlite:///{tmp_path / 'x.db'}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert r.returncode == 2 and "REVERT_BISECT_WEBHOOK_SECRET" in r.stderr and "Traceback" not in r.stderr
