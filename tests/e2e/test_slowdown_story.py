"""A slowdown end to end, through the webhook path on the sandbox: the miniature with its performance nightly
(scenarios.mamba_track_boundary built with slowdown=True), the bot served with the accuracy policy and the
performance one (policies/perf/example-perf.yaml, `on_slowdown: comment`), and its `workflow_run` webhooks all it
gets. The nights before the slow commit are a flat history: the bot stores their readings and writes nothing to
GitHub. The nights after it shift the series: the bot finds the change point, bisects the commits between the night
before and the night after on the sandbox's self-hosted runner (the sampled search, CI's two readings free), proves
the culprit by the A/B, and puts the evidence on the culprit PR -- and nothing else.

The benchmark's device clock is drawn from MINI_SGLANG_BENCH_SEED and each run's id (the runner's environment), so
the story reads the same numbers every time it is told; its spread is 1% here, for fewer runs on the bisect runner."""

from __future__ import annotations

import shutil

import httpx
import pytest
import sqlalchemy

from tests.support import ROOT
from tests.support.sandbox import wait_for
from tests.support.world import SECRET, comments, gh, sandbox_and_bot

PERF = ".github/workflows/nightly-perf.yml"
EVERY = 2  # commits between two nights


@pytest.fixture
def world(tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    shutil.copy(ROOT / "policies" / "example.yaml", policies)
    shutil.copy(ROOT / "policies" / "perf" / "example-perf.yaml", policies)
    yield from sandbox_and_bot(tmp_path, policies=policies, scenario_kw={"slowdown": True})


def nights(world, shas: list[str]) -> list[int]:
    """The performance nightly at each commit, started in order (the series' order), each waited for."""
    state, repo = world["state"], world["seeded"].repo
    runs = [state.start_run(repo, PERF, sha, event="schedule", branch_of_sha="main") for sha in shas]
    for run in runs:
        done = state.actions.wait(run, 120)
        failed = [j for j in done.latest_jobs() if j.conclusion != "success"]
        assert done.conclusion == "success", "\n".join(f"{j.name}: {j.conclusion}\n{j.text[-3000:]}" for j in failed)
    return runs


def stored_runs(world) -> set[int]:
    engine = sqlalchemy.create_engine(f"sqlite:///{world['tmp'] / 'bot.db'}")
    try:
        with engine.connect() as conn:
            return {r for (r,) in conn.execute(sqlalchemy.text("SELECT DISTINCT run_id FROM series_points"))}
    finally:
        engine.dispose()


def writes(world) -> int:
    """Requests that write to GitHub (a git fetch's POST reads)."""
    return sum(
        n
        for (method, path), n in world["state"].rates.calls.items()
        if method not in ("GET", "HEAD") and not path.endswith("/git-upload-pack")
    )


def everything_written(world) -> tuple:
    repo = world["seeded"].repo
    issues = gh(world, "GET", f"/repos/{repo}/issues", params={"state": "all", "per_page": 100}).json()
    return tuple(sorted((i["number"], i["comments"]) for i in issues))


def test_a_slowdown_is_bisected_to_its_pr_and_a_flat_history_writes_nothing(world):
    scenario, state = world["scenario"], world["state"]
    shas, slow = scenario.shas, scenario.slowdown["index"]
    # the runner's clock: seeded, and 1% apart run to run (the sampled search's cost at 2% is bench/'s to measure)
    state.actions.runner_env.update(MINI_SGLANG_BENCH_SEED="slowdown-story", MINI_SGLANG_BENCH_SPREAD="0.01")
    state.add_hook(world["bot"] + "/webhooks/github", SECRET)
    before, written = everything_written(world), writes(world)

    flat = nights(world, shas[:slow:EVERY])  # every night before the slow commit
    wait_for(lambda: set(flat) <= stored_runs(world) and world["watch"].settled(), timeout=120, bot=world["watch"])
    assert writes(world) == written and everything_written(world) == before  # nothing written to GitHub

    culprit_pr = scenario.slowdown["pr"]
    nights(world, shas[slow + (slow % EVERY) :: EVERY][:4])  # four nights after it, at the same pace
    evidence = wait_for(
        lambda: [c for c in comments(world, culprit_pr) if "bisected a slowdown" in c["body"]],
        timeout=420,
        bot=world["watch"],
    )
    assert len(evidence) == 1 and evidence[0]["user"]["login"] == "revert-bisect-bot"
    body = evidence[0]["body"]
    assert "`decode-throughput`" in body and "+/-" in body and "median" in body and "its parent" in body
    assert "Reverting it on" in body and "restores the metric" in body and "nothing was reverted" in body

    bisection = httpx.get(world["bot"] + "/api/bisections/1", timeout=30).json()
    assert bisection["status"] == "found" and bisection["culprit"] == scenario.slowdown["sha"]
    # the comment is written before its job ends, and the nights' webhooks keep coming: every job landed first
    wait_for(world["watch"].settled, timeout=60, bot=world["watch"])
    pulls = gh(world, "GET", f"/repos/{world['seeded'].repo}/pulls", params={"state": "all"}).json()
    assert not [p for p in pulls if p["title"].startswith("Revert ")]  # `on_slowdown: comment`: no revert PR
    now = dict(everything_written(world))
    assert {n: c for n, c in now.items() if dict(before).get(n) != c} == {culprit_pr: 1}  # one comment, there only


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--revert"], "--revert is the performance story's (--perf)"),
        (["--perf", "--local"], "--perf tells its own story through GitHub"),
        (["--perf", "--regressions", "1"], "--perf tells its own story through GitHub"),
    ],
)
def test_the_demos_performance_options_refuse_what_they_do_not_tell(cli, tmp_path, args, said):
    r = cli("demo", "--dir", str(tmp_path / "demo"), *args, timeout=60)
    assert r.code == 2 and said in r.stderr and "Traceback" not in r.stderr
    assert not (tmp_path / "demo").exists()  # refused before anything was built
