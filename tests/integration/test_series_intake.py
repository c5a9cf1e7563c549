"""The benchmarks' series read from CI through the sandbox, as on GitHub: a scheduled `Nightly Test (Nvidia)` whose
job `nightly-test-text-perf-2-gpu-h100` prints SGLang's perf report (tests/support/perf_logs.py) for what the plan
says of its commit and attempt, beside an accuracy job; read through the real GitHubForge by the series' job on the
`workflow_run` delivery (bot.ingress.jobs.series), stored in a real store.

A green run and a red one (a model's benchmark crashed: its metrics are kept as gaps), a re-run attempt (its
reading replaces the crashed attempt's, picked up by the next delivery since a re-run's completion may never come as a
webhook), a fork's run (never read), the backfill when the bot starts, and the red-test intake beside it deciding as
it would alone."""

from __future__ import annotations

import json
import subprocess
import sys
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest
import requests

from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.policy_files import parse
from bot.adapters.store.db import connect as open_store
from bot.adapters.store.series import SeriesPoints
from bot.domain.patience import NotYet
from bot.domain.repo_policies import RepoPolicies
from bot.domain.scope import run_info
from bot.ingress.jobs.nightly import NightlyJob
from bot.ingress.jobs.series import Alongside, SeriesJob, SeriesSync
from bot.ports.store import ClaimedJob
from bot.service.run_reading import Kept
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build
from tests.support.perf_logs import outputs_of

ROOT = Path(__file__).resolve().parents[2]
WORKFLOW = ".github/workflows/nightly-test-nvidia.yml"
PERF_JOB = "nightly-test-text-perf-2-gpu-h100"
BS64 = "llama-3.1-8b_bs64_output_throughput"
QWEN64 = "qwen2-57b-a14b_bs64_output_throughput"

PERF = """
import json, os, sys
from tests.support.perf_logs import perf_suite
sha, attempt = os.environ["GITHUB_SHA"], os.environ["GITHUB_RUN_ATTEMPT"]
plan = json.load(open(sys.argv[1]))[sha]
outputs = plan.get(attempt, plan["1"])
passed, lines = perf_suite({m: {int(b): v for b, v in by.items()} for m, by in outputs.items()})
print("\\n".join(lines))
sys.exit(0 if passed else 1)
"""

NIGHTLY = """\
name: Nightly Test (Nvidia)
on:
  schedule:
    - cron: '0 14 */2 * *'
  pull_request:
jobs:
  nightly-test-general-1-gpu-runner:
    runs-on: [self-hosted]
    steps:
      - run: {python} -c "print('the accuracy suite, nothing of the perf test here')"
  {perf_job}:
    runs-on: [self-hosted]
    steps:
      - name: Run test
        run: {python} {perf} {plan}
        env:
          PYTHONPATH: {root}
"""


def perf_policy(repo: str, events: str = "[schedule]", history: int = 15):
    """policies/sglang-perf.yaml, for the sandbox's repository."""
    text = (ROOT / "policies" / "sglang-perf.yaml").read_text()
    text = text.replace("repository: sgl-project/sglang", f"repository: {repo}")
    text = text.replace("events: [schedule]", f"events: {events}").replace("history: 15", f"history: {history}")
    return parse(text, "sglang-perf.yaml")


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, check=True).stdout


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("series")
    build(tmp / "scenario", commits=12, seed=2)
    clone = tmp / "scenario" / json.loads((tmp / "scenario" / "scenario.json").read_text())["repo"]
    plan, perf = tmp / "plan.json", tmp / "perf.py"
    perf.write_text(PERF)
    plan.write_text("{}")
    workflow = clone / WORKFLOW
    workflow.parent.mkdir(parents=True, exist_ok=True)
    workflow.write_text(NIGHTLY.format(python=sys.executable, perf=perf, plan=plan, root=ROOT, perf_job=PERF_JOB))
    git(clone, "add", WORKFLOW)
    git(clone, "-c", "user.name=ci", "-c", "user.email=ci@example.invalid", "commit", "-q", "-m", "ci: nightly")
    shas = git(clone, "rev-list", "--first-parent", "--reverse", "main").split()
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    state.create_repo("forker/mini-sglang", source=clone)  # a fork, whose PR comes from its own `main`
    base, stop = run_in_thread(state)
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    yield dict(
        state=state,
        repo=seeded.repo,
        forge=forge,
        shas=shas,
        plan=plan,
        base=base,
        token=seeded.tokens[seeded.maintainer],
    )
    state.actions.shutdown()
    stop()


class Counting:
    """The forge, counting the CI reads the series makes."""

    def __init__(self, forge):
        self.forge = forge
        self.calls: Counter[str] = Counter()

    def __getattr__(self, name):
        found = getattr(self.forge, name)
        if name in ("workflow_runs", "run", "run_jobs", "job_log", "run_artifact"):

            def counted(*args, **kwargs):
                self.calls[name] += 1
                return found(*args, **kwargs)

            return counted
        return found


def plan(world, sha: str, *attempts: dict) -> None:
    known = json.loads(world["plan"].read_text())
    known[sha] = {str(k): outputs for k, outputs in enumerate(attempts, start=1)}
    world["plan"].write_text(json.dumps(known))


def started(world, sha: str, event: str = "schedule", head_repository: str | None = None) -> int:
    state = world["state"]
    run_id = state.actions.start(
        state.repo(world["repo"]), WORKFLOW, sha, event=event, branch_of_sha="main", head_repository=head_repository
    ).id
    state.actions.wait(run_id, 120)
    return run_id


def payload(world, run_id: int) -> dict:
    """The run's `workflow_run.completed` delivery, as the intake reads it."""
    run = world["forge"].repo.get_workflow_run(run_id).raw_data
    return {"action": "completed", "repository": {"full_name": world["repo"]}, "workflow_run": run}


def deliver(handler, world, run_id: int) -> None:
    handler(ClaimedJob(1, "nightly_failure", f"d-{run_id}", "workflow_run", payload(world, run_id), 1))


def store(tmp_path) -> SeriesPoints:
    return SeriesPoints(open_store(f"sqlite:///{tmp_path / 'bot.db'}"))


def readings(series: SeriesPoints, repo: str, run_id: int) -> dict[str, float | None]:
    return {
        m: p.value
        for r, t, m in series.watched()
        for p in series.series(r, t, m)
        if p.run_id == run_id and r == repo and t == "text-models-perf"
    }


def expected(outputs: dict) -> dict[str, float | None]:
    return {
        f"{model}_bs{bs}_output_throughput": outputs.get(model, {}).get(bs)
        for model in ("llama-3.1-8b", "qwen2-57b-a14b")
        for bs in (1, 8, 16, 64)
    }


class Bisections:
    def __init__(self):
        self.started = []

    def start_nightly(self, repo_slug, scoped, forge):
        self.started.append(scoped)

    def start_nightly_group(self, repo_slug, group, forge):
        self.started.append(group)


def test_a_green_and_a_red_run_are_read_beside_the_red_test_intake(world, tmp_path):
    shas, repo = world["shas"], world["repo"]
    green_plan = outputs_of(1.0)
    crashed = outputs_of(0.97)
    del crashed["qwen2-57b-a14b"]  # Qwen2's benchmark crashed: the test fails, its table is never printed
    del crashed["llama-3.1-8b"][16]  # a batch size the KV cache could not hold: skipped, no row
    plan(world, shas[1], green_plan)
    plan(world, shas[2], crashed)
    green, red = started(world, shas[1]), started(world, shas[2])
    runs = {r: world["forge"].repo.get_workflow_run(r).raw_data for r in (green, red)}
    assert (runs[green]["conclusion"], runs[red]["conclusion"]) == ("success", "failure")

    series, ci = store(tmp_path), Counting(world["forge"])
    policies = {repo: RepoPolicies.one(perf_policy(repo))}
    bisections = Bisections()
    red_at = run_info(runs[red]).updated_at
    assert red_at is not None
    intake = NightlyJob(policies, lambda r: world["forge"], bisections, now=lambda: red_at + timedelta(minutes=5))
    job = Alongside(SeriesJob(policies, lambda r: ci, series), intake)

    deliver(job, world, green)  # the red-test intake drops a green run; the series reads it
    assert readings(series, repo, green) == expected(green_plan)
    # both runs were listed (the red one completed already): each read once, its perf job's log alone
    assert readings(series, repo, red) == expected(crashed)
    assert ci.calls == Counter(workflow_runs=1, run_jobs=2, job_log=2)
    with pytest.raises(NotYet):  # the intake waits out the red run's re-run grace, as it would alone
        deliver(job, world, red)
    assert ci.calls["job_log"] == 2  # the red run's delivery read nothing again
    assert bisections.started == []
    points = series.series(repo, "text-models-perf", BS64)
    assert [(p.run_id, p.run_attempt, p.sha, p.url) for p in points] == [
        (green, 1, shas[1], runs[green]["html_url"]),
        (red, 1, shas[2], runs[red]["html_url"]),
    ]
    assert points[0].started_at <= points[1].started_at


def test_a_red_runs_perf_log_is_read_once_by_the_series_and_the_red_test_intake(world, tmp_path):
    shas, repo = world["shas"], world["repo"]
    crashed = outputs_of(0.98)
    del crashed["qwen2-57b-a14b"]  # the perf test fails: the red-test intake reads the failed job's log too
    plan(world, shas[6], crashed)
    red = started(world, shas[6])
    info = run_info(world["forge"].repo.get_workflow_run(red).raw_data)
    assert info.conclusion == "failure" and info.updated_at is not None
    policies = {repo: RepoPolicies.one(perf_policy(repo))}
    logs: list[int] = []

    class Logs(Counting):
        def job_log(self, job_id, *args, **kwargs):
            logs.append(job_id)
            return self.forge.job_log(job_id, *args, **kwargs)

    ci, kept = Logs(world["forge"]), Kept()
    after_grace = info.updated_at + timedelta(hours=2)
    intake = NightlyJob(policies, lambda r: ci, Bisections(), now=lambda: after_grace, kept=kept)
    deliver(Alongside(SeriesJob(policies, lambda r: ci, store(tmp_path), kept), intake), world, red)
    assert readings(store_of := store(tmp_path), repo, red) == expected(crashed), store_of
    (perf_job,) = [j.id for j in world["forge"].run_jobs(red, None) if j.name == PERF_JOB]
    assert logs.count(perf_job) == 1, logs  # the series' read of it served the intake
    assert len(logs) == len(set(logs))  # no log fetched twice


def test_a_rerun_attempts_reading_replaces_the_crashed_one_on_the_next_delivery(world, tmp_path):
    shas, repo = world["shas"], world["repo"]
    crashed, rerun, later = outputs_of(0.99), outputs_of(1.01), outputs_of(1.0)
    del crashed["qwen2-57b-a14b"]
    plan(world, shas[3], crashed, rerun)
    plan(world, shas[4], later)
    series = store(tmp_path)
    job = SeriesJob({repo: RepoPolicies.one(perf_policy(repo))}, lambda r: world["forge"], series)
    first = started(world, shas[3])
    deliver(job, world, first)
    assert readings(series, repo, first)[QWEN64] is None
    answer = requests.post(
        f"{world['base']}/repos/{repo}/actions/runs/{first}/rerun-failed-jobs",
        headers={"Authorization": f"token {world['token']}"},
        timeout=30,
    )
    assert answer.status_code == 201
    world["state"].actions.wait(first, 120)
    # no webhook for the re-run's completion: the next run's delivery finds its newer attempt in the list
    deliver(job, world, started(world, shas[4]))
    assert readings(series, repo, first) == expected(rerun)
    [point] = [p for p in series.series(repo, "text-models-perf", QWEN64) if p.run_id == first]
    assert (point.run_attempt, point.sha) == (2, shas[3])


def test_a_forks_run_is_never_read(world, tmp_path):
    shas, repo = world["shas"], world["repo"]
    plan(world, shas[5], outputs_of(0.5))  # the fork's numbers: never this repository's series
    series, ci = store(tmp_path), Counting(world["forge"])
    policy = perf_policy(repo, events="[schedule, pull_request]")  # a PR's run is watched; a fork's is not
    job = SeriesJob({repo: RepoPolicies.one(policy)}, lambda r: ci, series)
    fork = started(world, shas[5], event="pull_request", head_repository="forker/mini-sglang")
    run = payload(world, fork)["workflow_run"]
    assert (run["head_branch"], run["event"], run["head_repository"]["full_name"]) == (
        "main",
        "pull_request",
        "forker/mini-sglang",
    )
    deliver(job, world, fork)
    assert ci.calls == Counter()  # not watched: no API call
    SeriesSync({repo: RepoPolicies.one(policy)}, lambda r: ci, series)(
        ClaimedJob(2, "series_sync", "start-1", "revert_bisect_start", {}, 1)
    )
    assert ci.calls["workflow_runs"] == 1  # its runs of both events listed: the fork's among them, as on GitHub
    assert fork in {r.id for r in world["forge"].workflow_runs(WORKFLOW, "main", ["pull_request"], 50)}
    assert fork not in {p.run_id for r, t, m in series.watched() for p in series.series(r, t, m)}
    assert series.watched()  # this repository's own runs were read


def test_the_backfill_at_start_reads_the_last_history_runs_once(world, tmp_path):
    repo = world["repo"]
    listed = world["forge"].workflow_runs(WORKFLOW, "main", ["schedule"], 50)
    own = [r.id for r in listed if r.head_repository == repo]
    assert len(own) >= 4  # the earlier tests' scheduled runs
    series, ci = store(tmp_path), Counting(world["forge"])
    sync = SeriesSync({repo: RepoPolicies.one(perf_policy(repo, history=3))}, lambda r: ci, series)
    sync(ClaimedJob(1, "series_sync", "start-1", "revert_bisect_start", {}, 1))
    assert sorted({p.run_id for p in series.series(repo, "text-models-perf", BS64)}) == sorted(own[:3])
    assert len(series.watched()) == 8  # every metric of the test, each its own series
    assert ci.calls == Counter(workflow_runs=1, run_jobs=3, job_log=3)
    sync(ClaimedJob(2, "series_sync", "start-2", "revert_bisect_start", {}, 1))  # the next start: nothing new
    assert ci.calls == Counter(workflow_runs=2, run_jobs=3, job_log=3)
