"""The nightly job against the sandbox, through the real GitHubForge: a scheduled suite that is never green as a
whole, its jobs' logs in GitHub's format with run_suite's report, and GOOD read from the KL test's own history.

The sandbox runs the workflow as a bound command printing what SGLang's run_suite prints (tests/support/suite_logs.py)
for the commit it runs at: the KL file passes, fails or is not run, and an unrelated file fails in every run.
Several jobs, re-run attempts and forks' runs through the sandbox: tests/integration/test_nightly_attempts.py."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.store.deliveries import ClaimedJob
from bot.domain.repo_policies import RepoPolicies
from bot.domain.scope import run_info
from bot.ingress.jobs.nightly import NightlyJob
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.policies import suite_policy

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ".github/workflows/scheduled-suite.yml"

SCRIPT = """
import json, subprocess, sys
from tests.support.suite_logs import KL_TEST, File, kl_output, run_suite
sha = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
plan = json.load(open(sys.argv[1])).get(sha, {})
files = [File("test/registered/models_e2e/test_glm4_moe_models.py", [False], ["score 0.61 < 0.62"])]
if plan.get("kl") is not None:
    files.append(File(KL_TEST, [plan["kl"] <= 0.002], kl_output(plan["kl"])))
print("\\n".join(run_suite(files)))
sys.exit(1)
"""


def policy_for(repo: str):
    return suite_policy(repo, WORKFLOW, "^scheduled-suite$")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nightly-history")
    build(tmp / "scenario", commits=8, seed=1)
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    clone = tmp / "scenario" / json.loads((tmp / "scenario" / "scenario.json").read_text())["repo"]
    shas = subprocess.run(
        ["git", "-C", str(clone), "rev-list", "--first-parent", "--reverse", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    plan_file, script = tmp / "plan.json", tmp / "suite.py"
    script.write_text(SCRIPT)
    state.bind_workflow(
        seeded.repo, WORKFLOW, [sys.executable, str(script), str(plan_file)], env={"PYTHONPATH": str(ROOT)}
    )
    base, stop = run_in_thread(state)
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    yield dict(state=state, repo=seeded.repo, forge=forge, shas=shas, plan=plan_file)
    state.actions.shutdown()
    stop()


class Bisections:
    def __init__(self):
        self.started = []

    def start_nightly(self, repo_slug, scoped, forge):
        self.started.append(scoped)


def scheduled(world, sha: str) -> int:
    state = world["state"]
    run_id = state.start_run(world["repo"], WORKFLOW, sha, event="schedule", branch_of_sha="main")
    assert state.actions.wait(run_id, 120).conclusion == "failure"  # never green as a whole
    return run_id


def test_good_is_the_last_run_the_test_passed_in_read_through_the_sandbox(world):
    shas = world["shas"]
    good, none, bad = shas[2], shas[4], shas[-1]
    world["plan"].write_text(json.dumps({shas[1]: {"kl": 0.0003}, good: {"kl": 0.0005}, none: {}, bad: {"kl": 0.0065}}))
    runs = [scheduled(world, sha) for sha in (shas[1], good, none, bad)]
    forge = world["forge"]
    payload = forge.repo.get_workflow_run(runs[-1]).raw_data  # the workflow_run webhook's run
    red = run_info(payload)
    assert red.conclusion == "failure" and red.head_repository == world["repo"] and red.run_attempt == 1
    bisections = Bisections()
    job = NightlyJob(
        {world["repo"]: RepoPolicies.one(policy_for(world["repo"]))},
        lambda repo: forge,
        bisections,
        now=lambda: red.updated_at + timedelta(minutes=31),
    )
    job(
        ClaimedJob(
            1,
            "nightly_failure",
            "d-1",
            "workflow_run",
            {"repository": {"full_name": world["repo"]}, "workflow_run": payload},
            1,
        )
    )
    [scoped] = bisections.started
    assert (scoped.good, scoped.bad, scoped.good_run, scoped.bad_run) == (good, bad, runs[1], runs[-1])
    assert scoped.test.metric == 0.0065 and scoped.good_signal.metric == 0.0005
    assert [(s.run_id, s.outcome.value) for s in scoped.history] == [(runs[2], "no signal")]
