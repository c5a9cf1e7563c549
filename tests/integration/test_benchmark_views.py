"""A bisection of a metric without a threshold (a benchmark) is shown as one: the dashboard's chart legend says
"benchmark (no threshold)" where a threshold's line would be, and its API gives the threshold as null."""

from __future__ import annotations

from pydantic import SecretStr
from starlette.testclient import TestClient

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import NewStep, StepReport, Store
from bot.app import create_app
from bot.service import setup
from bot.service.config import BisectConfig
from bot.settings import BotSettings
from scenarios.synthetic import build


def test_a_benchmarks_chart_says_it_has_no_threshold(tmp_path):
    db = f"sqlite:///{tmp_path / 'store.db'}"
    store = Store(connect(db))
    repo = build(tmp_path / "repo", 8, 4)
    config = BisectConfig(command=tuple(repo.command()), metric_regex=r"tput=(?P<value>[0-9.]+)", higher_is_worse=False)
    bid = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, config).id
    good, bad = store.add_steps(bid, [NewStep(repo.good, "calibrate", 1), NewStep(repo.bad, "calibrate", 1)])
    store.finish_step(good, StepReport(0, 4281.36, None, "good", "local/wt-0", 1.0, "log", None, None))
    store.finish_step(bad, StepReport(0, 4110.02, None, "bad", "local/wt-1", 1.0, "log", None, None))

    app = create_app(BotSettings(webhook_secret="whsec-benchmark-tests", db=db, dashboard_token=SecretStr("t" * 24)))
    client = TestClient(app, client=("127.0.0.1", 50123))
    assert client.get(f"/api/bisections/{bid}").json()["threshold"] is None
    html = client.get(f"/bisections/{bid}").text
    assert "benchmark (no threshold)" in html and 'data-line="threshold"' not in html
