"""/healthz means the worker is alive: a worker loop that died, or is stuck in one call past
`worker_stuck_s`, fails it with 503 and the reason; `revert-bisect serve` then exits 1 so that its
supervisor restarts it."""

import os
import re
import subprocess
import sys
import threading
import time
import uuid
from pathlib import Path

from fastapi.testclient import TestClient

from bot.adapters.store.deliveries import Jobs
from bot.app import create_app
from bot.ingress.webhooks.signature import sign
from bot.settings import BotSettings
from tests.support.net import free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "live-secret-" + uuid.uuid4().hex
COMMENT = (ROOT / "tests" / "fixtures" / "github" / "webhooks" / "issue_comment.created.json").read_bytes()
PATIENCE_S = 30  # how long a test waits for /healthz to change before it fails, saying what it saw


class Killed(BaseException):
    """What no `except Exception` catches: the loop itself ends."""


def health_until(client: TestClient, status: int) -> dict:
    deadline = time.monotonic() + PATIENCE_S
    while True:
        r = client.get("/healthz")
        if r.status_code == status:
            return r.json()
        assert time.monotonic() < deadline, f"/healthz still answers {r.status_code} {r.text}, not {status}"
        time.sleep(0.1)


def test_healthz_fails_when_a_worker_loop_dies_and_says_why(tmp_path, monkeypatch):
    kill = threading.Event()
    claim = Jobs.claim

    def claim_or_die(self):
        if kill.is_set():
            raise Killed("the test ended this loop")
        return claim(self)

    monkeypatch.setattr(Jobs, "claim", claim_or_die)
    deaths: list[str] = []
    settings = BotSettings(webhook_secret=SECRET, db=f"sqlite:///{tmp_path / 'bot.db'}")
    with TestClient(create_app(settings, handlers={"command": lambda job: None}, on_worker_death=deaths.append)) as c:
        assert health_until(c, 200) == {"status": "ok", "worker": True}
        kill.set()
        body = health_until(c, 503)
    assert body["status"] == "failing" and body["failed"], body
    said = re.compile(r"worker loop revert-bisect-worker-\d died: Killed: the test ended this loop")
    assert all(said.fullmatch(reason) for reason in body["failed"]), body
    assert deaths and all(said.fullmatch("worker loop " + death) for death in deaths), deaths


def test_a_store_that_does_not_answer_does_not_kill_the_loop(tmp_path, monkeypatch):
    failures = []

    def claim_fails(self):
        failures.append(1)
        raise ConnectionError("the store does not answer")

    monkeypatch.setattr(Jobs, "claim", claim_fails)
    settings = BotSettings(webhook_secret=SECRET, db=f"sqlite:///{tmp_path / 'bot.db'}")
    with TestClient(create_app(settings, handlers={"command": lambda job: None})) as c:
        deadline = time.monotonic() + PATIENCE_S
        while len(failures) < 4:  # both loops have failed to claim, and tried again
            assert time.monotonic() < deadline, "the worker loops stopped claiming"
            time.sleep(0.05)
        assert health_until(c, 200)["status"] == "ok"


def test_healthz_fails_while_a_loop_is_stuck_past_the_bound_and_recovers(tmp_path):
    release, entered = threading.Event(), threading.Event()

    def stuck(job):  # one call that never says it is making progress (bot.observability.heartbeat.beat)
        entered.set()
        release.wait(PATIENCE_S * 2)

    settings = BotSettings(webhook_secret=SECRET, db=f"sqlite:///{tmp_path / 'bot.db'}", worker_stuck_s=2)
    with TestClient(create_app(settings, handlers={"command": stuck})) as c:
        headers = {
            "X-GitHub-Event": "issue_comment",
            "X-GitHub-Delivery": str(uuid.uuid4()),
            "X-Hub-Signature-256": sign(SECRET.encode(), COMMENT),
        }
        assert c.post("/webhooks/github", content=COMMENT, headers=headers).status_code == 202
        assert entered.wait(PATIENCE_S), "the worker never ran the job"
        body = health_until(c, 503)
        assert len(body["failed"]) == 1 and "stuck: no heartbeat for" in body["failed"][0], body
        release.set()
        assert health_until(c, 200)["status"] == "ok"


KILL_THE_LOOP = """
import sys
from bot.adapters.store.deliveries import Jobs

class Killed(BaseException):
    pass

def claim(self):
    raise Killed("the test ended this loop")

Jobs.claim = claim
from bot.cli.main import main
main()
"""


def test_serve_exits_non_zero_saying_why_when_a_worker_loop_dies(tmp_path):
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith("REVERT_BISECT_")},
        "REVERT_BISECT_WEBHOOK_SECRET": SECRET,
        "REVERT_BISECT_GITHUB_TOKEN": "a-token-for-a-github-never-called",
        "REVERT_BISECT_GITHUB_URL": "http://127.0.0.1:9",
        "REVERT_BISECT_POLICIES": str(ROOT / "policies"),
        "XDG_DATA_HOME": str(tmp_path / "d"),
        "XDG_CACHE_HOME": str(tmp_path / "c"),
    }
    proc = subprocess.run(
        [
            sys.executable,
            "-c",
            KILL_THE_LOOP,
            "serve",
            "--port",
            str(free_port()),
            "--db",
            f"sqlite:///{tmp_path}/b.db",
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
    )
    assert proc.returncode == 1, proc.stderr
    last = proc.stderr.strip().splitlines()[-1]
    assert last.startswith("revert-bisect: error: a worker loop stopped (revert-bisect-worker-"), proc.stderr
    assert "died: Killed: the test ended this loop); exiting so that the service is restarted" in last
