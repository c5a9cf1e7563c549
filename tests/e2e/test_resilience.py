"""Faults that must lose nothing: the store going away under the webhook endpoint, a runner's test
process killed mid-step."""

from __future__ import annotations

import socket
import subprocess
import threading
import uuid
from pathlib import Path

import pytest
import sqlalchemy
from fastapi.testclient import TestClient

from bot.adapters.dispatch.local_pool import LocalPool
from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.app import create_app
from bot.ingress.webhooks.signature import sign
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.driver import Driver
from bot.settings import BotSettings

SECRET = "resilience-" + uuid.uuid4().hex
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"


class Proxy:
    """A TCP forwarder to PostgreSQL that can be cut (every connection dropped) and restored."""

    def __init__(self, target: tuple[str, int]):
        self.target = target
        self.port = None
        self._listener = None
        self._conns: list[socket.socket] = []

    def start(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", self.port or 0))
        self.port = self._listener.getsockname()[1]
        threading.Thread(target=self._accept, args=(self._listener,), daemon=True).start()

    def cut(self) -> None:
        try:
            self._listener.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in accept(); close alone does not
        except OSError:
            pass
        self._listener.close()
        for conn in self._conns:
            try:
                conn.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
            conn.close()
        self._conns.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            upstream = socket.create_connection(self.target)
            self._conns += [client, upstream]
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    @staticmethod
    def _pipe(a: socket.socket, b: socket.socket) -> None:
        try:
            while data := a.recv(65536):
                b.sendall(data)
        except OSError:
            pass
        finally:
            for s in (a, b):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass


@pytest.mark.postgres
def test_an_unreachable_store_refuses_deliveries_with_503_and_recovers_without_restart(pg_url):
    url = sqlalchemy.engine.make_url(pg_url)
    proxy = Proxy((url.host, url.port or 5432))
    proxy.start()
    proxied = url.set(port=proxy.port).render_as_string(hide_password=False)
    body = (FIXTURES / "issue_comment.created.json").read_bytes()

    def deliver(client, delivery: str) -> int:
        return client.post(
            "/webhooks/github",
            content=body,
            headers={
                "X-GitHub-Event": "issue_comment",
                "X-GitHub-Delivery": delivery,
                "X-Hub-Signature-256": sign(SECRET.encode(), body),
            },
        ).status_code

    def stored() -> list[str]:
        with sqlalchemy.create_engine(pg_url).connect() as conn:
            return [r[0] for r in conn.execute(sqlalchemy.text("SELECT delivery_id FROM deliveries ORDER BY id"))]

    with TestClient(create_app(BotSettings(webhook_secret=SECRET, db=proxied), handlers={})) as client:
        assert deliver(client, "before") == 202
        proxy.cut()
        assert deliver(client, "during") == 503  # GitHub marks it failed; it can be redelivered
        assert client.get("/readyz").status_code == 503
        proxy.start()  # same port: the store is back
        assert deliver(client, "after") == 202
        assert deliver(client, "during") == 202  # the redelivery is taken now
        assert client.get("/readyz").status_code == 200
    assert stored() == ["before", "after", "during"]


def test_a_test_process_killed_mid_step_is_infra_retried_and_never_evidence(tmp_path):
    """The runner's process vanishes (SIGKILL) the first time commit 4 (the parent) is tested: that run is an infra
    result, the commit is tested again, and the culprit is still found."""
    repo_dir = tmp_path / "repo"
    repo_dir.mkdir()

    def git(*a):
        return subprocess.run(
            ["git", "-C", str(repo_dir), *a], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    shas = []
    for i in range(8):
        (repo_dir / "n.txt").write_text(f"{i}\n")
        git("add", "-A")
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", f"commit {i}")
        shas.append(git("rev-parse", "HEAD"))
    marker = tmp_path / "killed-once"
    script = tmp_path / "test.sh"
    script.write_text(f"""#!/bin/sh
n=$(cat n.txt)
if [ "$n" = 4 ] && [ ! -e {marker} ]; then touch {marker}; kill -9 $$; fi
[ "$n" -lt 5 ]
""")
    script.chmod(0o755)
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    repo = GitRepo(repo_dir)
    loaded = setup.create(store, repo, shas[0], shas[-1], BisectConfig(command=(str(script),), workers=3))
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, LocalPool(repo, 3, tmp_path / "wt")).run()
    assert marker.exists() and outcome.culprit == shas[5]
    steps = [s for s in store.get(loaded.id).steps if s.sha == shas[4]]
    killed = [s for s in steps if s.infra_reason]
    assert [(s.verdict, s.infra_reason) for s in killed] == [("infra", "killed by signal 9")]
    assert any(s.verdict == "good" for s in steps)  # tested again, and that run is the evidence
