"""GitHub goes away in the middle of a story and comes back: the bisection waits instead of failing, a job that
meets the outage is parked (on the dashboard, in /metrics) instead of burning its attempts, the bot asks GitHub
only a few times while it is away, and the story ends with the revert PR once GitHub answers again."""

from __future__ import annotations

import threading
import time

import httpx
import sqlalchemy
import urllib3.util.connection
from prometheus_client.parser import text_string_to_metric_families

import runners.git
from bot.observability.reachability import of
from tests.support.sandbox import wait_for
from tests.support.world import comments, deliver_comment, deliver_webhook, gh, open_reverts

OUTAGE_S = 30.0
# What the bot may send while GitHub is away: before it knows (a few requests, each tried 3 times by the transport),
# then one trial or probe per backoff period (1, 2, 4, 8, 16 s: about five in 30 s). Today's code: every poll of
# every run in flight, each tried 11 times, every half second.
MAX_CONNECTIONS = 40
MAX_GIT_FETCHES = 2


class Attempts:
    """Connections this process opens to GitHub (the sandbox's API and blob host), counted where urllib3 opens
    them: PyGithub with its transport retries, the downloads and the worker's probe; and the bot's git fetches."""

    def __init__(self, monkeypatch, bot_port: int):
        self.connections = 0
        self.fetches = 0
        self._lock = threading.Lock()
        connect, sync = urllib3.util.connection.create_connection, runners.git.sync_clone

        def counted_connect(address, *args, **kwargs):
            if int(address[1]) != bot_port:  # the sandbox's webhooks to the bot are not the bot's requests
                with self._lock:
                    self.connections += 1
            return connect(address, *args, **kwargs)

        def counted_sync(*args, **kwargs):
            with self._lock:
                self.fetches += 1
            return sync(*args, **kwargs)

        monkeypatch.setattr(urllib3.util.connection, "create_connection", counted_connect)
        monkeypatch.setattr(runners.git, "sync_clone", counted_sync)

    def snapshot(self) -> tuple[int, int]:
        with self._lock:
            return self.connections, self.fetches


def metrics(world) -> dict:
    out = {}
    for family in text_string_to_metric_families(httpx.get(world["bot"] + "/metrics", timeout=10).text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_github_going_away_mid_story_parks_what_meets_it_and_the_story_completes_when_it_is_back(world, monkeypatch):
    scenario, repo, watch = world["scenario"], world["seeded"].repo, world["watch"]
    followup = scenario.followup["number"]
    engine = sqlalchemy.create_engine(f"sqlite:///{world['tmp'] / 'bot.db'}")

    def query(sql: str):
        with engine.connect() as conn:
            return conn.execute(sqlalchemy.text(sql)).all()

    attempts = Attempts(monkeypatch, int(world["bot"].rsplit(":", 1)[1]))
    deliver_comment(world, "sandbox-maintainer", f"/revert-bisect decode-cache-hit good={scenario.good[:12]}", followup)
    wait_for(lambda: query("SELECT count(*) FROM steps WHERE state = 'done'")[0][0] >= 2, timeout=240, bot=watch)
    # A question asked on GitHub just before it goes away; its webhook reaches the bot during the outage.
    question = "/revert-bisect status"
    asked = gh(world, "POST", f"/repos/{repo}/issues/{followup}/comments", json={"body": question}).json()

    before = attempts.snapshot()
    started = time.monotonic()
    world["take_github_away"]()
    try:
        with httpx.Client() as client:  # the sandbox really refuses connections now
            try:
                client.get(world["base"] + "/rate_limit", timeout=2)
                raise AssertionError("the sandbox still answers")
            except httpx.ConnectError:
                pass
        deliver_webhook(world, asked, "sandbox-maintainer", question, followup)
        seen = wait_for(
            lambda: (
                (m := metrics(world))[("revert_bisect_jobs", (("state", "parked"),))] >= 1
                and m[("revert_bisect_github_reachable", ())] == 0
                and m
            ),
            timeout=60,
        )
        page = httpx.get(world["bot"] + "/", timeout=10).text
        assert "Waiting for GitHub: " in page and "GitHub unreachable" in page
        # the status question's job, and the bisection's own when a write of it met the outage: none used up an attempt
        parked = query("SELECT j.handler, j.attempts, j.waits FROM jobs j WHERE j.state = 'parked' ORDER BY j.id")
        assert ("command", 1, 1) in parked and all(attempts == 1 and waits >= 1 for _, attempts, waits in parked)
        assert f"Waiting for GitHub: {len(parked)} job" in page
        time.sleep(max(0.0, OUTAGE_S - (time.monotonic() - started)))
        during = attempts.snapshot()
    finally:
        world["bring_github_back"]()
    outage_s = time.monotonic() - started
    connections, fetches = during[0] - before[0], during[1] - before[1]
    reach = of(world["base"]).seen()  # the sandbox's host: the GitHub this bot talks to
    print(
        f"\nGitHub away for {outage_s:.0f} s: {connections} connection attempt(s) to it, {fetches} git fetch(es), "
        f"{reach.probes[False]} unanswered probe(s), {reach.short_circuited} request(s) not sent; "
        f"{int(seen[('revert_bisect_jobs', (('state', 'parked'),))])} job(s) parked"
    )
    assert connections <= MAX_CONNECTIONS and fetches <= MAX_GIT_FETCHES
    assert reach.short_circuited > 0  # the bisection kept asking, and the breaker kept it off the network

    pulls = wait_for(lambda: open_reverts(world), timeout=300, bot=watch)
    assert len(pulls) == 1 and pulls[0]["body"].startswith(f"Reverts {repo}#{scenario.culprit_pr}")
    reply = f"revert-bisect:reply-{asked['id']}"  # the marker of the bot's answer to that comment
    answer = wait_for(lambda: [c for c in comments(world, followup) if reply in c["body"]], timeout=120)
    assert "`decode-cache-hit`" in answer[0]["body"]
    wait_for(watch.settled, timeout=60, bot=watch)  # the answer is written before its job is marked done
    assert len(answer) == 1  # the parked question was answered once GitHub was back
    jobs = query("SELECT state, error FROM jobs ORDER BY id")
    assert [state for state, _ in jobs] == ["done", "done"], jobs
    after = metrics(world)
    assert after[("revert_bisect_jobs", (("state", "parked"),))] == 0
    assert after[("revert_bisect_github_reachable", ())] == 1
    assert after[("revert_bisect_github_outages_total", ())] >= 1
