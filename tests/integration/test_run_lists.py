"""A workflow's runs listed as the nightly job lists them (bot.adapters.github.runs.CiRuns.workflow_runs), against the
sandbox, which counts every REST request: one request a page of the list, not one more per run listed, with each
run as GET .../actions/runs/{id} describes it."""

from __future__ import annotations

import sys

import pytest

from bot.adapters.github.forge import GitHubForge, connect
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build

WORKFLOW = "nightly.yml"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("run-lists")
    build(tmp / "scenario", commits=8, seed=1)
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    state.bind_workflow(seeded.repo, WORKFLOW, [sys.executable, "-c", "raise SystemExit(1)"])
    base, stop = run_in_thread(state)
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    runs = []
    for _ in range(4):
        runs.append(state.start_run(seeded.repo, WORKFLOW, "main", event="schedule"))
        state.actions.wait(runs[-1], 60)
    yield dict(state=state, forge=forge, repo=seeded.repo, runs=runs)
    state.actions.shutdown()
    stop()


def test_the_runs_are_read_from_the_lists_pages_one_request_a_page(world):
    state, forge, slug = world["state"], world["forge"], world["repo"]
    state.rates.calls.clear()
    listed = forge.workflow_runs(WORKFLOW, "main", ["schedule", "push"], 3)
    assert [r.id for r in listed] == sorted(world["runs"], reverse=True)[:3]  # newest first, at most the limit
    assert dict(state.rates.calls) == {("GET", f"/repos/{slug}/actions/workflows/{WORKFLOW}/runs"): 2}  # an event each
    assert listed == [forge.run(r.id) for r in listed]  # the list's entries hold what the run's own GET does
