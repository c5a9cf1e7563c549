"""The Actions backend against the sandbox's emulated self-hosted runner, through real PyGithub.

The repository holds the real step workflow (runners/github/revert-bisect-step.yml); the runner runs its
own steps (install, `python3 -m runners.step`, upload) on the machine sandbox.actions.machine sets up.
Each way a run can fail to give a result is an infra verdict with its reason."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.adapters.dispatch.actions import GitHubActionsBackend, Limits
from bot.adapters.github.actions import GitHubActions
from bot.adapters.github.forge import connect
from bot.service.backends import step_inputs
from runners.spec import StepSpec
from runners.step import RUNNER_PYTHON, Request
from sandbox.server import run_in_thread
from sandbox.state import SandboxState, step_runner_machine

STEP_WORKFLOW = Path(__file__).resolve().parents[2] / "runners" / "github" / "revert-bisect-step.yml"
TEST = (
    "import pathlib, sys; v = pathlib.Path('bug.txt').read_text().strip(); "
    "print('metric=' + ('0.9' if v == 'bad' else '0.1')); sys.exit(v == 'bad')"
)
SLUG = "acme/widget"


def git(repo: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("actions-e2e")
    src = root / "src"
    src.mkdir()
    git(src, "init", "-q", "-b", "main")
    shas = []
    for text in ("ok", "ok", "bad"):
        (src / "bug.txt").write_text(text + "\n")
        (src / ".github" / "workflows").mkdir(parents=True, exist_ok=True)
        (src / ".github" / "workflows" / "revert-bisect-step.yml").write_text(STEP_WORKFLOW.read_text())
        git(src, "add", "-A")
        git(src, "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", f"bug.txt: {text}", "--allow-empty")
        shas.append(git(src, "rev-parse", "HEAD"))
    state = SandboxState(root / "sandbox")
    state.create_repo(SLUG, source=src)
    state.add_user("bot", token="bot-token")
    state.set_permission(SLUG, "bot", "write")
    step_runner_machine(state)
    base, stop = run_in_thread(state)
    gh = connect(base, "bot-token", throttle=False)
    yield dict(
        state=state, base=base, shas=shas, src=src, actions=GitHubActions(gh.get_repo(SLUG), "revert-bisect-step.yml")
    )
    state.actions.shutdown()
    stop()


def backend(world, labels=("self-hosted",), **limits) -> GitHubActionsBackend:
    def inputs_for(spec: StepSpec, correlation: str) -> dict[str, str]:
        request = Request(f"{world['base']}/{SLUG}.git", spec, 1, "t", "m", 0.5)
        return step_inputs(request, list(labels), 5, correlation)

    return GitHubActionsBackend(world["actions"], "main", inputs_for, 4, list(labels), Limits(poll_s=0.2, **limits))


def spec(sha: str, step_id: int, command=(RUNNER_PYTHON, "-c", TEST)) -> StepSpec:
    return StepSpec(step_id, sha, tuple(command), 60, r"metric=(?P<value>[0-9.]+)")


SLEEPER = (RUNNER_PYTHON, "-c", "import time; time.sleep(60)")


def running(world, b: GitHubActionsBackend, step: int):
    """The sandbox run of `step`, once its job is in progress on the runner."""
    deadline = time.monotonic() + 30
    while not (
        runs := [
            r
            for r in world["state"].actions.runs.values()
            if r.inputs.get("step") == str(step) and r.status == "in_progress"
        ]
    ):
        assert time.monotonic() < deadline, f"step {step} never started"
        b.wait(0.2)
    return runs[0]


def collect(b: GitHubActionsBackend, n: int, timeout: float = 120) -> dict[int, object]:
    got, deadline = {}, time.monotonic() + timeout
    while len(got) < n and time.monotonic() < deadline:
        for r in b.wait(1.0):
            got[r.step_id] = r
    assert len(got) == n, f"only {sorted(got)} of {n} steps finished"
    return got


def test_steps_run_as_dispatched_workflow_runs_and_report_through_artifacts(world):
    b = backend(world)
    good, bad = world["shas"][0], world["shas"][2]
    b.submit(spec(good, 101))
    b.submit(spec(bad, 102))
    got = collect(b, 2)
    assert (got[101].exit_code, got[101].metric, got[101].infra_reason) == (0, 0.1, None)
    assert (got[102].exit_code, got[102].metric, got[102].infra_reason) == (1, 0.9, None)
    assert "/actions/runs/" in got[101].runner and got[101].runner.startswith("sandbox-self-hosted")
    runs = [r for r in world["state"].actions.runs.values() if r.inputs.get("step") in ("101", "102")]
    assert len(runs) == 2 and all(r.inputs["sha"] in (good, bad) and "[rb-" in r.display_title for r in runs)
    assert all([a.name for a in r.artifacts] == [f"revert-bisect-step-{r.inputs['step']}"] for r in runs)


def test_a_204_dispatch_is_found_by_its_run_name(world, monkeypatch):
    monkeypatch.setattr(world["state"].actions, "run_details", False)
    b = backend(world)
    b.submit(spec(world["shas"][2], 201))
    assert b.waiting() == {201: "dispatched; waiting for GitHub to create the run"}
    assert collect(b, 1)[201].exit_code == 1


def test_a_run_no_runner_can_take_waits_visibly_then_is_infra_and_cancelled(world):
    b = backend(world, labels=("self-hosted", "8-gpu-h200"), queue_timeout_s=3)
    b.submit(spec(world["shas"][0], 301))
    assert b.wait(1.5) == []
    assert b.waiting()[301].startswith("queued 0 min for a runner labelled self-hosted, 8-gpu-h200")
    [got] = collect(b, 1).values()
    assert got.exit_code is None and "no runner labelled self-hosted, 8-gpu-h200 started run" in got.infra_reason
    [run] = [r for r in world["state"].actions.runs.values() if r.inputs.get("step") == "301"]
    assert run.done.wait(10) and run.conclusion == "cancelled"


def test_a_run_cancelled_on_github_is_infra(world):
    b = backend(world)
    b.submit(spec(world["shas"][0], 401, SLEEPER))
    world["state"].actions.cancel(running(world, b, 401))  # by hand, or the runner service stopped
    [got] = collect(b, 1).values()
    assert "was cancelled on GitHub" in got.infra_reason


def test_a_run_that_times_out_is_infra(world, monkeypatch):
    monkeypatch.setattr(world["state"].actions, "minute_s", 0.05)  # the job's timeout-minutes: 5 + 30 -> 1.75 s
    b = backend(world)
    b.submit(spec(world["shas"][0], 501, SLEEPER))
    [got] = collect(b, 1).values()
    assert "timed out on sandbox-self-hosted" in got.infra_reason


@pytest.mark.parametrize(
    "program, reason",
    [
        ("print('the runner package is missing')", "without the artifact revert-bisect-step-{step}/result.json"),
        (
            "import json, os, pathlib; d = pathlib.Path(os.environ['RUNNER_TEMP'], 'revert-bisect'); d.mkdir();"
            " (d / 'result.json').write_text(json.dumps({'schema': 99}))",
            "invalid result.json: result.json schema 99 is not 1",
        ),
    ],
)
def test_a_missing_or_invalid_artifact_is_infra(world, program, reason, monkeypatch):
    """What a runner with a broken or different bot version leaves behind."""
    state = world["state"]
    wf = state.actions.workflow(state.repo(SLUG), "revert-bisect-step.yml")
    monkeypatch.setattr(wf, "argv", [sys.executable, "-c", program])
    b = backend(world)
    step = 601 if "missing" in program else 602
    b.submit(spec(world["shas"][0], step))
    [got] = collect(b, 1).values()
    assert reason.format(step=step) in got.infra_reason


def test_cancel_stops_the_run_on_the_runner(world):
    b = backend(world)
    b.submit(spec(world["shas"][0], 701, SLEEPER))
    run = running(world, b, 701)
    b.cancel([701])
    assert run.done.wait(20) and run.conclusion == "cancelled"
    assert b.wait(0.5) == [] and b.free == 4


def test_dispatch_inputs_match_what_the_workflow_declares():
    import yaml

    declared = yaml.safe_load(STEP_WORKFLOW.read_text())[True]["workflow_dispatch"]["inputs"]
    request = Request("https://github.com/o/r.git", spec("a" * 40, 1), 3, "t")
    inputs = step_inputs(request, ["self-hosted", "4-gpu-h100"], 90, "rb1-x")
    assert set(inputs) == set(declared) and all(isinstance(v, str) for v in inputs.values())
    assert json.loads(inputs["runs_on"]) == ["self-hosted", "4-gpu-h100"] and inputs["timeout_minutes"] == "120"
    assert Request.from_json(json.loads(inputs["spec"])) == request


def test_a_restarted_driver_adopts_runs_still_going_instead_of_losing_them(world, tmp_path):
    """The bot died after dispatching a step: its run kept going on the runner. The next driver finds
    it by the ref stored with the step, waits for it, and does not dispatch that commit again."""
    from bot.adapters.git.repo import GitRepo
    from bot.adapters.store.db import connect
    from bot.adapters.store.store import NewStep, Store
    from bot.domain.bisect.ledger import Result, entries
    from bot.domain.bisect.model import Kind
    from bot.service import setup
    from bot.service.config import BisectConfig
    from bot.service.driver import Driver

    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    good, bad = world["shas"][0], world["shas"][2]
    config = BisectConfig(
        command=(RUNNER_PYTHON, "-c", TEST),
        workers=4,
        metric_regex=r"metric=(?P<value>[0-9.]+)",
        threshold=0.5,
        calibration_runs=1,
    )
    loaded = setup.create(store, GitRepo(world["src"]), good, bad, config)
    (test,) = entries(loaded.row.tests)  # the step carries the bisection's one test, as the driver records it
    carried = {test.test: Result(Kind.CALIBRATE)}
    [step_id] = store.add_steps(loaded.id, [NewStep(good, "calibrate", 0, "rb-adopt-me", results=carried)])
    before = backend(world)  # the process that dies right after dispatching
    before.submit(StepSpec(step_id, good, config.command, 60, config.metric_regex, ref="rb-adopt-me"))
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, backend(world)).run()
    assert outcome.culprit == bad
    row = store.get(loaded.id)
    adopted = next(s for s in row.steps if s.id == step_id)
    assert (adopted.state, adopted.verdict) == ("done", "good")
    assert not [s for s in row.steps if s.state == "lost"]
    runs = [r for r in world["state"].actions.runs.values() if "[rb-adopt-me]" in r.display_title]
    assert len(runs) == 1
    assert sum(1 for s in row.steps if s.sha == good and s.kind == "calibrate") == 1  # GOOD was not dispatched again


def test_an_infra_ending_is_retried_and_its_reason_is_in_the_status_comment(world, tmp_path):
    """A run cancelled on GitHub mid-bisection: the commit is dispatched again, the culprit is still found,
    and the status comment names what happened to the lost run."""
    import threading

    from bot.adapters.git.repo import GitRepo
    from bot.adapters.store.db import connect
    from bot.adapters.store.store import Store
    from bot.service import setup
    from bot.service.config import BisectConfig
    from bot.service.driver import Driver
    from bot.service.status import render_status

    marker = tmp_path / "first-run-started"
    slow_first = (
        f"import pathlib, sys, time; m = pathlib.Path({str(marker)!r})\n"
        "if not m.exists(): m.write_text('x'); time.sleep(60)\n" + TEST
    )
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    good, bad = world["shas"][0], world["shas"][2]
    config = BisectConfig(
        command=(RUNNER_PYTHON, "-c", slow_first),
        workers=1,
        metric_regex=r"metric=(?P<value>[0-9.]+)",
        threshold=0.5,
        calibration_runs=1,
    )
    loaded = setup.create(store, GitRepo(world["src"]), good, bad, config)

    def cancel_the_first_run():
        deadline = time.monotonic() + 60
        while not marker.exists() and time.monotonic() < deadline:
            time.sleep(0.1)
        run = next(
            r
            for r in world["state"].actions.runs.values()
            if r.status == "in_progress" and "revert-bisect step" in r.display_title
        )
        world["state"].actions.cancel(run)

    canceller = threading.Thread(target=cancel_the_first_run)
    canceller.start()
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, backend(world)).run()
    canceller.join()
    assert outcome.culprit == bad
    row = store.get(loaded.id)
    lost = [s for s in row.steps if s.verdict == "infra"]
    assert len(lost) == 1 and "was cancelled on GitHub" in lost[0].infra_reason
    assert any(s.sha == lost[0].sha and s.verdict in ("good", "bad") for s in row.steps)  # dispatched again
    comment = render_status("t", loaded.problem, None, row)
    assert "1 of them infrastructure failures" in comment and "was cancelled on GitHub" in comment
