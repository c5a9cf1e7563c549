"""`serve` SIGKILLed at 20 random points of one end-to-end bisection, restarted each time: the same
culprit, exactly one revert PR, no duplicated comment, no step dispatched or run twice."""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import time
import uuid
from pathlib import Path

import httpx
import sqlalchemy

from bot.ingress.webhooks.signature import sign
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.net import free_port
from tests.support.sandbox import BotWatch, github_get, wait_for

ROOT = Path(__file__).resolve().parents[2]
SECRET = "crash-secret-" + uuid.uuid4().hex
KILLS = 20


def test_twenty_sigkills_change_nothing(tmp_path):
    scenario = build(tmp_path / "scenario", commits=64, seed=7)
    state = SandboxState(tmp_path / "sandbox")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    # 64 commits and one GPU runner, as a small team has: the bisection's runs queue for it, so the story holds
    # twenty kills with room to spare (60 kills at denser points fitted, measured alone on this machine; at 32 commits
    # the story ended after 19 kills twice under CI's load) -- a longer story, not denser kills: a kill sooner after
    # a restart than the bot's resume takes would only ever test the resume
    state.actions.concurrency = 1
    base, stop_sandbox = run_in_thread(state)
    # a port number, not a bound socket: the bot runs in another process (it is killed) and takes --port
    port, db = free_port(), f"sqlite:///{tmp_path / 'bot.db'}"
    env = {
        **os.environ,
        "REVERT_BISECT_WEBHOOK_SECRET": SECRET,
        "REVERT_BISECT_GITHUB_URL": base,
        "REVERT_BISECT_GITHUB_TOKEN": seeded.tokens["revert-bisect-bot"],
        "REVERT_BISECT_POLICIES": str(ROOT / "policies"),
        "REVERT_BISECT_WORKSPACE": str(tmp_path / "clones"),
        "XDG_CACHE_HOME": str(tmp_path / "cache"),
        "REVERT_BISECT_JOB_LEASE_S": "2",
    }
    log = open(tmp_path / "bot.log", "ab")

    def start() -> subprocess.Popen:
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--db", db],
            env=env,
            stdout=log,
            stderr=log,
        )
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None and time.monotonic() < deadline, "the bot did not start"
            try:
                if httpx.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200:
                    return proc
            except httpx.HTTPError:
                time.sleep(0.1)

    maintainer = {"Authorization": f"token {seeded.tokens['sandbox-maintainer']}"}
    followup, culprit_pr = scenario.followup["number"], scenario.culprit_pr

    def comments(number: int) -> list[str]:
        return [
            c["body"]
            for c in github_get(
                base,
                seeded.tokens["sandbox-maintainer"],
                f"/repos/{seeded.repo}/issues/{number}/comments",
                per_page=100,
            )
        ]

    def reverts() -> list[dict]:
        return [
            p
            for p in github_get(base, seeded.tokens["sandbox-maintainer"], f"/repos/{seeded.repo}/pulls", state="all")
            if p["title"].startswith("Revert ")
        ]

    def story_done() -> bool:
        return (
            bool(reverts())
            and any("Revert PR" in c for c in comments(followup))
            and any("#" in c for c in comments(culprit_pr))
        )

    bot = start()
    watch = BotWatch(db, lambda: bot.poll() is None, [tmp_path / "bot.log"])  # the bot running now
    try:
        text = f"/revert-bisect decode-cache-hit good={scenario.good[:12]}"
        comment = httpx.post(
            f"{base}/repos/{seeded.repo}/issues/{followup}/comments",
            headers=maintainer,
            json={"body": text},
            timeout=10,
        ).json()
        payload = json.loads((ROOT / "tests/fixtures/github/webhooks/issue_comment.created.json").read_text())
        payload["repository"]["full_name"] = seeded.repo
        payload["issue"]["number"] = followup
        payload["comment"].update(
            id=comment["id"], body=text, user={**payload["comment"]["user"], "login": "sandbox-maintainer"}
        )
        raw = json.dumps(payload).encode()
        assert (
            httpx.post(
                f"http://127.0.0.1:{port}/webhooks/github",
                content=raw,
                timeout=10,
                headers={
                    "X-GitHub-Event": "issue_comment",
                    "X-GitHub-Delivery": str(uuid.uuid4()),
                    "X-Hub-Signature-256": sign(SECRET.encode(), raw),
                },
            ).status_code
            == 202
        )

        rng, kills = random.Random(20), 0
        while kills < KILLS and not story_done():
            time.sleep(
                rng.uniform(0.1, 0.9)
            )  # a random point: calibrating, searching, confirming, reverting, publishing
            bot.send_signal(signal.SIGKILL)
            bot.wait()
            kills += 1
            bot = start()
        wait_for(story_done, timeout=420, bot=watch)
        wait_for(watch.settled, timeout=60, bot=watch)  # every job in flight (a killed bot's, taken again) has landed

        assert kills == KILLS, f"the story ended after {kills} kills; make the points denser"
        engine = sqlalchemy.create_engine(db)
        with engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT status, outcome FROM bisections")).all()
            steps = conn.execute(sqlalchemy.text("SELECT runner_ref, state FROM steps")).all()
        assert len(rows) == 1 and rows[0][0] == "found"
        assert json.loads(rows[0][1])["culprit"] == scenario.culprit
        assert len(reverts()) == 1
        for number in (culprit_pr, followup):
            bodies = comments(number)
            assert len(bodies) == len(set(bodies)), f"a comment was duplicated on #{number}"
        runs = [r for r in state.actions.runs.values() if "revert-bisect step" in r.display_title]
        # Each step a killed bot left running was adopted by the next one: its run, still going on the runner, found
        # by the step's ref and read (or dispatched then, if the kill came before its dispatch). None was lost.
        assert [step_state for _, step_state in steps if step_state == "lost"] == []
        for ref, step_state in steps:
            dispatched = sum(f"[{ref}]" in r.display_title for r in runs)
            # A step that ran was dispatched exactly once; one no longer needed once adopted is cancelled, whether
            # its dispatch went out or not: never twice.
            wanted = (1,) if step_state == "done" else (0, 1)
            assert dispatched in wanted, f"step {ref} ({step_state}) was dispatched {dispatched} times"
        assert len(runs) == sum(1 for ref, _ in steps if any(f"[{ref}]" in r.display_title for r in runs))
    finally:
        bot.kill()
        bot.wait()
        state.actions.shutdown()
        stop_sandbox()
