"""The benchmarks' series end to end: the bot served with a performance policy for the sandbox's repository, and its
`workflow_run` webhooks all it gets. The scheduled runs that completed before it started are filled in at start (the
backfill); each later run's signed webhook -- a green one, then a red one whose Qwen2 benchmark crashed -- adds its
readings; the dashboard's series page and its API show them (tests/integration/test_series_intake.py holds the
re-run attempt and the fork's run)."""

from __future__ import annotations

import json
import sys
import uuid

import httpx
import pytest
import sqlalchemy

from bot.app import create_app
from bot.settings import BotSettings
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.integration.test_series_intake import BS64, NIGHTLY, PERF, PERF_JOB, QWEN64, ROOT, WORKFLOW, git, plan
from tests.support.net import serving
from tests.support.perf_logs import outputs_of
from tests.support.sandbox import BotWatch, wait_for

SECRET = "series-secret-" + uuid.uuid4().hex


@pytest.fixture
def world(tmp_path):
    build(tmp_path / "scenario", commits=12, seed=2)
    clone = tmp_path / "scenario" / json.loads((tmp_path / "scenario" / "scenario.json").read_text())["repo"]
    planned, perf = tmp_path / "plan.json", tmp_path / "perf.py"
    perf.write_text(PERF)
    planned.write_text("{}")
    (clone / WORKFLOW).parent.mkdir(parents=True, exist_ok=True)
    (clone / WORKFLOW).write_text(
        NIGHTLY.format(python=sys.executable, perf=perf, plan=planned, root=ROOT, perf_job=PERF_JOB)
    )
    git(clone, "add", WORKFLOW)
    git(clone, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "-q", "-m", "ci: nightly")
    shas = git(clone, "rev-list", "--first-parent", "--reverse", "main").split()
    state = SandboxState(tmp_path / "github")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    policies = tmp_path / "policies"
    policies.mkdir()
    policy = (ROOT / "policies" / "sglang-perf.yaml").read_text()
    (policies / "perf.yaml").write_text(policy.replace("repository: sgl-project/sglang", f"repository: {seeded.repo}"))
    base, stop = run_in_thread(state)
    yield dict(
        state=state,
        repo=seeded.repo,
        shas=shas,
        plan=planned,
        base=base,
        tmp=tmp_path,
        policies=policies,
        token=seeded.tokens["revert-bisect-bot"],
    )
    state.actions.shutdown()
    stop()


def started(world, sha: str) -> int:
    state = world["state"]
    run = state.start_run(world["repo"], WORKFLOW, sha, event="schedule", branch_of_sha="main")
    state.actions.wait(run, 120)
    return run


def points(db: str) -> dict[int, dict[str, float | None]]:
    """Run id -> metric -> value, as the bot stored them."""
    engine = sqlalchemy.create_engine(db)
    try:
        with engine.connect() as conn:
            if not sqlalchemy.inspect(conn).has_table("series_points"):
                return {}
            rows = conn.execute(sqlalchemy.text("SELECT run_id, metric, value FROM series_points")).all()
    finally:
        engine.dispose()
    out: dict[int, dict[str, float | None]] = {}
    for run_id, metric, value in rows:
        out.setdefault(run_id, {})[metric] = value
    return out


def test_runs_before_the_start_are_filled_in_and_each_webhook_adds_its_run(world):
    shas, repo = world["shas"], world["repo"]
    for k in (1, 2, 3):
        plan(world, shas[k], outputs_of(1.0 + k / 1000))
    before = [started(world, shas[k]) for k in (1, 2, 3)]  # completed while no bot watched
    db = f"sqlite:///{world['tmp'] / 'bot.db'}"
    settings = BotSettings(
        webhook_secret=SECRET,
        db=db,
        policies=world["policies"],
        github_url=world["base"],
        github_token=world["token"],
        workspace=world["tmp"] / "clones",
    )
    with serving(create_app(settings)) as bot:
        watch = BotWatch(db, bot.thread.is_alive)
        stored = wait_for(lambda: set(before) <= set(points(db)) and points(db), timeout=60, bot=watch)
        assert stored[before[0]][BS64] == outputs_of(1.001)["llama-3.1-8b"][64]  # the backfill at start

        world["state"].add_hook(bot.url + "/webhooks/github", SECRET)
        plan(world, shas[4], outputs_of(0.95))
        crashed = outputs_of(0.95)
        del crashed["qwen2-57b-a14b"]
        plan(world, shas[5], crashed)
        green, red = started(world, shas[4]), started(world, shas[5])
        stored = wait_for(lambda: {green, red} <= set(points(db)) and points(db), timeout=60, bot=watch)
        assert stored[green][QWEN64] == outputs_of(0.95)["qwen2-57b-a14b"][64]
        assert stored[red][QWEN64] is None and stored[red][BS64] == crashed["llama-3.1-8b"][64]
        delivered = {d["run_id"]: d["status"] for d in world["state"].hook_deliveries if d["action"] == "completed"}
        assert delivered == {green: 202, red: 202}  # the webhooks were all the bot got of them

        page = f"/series/{repo}/text-models-perf/{BS64}"
        data = httpx.get(bot.url + "/api" + page, timeout=30).json()
        assert [p["run_id"] for p in data["points"]] == [*before, green, red]
        assert [p["sha"] for p in data["points"]] == [shas[k] for k in (1, 2, 3, 4, 5)]
        index = httpx.get(bot.url + "/api/series", timeout=30).json()["items"]
        assert {i["metric"] for i in index} == {
            f"{m}_bs{b}_output_throughput" for m in ("llama-3.1-8b", "qwen2-57b-a14b") for b in (1, 8, 16, 64)
        }
        html = httpx.get(bot.url + page, timeout=30).text
        assert html.count('class="point-row"') == 5 and 'class="chart series-chart"' in html
