"""Jobs parked while GitHub does not answer, as an operator sees them: the dashboard's list page says how many
wait for GitHub, since when and why, and /metrics counts them with the oldest one's age and GitHub's reachability."""

from __future__ import annotations

import pytest
from prometheus_client.parser import text_string_to_metric_families
from starlette.testclient import TestClient

from bot.adapters.store.db import connect
from bot.adapters.store.deliveries import Deliveries, Incoming, Jobs
from bot.app import create_app
from bot.observability.reachability import of
from bot.settings import BotSettings
from tests.support import ROOT


@pytest.fixture
def github_reach():
    """The reachability of the GitHub the app is configured for (BotSettings' default, github.com's API)."""
    reach = of("https://api.github.com")
    reach.reset()
    yield reach
    reach.reset()


def scrape(client) -> dict:
    out = {}
    for family in text_string_to_metric_families(client.get("/metrics").text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def test_parked_jobs_are_on_the_dashboard_and_in_metrics(tmp_path, github_reach):
    db = f"sqlite:///{tmp_path / 'bot.db'}"
    engine = connect(db)
    deliveries, jobs = Deliveries(engine), Jobs(engine)
    for i in range(3):
        deliveries.record(Incoming(f"d-{i}", "issue_comment", "created", "acme/engine", "command", {"i": i}))
    for _ in range(2):
        job = jobs.claim()
        jobs.park(job.id, "GitHub unreachable: ConnectionError: [Errno 111] Connection refused")
    jobs.later(jobs.claim().id, "KeyError: 'x'", after_s=600)  # a backoff: queued, held back
    github_reach.mark_down()
    app = create_app(BotSettings(webhook_secret="s", db=db, policies=ROOT / "policies"), handlers={})
    with TestClient(app, client=("127.0.0.1", 50123)) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert "Waiting for GitHub: 2 jobs parked" in page.text
        assert page.text.count("Connection refused") == 2 and "acme/engine" in page.text
        samples = scrape(client)
    assert samples[("revert_bisect_jobs", (("state", "parked"),))] == 2
    assert samples[("revert_bisect_jobs", (("state", "queued"),))] == 1
    assert samples[("revert_bisect_jobs_backing_off", ())] == 1
    assert samples[("revert_bisect_oldest_parked_job_age_seconds", ())] >= 0
    assert samples[("revert_bisect_github_reachable", ())] == 0
    assert samples[("revert_bisect_github_outages_total", ())] == 1
    assert jobs.resume_parked() == 2
    github_reach.answered()
    with TestClient(app, client=("127.0.0.1", 50123)) as client:
        assert "Waiting for GitHub" not in client.get("/").text
        samples = scrape(client)
    assert samples[("revert_bisect_jobs", (("state", "parked"),))] == 0
    assert samples[("revert_bisect_github_reachable", ())] == 1
