"""The nightly job against the sandbox running a scheduled workflow the way SGLang's is built: a matrix of suite
partitions (one of which runs the KL file), a job skipped on `schedule`, run_suite's report in GitHub's job-log
format, failed jobs re-run as new attempts of the same run (POST .../rerun-failed-jobs), and a fork's pull request
from its own `main` -- read through the real GitHubForge, as on GitHub.

Each partition runs tests/support/suite_logs.py's run_suite for what the plan says about (its commit, attempt,
partition); partition 0 always fails an unrelated file, so no run is ever green as a whole."""

from __future__ import annotations

import json
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.store.deliveries import ClaimedJob
from bot.domain.patience import NotYet
from bot.domain.repo_policies import RepoPolicies
from bot.domain.scope import run_info
from bot.domain.signals import Outcome
from bot.ingress.jobs.nightly import NightlyJob
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.policies import suite_policy

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ".github/workflows/pr-test.yml"
GPU_JOB = "base-c-test-4-gpu-h100"

SUITE = """
import json, os, sys
from tests.support.suite_logs import KL_TEST, File, kl_output, run_suite
sha, attempt, part = os.environ["GITHUB_SHA"], os.environ["GITHUB_RUN_ATTEMPT"], sys.argv[2]
plan = json.load(open(sys.argv[1])).get(sha, {})
if part == "0":
    files = [File("test/registered/models_e2e/test_glm4_moe_models.py", [False], ["score 0.61 < 0.62"])]
else:
    kl = plan.get("kl" if attempt == "1" else "kl_rerun", plan.get("kl"))
    files = [File("test/registered/models_e2e/test_qwen3_next_models_mtp.py", [True], ["avg_kl_div=0.01"])]
    if kl is not None:  # "retried": run_suite's own retry of the file, with the same reading
        files.append(File(KL_TEST, [kl <= 0.002] * (2 if plan.get("retried") else 1), kl_output(kl)))
print("\\n".join(run_suite(files)))
sys.exit(0 if all(f.attempts[-1] for f in files) else 1)
"""

PR_TEST = """\
name: PR Test Base
run-name: ${{{{ github.event_name == 'schedule' && 'Scheduled Full Run' || github.event.pull_request.title }}}}
on:
  schedule:
    - cron: '0 11,23 * * *'
  pull_request:
jobs:
  {gpu}:
    if: ${{{{ !contains(vars.NO_GPU_AT, github.sha) }}}}
    strategy:
      fail-fast: false
      matrix:
        part: [0, 1]
    runs-on: [self-hosted]
    steps:
      - name: Run test
        run: {python} {suite} {plan} ${{{{ matrix.part }}}}
        env:
          PYTHONPATH: {root}
  multimodal-gen-test:
    if: github.event_name == 'pull_request'
    runs-on: [self-hosted]
    steps:
      - run: echo not on schedule
"""


def policy_for(repo: str, events: str = "[schedule]"):
    return suite_policy(repo, WORKFLOW, f"^{GPU_JOB} ", events)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("nightly-attempts")
    build(tmp / "scenario", commits=12, seed=2)
    clone = tmp / "scenario" / json.loads((tmp / "scenario" / "scenario.json").read_text())["repo"]
    shas = git(clone, "rev-list", "--first-parent", "--reverse", "main").split()
    plan, suite = tmp / "plan.json", tmp / "suite.py"
    suite.write_text(SUITE)
    # the workflow as the default branch has it (GitHub reads a scheduled workflow from there)
    workflow = clone / WORKFLOW
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(PR_TEST.format(gpu=GPU_JOB, python=sys.executable, suite=suite, plan=plan, root=ROOT))
    git(clone, "add", WORKFLOW)
    git(clone, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "-q", "-m", "ci: PR Test Base")
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    state.create_repo("forker/mini-sglang", source=clone)  # a fork, whose PR comes from its own `main`
    base, stop = run_in_thread(state)
    token = seeded.tokens[seeded.maintainer]
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    yield dict(state=state, repo=seeded.repo, forge=forge, shas=shas, plan=plan, base=base, token=token)
    state.actions.shutdown()
    stop()


def set_plan(world, **by_sha: dict) -> None:
    known = json.loads(world["plan"].read_text()) if world["plan"].exists() else {}
    world["plan"].write_text(json.dumps({**known, **by_sha}))


def started(world, sha: str, event: str = "schedule", head_repository: str | None = None) -> int:
    state = world["state"]
    run_id = state.actions.start(
        state.repo(world["repo"]),
        WORKFLOW,
        sha,
        event=event,
        branch_of_sha="main",
        head_repository=head_repository,
    ).id
    state.actions.wait(run_id, 120)
    return run_id


def api(world, method: str, path: str) -> requests.Response:
    return requests.request(
        method,
        f"{world['base']}/repos/{world['repo']}/actions/{path}",
        headers={"Authorization": f"token {world['token']}"},
        timeout=30,
    )


def rerun_failed(world, run_id: int) -> None:
    answer = api(world, "POST", f"runs/{run_id}/rerun-failed-jobs")
    assert (answer.status_code, answer.json()) == (201, {})
    world["state"].actions.wait(run_id, 120)


class Bisections:
    def __init__(self):
        self.started = []

    def start_nightly(self, repo_slug, scoped, forge):
        self.started.append(scoped)


class Flakes:
    def __init__(self):
        self.seen = []

    def record(self, flake) -> bool:
        self.seen.append(flake)
        return True


def scope(world, first_attempt_payload: dict, events: str = "[schedule]", after: timedelta = timedelta(minutes=31)):
    """The nightly job as the bot runs it on the red run's (first attempt's) workflow_run webhook, `after` it completed
    (by default past the grace period for re-runs)."""
    red = run_info(first_attempt_payload)
    bisections, flakes = Bisections(), Flakes()
    job = NightlyJob(
        {world["repo"]: RepoPolicies.one(policy_for(world["repo"], events))},
        lambda repo: world["forge"],
        bisections,
        flakes,
        now=lambda: red.updated_at + after,
    )
    payload = {"repository": {"full_name": world["repo"]}, "workflow_run": first_attempt_payload}
    job(ClaimedJob(1, "nightly_failure", f"d-{red.id}", "workflow_run", payload, 1))
    return bisections.started, flakes.seen


def test_a_scheduled_run_has_its_files_jobs_a_matrix_a_skipped_job_and_never_succeeds_as_a_whole(world):
    sha = world["shas"][1]
    set_plan(world, **{sha: {"kl": 0.0004}})
    run_id = started(world, sha)
    run = api(world, "GET", f"runs/{run_id}").json()
    assert (run["conclusion"], run["display_title"], run["run_attempt"]) == ("failure", "Scheduled Full Run", 1)
    jobs = {j["name"]: j for j in api(world, "GET", f"runs/{run_id}/jobs").json()["jobs"]}
    assert {n: (j["conclusion"], j["run_attempt"]) for n, j in jobs.items()} == {
        f"{GPU_JOB} (0)": ("failure", 1),  # the unrelated file
        f"{GPU_JOB} (1)": ("success", 1),  # the KL file passed
        "multimodal-gen-test": ("skipped", 1),
    }
    skipped = jobs["multimodal-gen-test"]
    assert (skipped["steps"], skipped["runner_name"], skipped["status"]) == ([], None, "completed")
    log = requests.get(
        f"{world['base']}/repos/{world['repo']}/actions/jobs/{jobs[f'{GPU_JOB} (1)']['id']}/logs",
        headers={"Authorization": f"token {world['token']}"},
        timeout=30,
    ).content.decode("utf-8-sig")
    assert "Test Summary: 2/2 passed" in log and "========== TIMINGS BEGIN ==========" in log
    assert "test_glm4_moe_models.py" not in log  # each partition's log is its own


def test_good_is_the_newest_run_the_test_passed_in_never_a_forks_main_nor_a_skipped_job(world):
    shas = world["shas"]
    older, good, skipped, evidence, bad = shas[2], shas[3], shas[5], shas[7], shas[9]
    set_plan(
        world,
        **{older: {"kl": 0.0003}, good: {"kl": 0.0005}, evidence: {"kl": 0.0061}, bad: {"kl": 0.0065}},
        **{shas[8]: {"kl": 0.0004}},  # what the fork's PR reads at its own head
    )
    runs = {sha: started(world, sha) for sha in (older, good)}
    world["state"].actions.variables["NO_GPU_AT"] = skipped  # the GPU jobs are skipped in this run
    runs[skipped] = started(world, skipped)
    world["state"].actions.variables["NO_GPU_AT"] = ""
    runs[evidence] = started(world, evidence)
    fork_run = started(world, shas[8], event="pull_request", head_repository="forker/mini-sglang")
    fork = api(world, "GET", f"runs/{fork_run}").json()
    assert (fork["head_branch"], fork["head_repository"]["full_name"]) == ("main", "forker/mini-sglang")
    runs[bad] = started(world, bad)
    red = world["forge"].repo.get_workflow_run(runs[bad]).raw_data
    [scoped], flakes = scope(world, red, events="[schedule, pull_request]")
    assert flakes == []
    assert (scoped.good, scoped.bad, scoped.good_run) == (good, bad, runs[good])
    assert scoped.good_signal.metric == 0.0005 and scoped.test.metric == 0.0065
    by_run = {s.run_id: s for s in scoped.history}
    assert fork_run not in by_run  # a fork's `main` is not this repository's
    assert by_run[runs[skipped]].outcome is Outcome.NONE  # skipped jobs say nothing about the test
    assert (by_run[runs[evidence]].outcome, by_run[runs[evidence]].metric) == (Outcome.FAILED, 0.0061)


def test_a_failed_run_rerun_as_a_new_attempt_and_its_attempts_as_github_serves_them(world):
    sha = world["shas"][10]
    set_plan(world, **{sha: {"kl": 0.0066, "kl_rerun": 0.0004}})
    run_id = started(world, sha)
    first = api(world, "GET", f"runs/{run_id}").json()
    before = {j["name"]: j["id"] for j in api(world, "GET", f"runs/{run_id}/jobs").json()["jobs"]}
    deliveries = len(world["state"].hook_deliveries)
    rerun_failed(world, run_id)
    now = api(world, "GET", f"runs/{run_id}").json()
    assert (now["id"], now["run_attempt"], now["conclusion"]) == (run_id, 2, "failure")  # partition 0 fails again
    assert now["previous_attempt_url"].endswith(f"/actions/runs/{run_id}/attempts/1")
    assert now["triggering_actor"]["login"] == "sandbox-maintainer" and now["head_sha"] == sha
    one = api(world, "GET", f"runs/{run_id}/attempts/1").json()
    assert (one["run_attempt"], one["conclusion"], one["previous_attempt_url"]) == (1, "failure", None)
    assert one["updated_at"] == first["updated_at"]
    latest = {j["name"]: j for j in api(world, "GET", f"runs/{run_id}/jobs").json()["jobs"]}
    assert {n: (j["run_attempt"], j["conclusion"]) for n, j in latest.items()} == {
        f"{GPU_JOB} (0)": (2, "failure"),
        f"{GPU_JOB} (1)": (2, "success"),  # the KL file passed on the re-run
        "multimodal-gen-test": (1, "skipped"),  # not failed: kept from attempt 1
    }
    assert latest["multimodal-gen-test"]["id"] == before["multimodal-gen-test"]
    everything = api(world, "GET", f"runs/{run_id}/jobs?filter=all").json()
    assert everything["total_count"] == 5 and {j["id"] for j in everything["jobs"]} >= set(before.values())
    attempt_one = {j["name"]: j for j in api(world, "GET", f"runs/{run_id}/attempts/1/jobs").json()["jobs"]}
    assert (
        attempt_one[f"{GPU_JOB} (1)"]["conclusion"] == "failure"
        and attempt_one[f"{GPU_JOB} (1)"]["id"] == (before[f"{GPU_JOB} (1)"])
    )
    assert api(world, "GET", f"runs/{run_id}/attempts/3").status_code == 404
    assert api(world, "GET", f"runs/{run_id}/jobs?filter=newest").status_code == 422
    # a re-run's workflow_run events are not delivered (REALITY.md): whoever waits for them waits forever
    assert [d for d in world["state"].hook_deliveries[deliveries:] if d["event"] == "workflow_run"] == []
    # the webhook the bot had was attempt 1's: it reads the run as it is now, and the pass on attempt 2 is a flake
    [], [flake] = scope(world, {**first})
    assert (flake.test, flake.run_id, flake.sha) == ("kl", run_id, sha)
    assert "re-run attempt 2" in flake.how


def test_a_rerun_that_fails_again_is_bisected_once_from_its_final_attempt(world):
    good, sha = world["shas"][6], world["shas"][11]
    set_plan(world, **{good: {"kl": 0.0004}, sha: {"kl": 0.0066, "kl_rerun": 0.0071}})
    good_run = started(world, good)  # its own history: it stands alone, whatever else ran in this process
    run_id = started(world, sha)
    first = api(world, "GET", f"runs/{run_id}").json()
    rerun_failed(world, run_id)
    bisections, flakes = scope(world, first)
    assert flakes == [] and len(bisections) == 1
    assert (bisections[0].good, bisections[0].good_run, bisections[0].bad) == (good, good_run, sha)
    assert bisections[0].test.metric == 0.0071  # the final attempt's reading


def test_what_github_refuses_to_rerun(world):
    sha = world["shas"][1]
    set_plan(world, **{sha: {"kl": 0.0004}})
    state = world["state"]
    run = state.actions.start(state.repo(world["repo"]), WORKFLOW, sha, event="schedule", branch_of_sha="main")
    running = api(world, "POST", f"runs/{run.id}/rerun")
    assert running.status_code == 403 and "not completed" in running.json()["message"]
    state.actions.wait(run.id, 120)
    green = started(world, sha, event="pull_request")  # partition 0 still fails: make one with nothing failed
    state.actions.variables["NO_GPU_AT"] = sha
    quiet = started(world, sha)  # every job skipped
    state.actions.variables["NO_GPU_AT"] = ""
    assert api(world, "GET", f"runs/{quiet}").json()["conclusion"] == "skipped"
    nothing = api(world, "POST", f"runs/{quiet}/rerun-failed-jobs")
    assert nothing.status_code == 403 and "no failed jobs" in nothing.json()["message"]
    whole = api(world, "POST", f"runs/{green}/rerun")  # every job again, the skipped one too
    assert whole.status_code == 201
    state.actions.wait(green, 120)
    assert {j["run_attempt"] for j in api(world, "GET", f"runs/{green}/jobs").json()["jobs"]} == {2}


def test_a_failure_already_reproduced_starts_at_once_and_one_nothing_reproduced_waits_out_the_grace(world):
    shas = world["shas"]
    good = shas[8]
    set_plan(
        world,
        **{
            good: {"kl": 0.0004},
            shas[9]: {"kl": 0.0066, "kl_rerun": 0.0066},  # re-run as attempt 2: it fails again
            shas[10]: {"kl": 0.0066, "retried": True},  # run_suite's own retry fails it again
            shas[11]: {"kl": 0.0066},  # one failing reading, nothing else yet
        },
    )
    started(world, good)
    soon = timedelta(minutes=1)  # well inside the 30-minute grace
    rerun = started(world, shas[9])
    first = api(world, "GET", f"runs/{rerun}").json()
    rerun_failed(world, rerun)
    [scoped], _ = scope(world, first, after=soon)
    assert scoped.bad == shas[9] and scoped.started == "at once: re-run attempt 2 of the run failed again"
    assert scoped.reproduced  # CI's BAD red and GOOD green stand: no endpoint run before the search
    retried = api(world, "GET", f"runs/{started(world, shas[10])}").json()
    [scoped], _ = scope(world, retried, after=soon)
    assert scoped.started == "at once: the suite runner's own retry failed it again, with the same verdict"
    assert scoped.reproduced
    once = api(world, "GET", f"runs/{started(world, shas[11])}").json()
    with pytest.raises(NotYet) as waited:
        scope(world, once, after=soon)
    assert 28 * 60 < waited.value.after_s <= 29 * 60  # the rest of the grace
    [scoped], _ = scope(world, once)  # once the grace has passed with no re-run: scoped, and says so
    assert scoped.started == "after waiting 30 minutes for re-runs of the red attempt"
    assert not scoped.reproduced  # one red reading: the bisect runner reads the endpoints first
