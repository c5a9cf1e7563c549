"""Three `revert-bisect serve` replicas on one PostgreSQL database, fed the same deliveries: each
delivery is processed once, the one bisection runs once, and each of its steps is dispatched once."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
import uuid
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import httpx
import pytest
import sqlalchemy

from bot.ingress.webhooks.signature import sign
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.net import free_port
from tests.support.sandbox import BotWatch, github_get, wait_for
from tests.support.world import DECLARED_DETERMINISTIC, policies_with

pytestmark = pytest.mark.postgres

ROOT = Path(__file__).resolve().parents[2]
HOOKS = ROOT / "tests" / "fixtures" / "github" / "webhooks"
SECRET = "replica-secret-" + uuid.uuid4().hex
NOISE = [
    "push.json",
    "status.json",
    "check_run.completed.json",
    "check_suite.completed.json",
    "pull_request.closed.json",
    "workflow_job.completed.failure.with-organization.json",
    "workflow_dispatch.json",
    "workflow_run.completed.json",
    "issue_comment.edited.json",
]


def post(url: str, event: str, delivery: str, payload: dict) -> int:
    raw = json.dumps(payload).encode()
    headers = {
        "X-GitHub-Event": event,
        "X-GitHub-Delivery": delivery,
        "X-Hub-Signature-256": sign(SECRET.encode(), raw),
        "Content-Type": "application/json",
    }
    return httpx.post(url + "/webhooks/github", content=raw, headers=headers, timeout=30).status_code


def test_three_replicas_process_each_delivery_once_and_dispatch_each_step_once(tmp_path, pg_url):
    scenario = build(tmp_path / "scenario", commits=24, seed=3)
    state = SandboxState(tmp_path / "sandbox")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    base, stop_sandbox = run_in_thread(state)
    policies = policies_with(tmp_path, DECLARED_DETERMINISTIC)  # the story is the replicas', not the search's
    replicas, procs = [], []
    try:
        for n in range(3):
            # a port number, not a bound socket: each replica is another process and takes --port
            port = free_port()
            env = {
                **os.environ,
                "REVERT_BISECT_WEBHOOK_SECRET": SECRET,
                "REVERT_BISECT_GITHUB_URL": base,
                "REVERT_BISECT_GITHUB_TOKEN": seeded.tokens["revert-bisect-bot"],
                "REVERT_BISECT_POLICIES": str(policies),
                "REVERT_BISECT_WORKSPACE": str(tmp_path / f"clones-{n}"),
                "XDG_CACHE_HOME": str(tmp_path / f"cache-{n}"),
            }
            log = open(tmp_path / f"replica-{n}.log", "w")
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--db", pg_url],
                    env=env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )
            replicas.append(f"http://127.0.0.1:{port}")
        for url, proc in zip(replicas, procs):
            wait_for(lambda proc=proc, url=url: proc.poll() is not None or _up(url), timeout=60)
            assert proc.poll() is None, (tmp_path / "replica-0.log").read_text()[-2000:]

        # the maintainer's command, and 199 other deliveries; a tenth of them delivered again to another replica
        followup = scenario.followup["number"]
        command_text = f"/revert-bisect decode-cache-hit good={scenario.good[:12]}"
        comment = httpx.post(
            f"{base}/repos/{seeded.repo}/issues/{followup}/comments",
            json={"body": command_text},
            timeout=10,
            headers={"Authorization": f"token {seeded.tokens['sandbox-maintainer']}"},
        ).json()
        command = json.loads((HOOKS / "issue_comment.created.json").read_text())
        command["repository"]["full_name"] = seeded.repo
        command["issue"]["number"] = followup
        command["comment"].update(
            id=comment["id"], body=command_text, user={**command["comment"]["user"], "login": "sandbox-maintainer"}
        )
        rng = random.Random(11)
        deliveries = [("issue_comment", str(uuid.uuid4()), command)]
        for _ in range(199):
            name = rng.choice(NOISE)
            deliveries.append((name.split(".")[0], str(uuid.uuid4()), json.loads((HOOKS / name).read_text())))
        sends = [(replicas[i % 3], *d) for i, d in enumerate(deliveries)]
        sends += [(replicas[(i + 1) % 3], *deliveries[i]) for i in rng.sample(range(200), 20)]
        sends += [(replicas[1], *deliveries[0]), (replicas[2], *deliveries[0])]  # the command, redelivered twice
        rng.shuffle(sends)
        with ThreadPoolExecutor(12) as pool:
            codes = list(pool.map(lambda s: post(*s), sends))
        assert set(codes) <= {200, 202}, codes

        engine = sqlalchemy.create_engine(pg_url)
        watch = BotWatch(
            pg_url, lambda: all(p.poll() is None for p in procs), [tmp_path / f"replica-{n}.log" for n in range(3)]
        )

        def found():
            with engine.connect() as conn:
                return conn.execute(sqlalchemy.text("SELECT status FROM bisections WHERE status = 'found'")).all()

        assert wait_for(found, timeout=420, bot=watch) == [("found",)]
        wait_for(watch.settled, timeout=60, bot=watch)
        with engine.connect() as conn:
            q = lambda sql: conn.execute(sqlalchemy.text(sql)).all()  # noqa: E731
            assert q("SELECT count(*) FROM deliveries") == [(200,)]
            jobs = q("SELECT state, attempts FROM jobs")
            assert jobs and all(j == ("done", 1) for j in jobs), (
                jobs
            )  # each handled delivery processed once, first time
            assert q("SELECT count(*) FROM bisections") == [(1,)]
            steps = q("SELECT runner_ref, state FROM steps")
        runs = [r for r in state.actions.runs.values() if "revert-bisect step" in r.display_title]
        for ref, _ in steps:
            assert sum(f"[{ref}]" in r.display_title for r in runs) == 1, f"step {ref} dispatched more than once"
        assert len(runs) == len(steps)
        pulls = github_get(base, seeded.tokens["sandbox-maintainer"], f"/repos/{seeded.repo}/pulls", state="open")
        assert len([p for p in pulls if p["title"].startswith("Revert ")]) == 1
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
        state.actions.shutdown()
        stop_sandbox()


def _up(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False
