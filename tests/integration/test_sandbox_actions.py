"""The sandbox's GitHub Actions emulation (sandbox/actions.py) through real PyGithub: workflows,
dispatches (with and without `return_run_details`), runs, jobs, logs, artifacts, cancellation and signed
`workflow_run` webhooks -- every REST response checked against the OpenAPI subset (tests/support/sandbox.py)."""

from __future__ import annotations

import contextlib
import io
import json
import os
import threading
import time
import zipfile
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import ClassVar

import pytest
import requests
from github import Auth, Github

from bot.ingress.webhooks.signature import verify
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from sandbox.state import NIGHTLY_WORKFLOW
from scenarios.mamba_track_boundary import build
from tests.support import FIXTURES
from tests.support.net import free_port
from tests.support.sandbox import ContractChecker

SECRET = "sandbox-hook-secret"
ECHO = (
    "sh",
    "-c",
    (
        'echo "hello $INPUT_GREETING at $REVERT_BISECT_SHA run $GITHUB_RUN_ID in $(pwd)"; '
        'test -f mini_sglang/__init__.py && echo "worktree ok"; '
        'printf \'{"metric": 1.5, "sha": "%s"}\' "$REVERT_BISECT_SHA" > "$REVERT_BISECT_RESULT"; '
        "exit ${EXIT:-0}"
    ),
)


class Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict, bytes]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(202)
        self.end_headers()

    def log_message(self, *args):
        pass


@contextlib.contextmanager
def actions_sandbox(root: Path):
    """The scenario in a sandbox with three bound workflows and a webhook receiver of its own
    (`received`: the deliveries of this sandbox only)."""
    scenario = build(root / "scenario", commits=12, seed=1)
    state = SandboxState(root / "github")
    seeded = seed_from_scenario(state, root / "scenario")
    state.bind_workflow(seeded.repo, "echo.yml", list(ECHO), env={"EXIT": "0"})
    state.bind_workflow(seeded.repo, "fails.yml", list(ECHO), env={"EXIT": "3"})
    sleeper = f'echo $$ > "{root}/sleep.pid"; echo started; exec sleep 120'
    state.bind_workflow(seeded.repo, "sleep.yml", ["sh", "-c", sleeper])
    handler = type("Receiver", (Receiver,), {"received": []})
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    state.add_hook(f"http://127.0.0.1:{receiver.server_address[1]}/hook", SECRET)
    base_url, stop = run_in_thread(state)
    state.actions.base_url = base_url
    # the Actions operations are checked here (the shared checker leaves them to this module)
    checker = ContractChecker(base_url, excluded=("/app/installations/", "/repos/{owner}/{repo}/installation"))
    try:
        yield {
            "state": state,
            "seeded": seeded,
            "scenario": scenario,
            "base": base_url,
            "checker": checker,
            "root": root,
            "received": handler.received,
        }
    finally:
        state.actions.shutdown()
        stop()
        receiver.shutdown()


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    with actions_sandbox(tmp_path_factory.mktemp("actions")) as sb:
        yield sb


def record(monkeypatch, checker: ContractChecker) -> None:
    """Check every response of the sandbox at `checker.base_url` against the OpenAPI subset."""
    original = requests.Session.send

    def send(self, request, **kwargs):
        response = original(self, request, **kwargs)
        # download links point at the blob host (another host name: not the API's base URL), not the API
        if request.url.startswith(checker.base_url):
            first = response.history[0] if response.history else response  # a followed 302: check the 302
            first.content  # noqa: B018
            checker.check(request, first)
        return response

    monkeypatch.setattr(requests.Session, "send", send)


@pytest.fixture(autouse=True)
def contract(sandbox, monkeypatch):
    checker: ContractChecker = sandbox["checker"]
    record(monkeypatch, checker)
    before = len(checker.exchanges)
    yield checker
    bad = [e for e in checker.exchanges[before:] if e.error]
    assert not bad, "\n".join(f"{e.method} {e.url} -> {e.status} ({e.operation}): {e.error}" for e in bad)


def gh(sandbox) -> Github:
    token = sandbox["seeded"].tokens[sandbox["seeded"].maintainer]
    return Github(
        base_url=sandbox["base"],
        auth=Auth.Token(token),
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    )


def auth(sandbox) -> dict:
    return {"Authorization": f"token {sandbox['seeded'].tokens[sandbox['seeded'].maintainer]}"}


def wait_run(sandbox, run_id: int, timeout: float = 50):
    return sandbox["state"].actions.wait(run_id, timeout)


def test_workflows_discovered_and_the_nightly_runs_its_own_jobs(sandbox):
    state, repo = sandbox["state"], sandbox["state"].repo(sandbox["seeded"].repo)
    paths = {w.path: w for w in state.actions.workflows_of(repo)}
    assert {".github/workflows/pr-test.yml", NIGHTLY_WORKFLOW} <= set(paths)
    nightly = paths[NIGHTLY_WORKFLOW]
    assert nightly.name == "Nightly Test" and nightly.argv is None  # no stand-in command: its own steps run
    assert list(nightly.spec.jobs) == ["stage-a-test-cpu", "stage-b-test-accuracy", "multimodal-gen-test"]
    assert paths[".github/workflows/pr-test.yml"].argv is None
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    wf = r.get_workflow("nightly-test.yml")
    assert (wf.name, wf.path, wf.state) == ("Nightly Test", NIGHTLY_WORKFLOW, "active")
    assert r.get_workflow(wf.id).path == NIGHTLY_WORKFLOW
    assert wf.url.startswith(sandbox["base"] + "/")


def test_dispatch_without_and_with_run_details(sandbox):
    # a workflow of its own: its run numbers and run list are this test's alone, whatever ran before it
    sandbox["state"].bind_workflow(sandbox["seeded"].repo, "details.yml", list(ECHO), env={"EXIT": "0"})
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    wf = r.get_workflow("details.yml")
    assert wf.create_dispatch("main", {"greeting": "plain"}, throw=True) is True  # 204
    run = wf.create_dispatch("main", {"greeting": "detailed"}, throw=True, return_run_details=True)  # 200
    assert run.id and run.url == f"{sandbox['base']}/repos/{sandbox['seeded'].repo}/actions/runs/{run.id}"
    done = wait_run(sandbox, run.id)
    assert done.conclusion == "success" and done.inputs == {"greeting": "detailed"}

    got = r.get_workflow_run(run.id)
    head = sandbox["scenario"].bad
    assert (got.status, got.conclusion, got.event, got.head_sha, got.head_branch) == (
        "completed",
        "success",
        "workflow_dispatch",
        head,
        "main",
    )
    assert got.path == ".github/workflows/details.yml" and got.workflow_id == wf.id and got.run_number == 2
    assert got.jobs_url.startswith(sandbox["base"] + "/")

    for state_run in sandbox["state"].actions.runs_of(sandbox["state"].repo(sandbox["seeded"].repo)):
        wait_run(sandbox, state_run.id)
    runs = wf.get_runs(branch="main", event="workflow_dispatch")
    assert runs.totalCount == 2
    assert [x.id for x in runs] == sorted((x.id for x in runs), reverse=True)  # newest first
    assert next(iter(wf.get_runs(head_sha=head, status="success"))).id == run.id
    assert wf.get_runs(branch="no-such-branch").totalCount == 0
    assert wf.get_runs(status="failure").totalCount == 0


def test_jobs_logs_and_artifacts(sandbox):
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    sha = sandbox["scenario"].shas[3]
    run = r.get_workflow("echo.yml").create_dispatch(sha, {"greeting": "logs"}, throw=True, return_run_details=True)
    wait_run(sandbox, run.id)
    run = r.get_workflow_run(run.id)
    assert run.head_sha == sha and run.head_branch is None
    jobs = list(run.jobs())
    assert len(jobs) == 1 and jobs[0].conclusion == "success" and jobs[0].run_id == run.id
    location = jobs[0].logs_url()  # the 302's Location
    assert location.startswith(sandbox["state"].blobs.base_url + "/") and not location.startswith(sandbox["base"])
    text = requests.get(location, timeout=10).content.decode("utf-8-sig")  # signed: no credentials; UTF-8, a BOM
    assert f"hello logs at {sha} run {run.id}" in text and "worktree ok" in text
    assert text.splitlines()[0][:4].isdigit() and "Z " in text.splitlines()[0]  # timestamped lines
    assert requests.get(location.replace("sig=", "sig=0"), timeout=10).status_code == 403

    arts = list(run.get_artifacts())
    assert [a.name for a in arts] == ["result"]
    resp = requests.get(arts[0].archive_download_url, headers=auth(sandbox), timeout=10)  # follows the 302
    assert resp.status_code == 200 and resp.history and resp.history[0].status_code == 302
    with zipfile.ZipFile(io.BytesIO(resp.content)) as z:
        assert z.namelist() == ["result.json"]
        assert json.loads(z.read("result.json")) == {"metric": 1.5, "sha": sha}


def test_failing_command_and_errors(sandbox):
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    run = r.get_workflow("fails.yml").create_dispatch("main", throw=True, return_run_details=True)
    assert wait_run(sandbox, run.id).conclusion == "failure"
    run = r.get_workflow_run(run.id)
    assert run.conclusion == "failure"
    text = requests.get(next(iter(run.jobs())).logs_url(), timeout=10).text
    assert "Process completed with exit code 3." in text
    base, h = sandbox["base"] + f"/repos/{sandbox['seeded'].repo}/actions", auth(sandbox)
    with requests.Session() as s:
        assert s.post(f"{base}/runs/{run.id}/cancel", headers=h, timeout=10).status_code == 409
        assert s.get(f"{base}/runs/999999", headers=h, timeout=10).status_code == 404
        assert s.get(f"{base}/workflows/nope.yml", headers=h, timeout=10).status_code == 404
        assert s.post(f"{base}/workflows/echo.yml/dispatches", json={}, headers=h, timeout=10).status_code == 422
        assert (
            s.post(f"{base}/workflows/pr-test.yml/dispatches", json={"ref": "main"}, headers=h, timeout=10).status_code
            == 422
        )  # no workflow_dispatch trigger
        assert (
            s.post(
                f"{base}/workflows/echo.yml/dispatches", json={"ref": "no-such-branch"}, headers=h, timeout=10
            ).status_code
            == 422
        )


def test_cancel_kills_the_process(sandbox):
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    pid_file = sandbox["root"] / "sleep.pid"
    pid_file.unlink(missing_ok=True)  # an earlier sleep run's pid is not this run's
    run = r.get_workflow("sleep.yml").create_dispatch("main", throw=True, return_run_details=True)
    deadline = time.monotonic() + 20
    while not (pid_file.exists() and pid_file.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.05)
    pid = int(pid_file.read_text())
    assert r.get_workflow_run(run.id).status == "in_progress"
    assert r.get_workflow_run(run.id).cancel() is True  # 202
    done = wait_run(sandbox, run.id, 15)
    assert done.conclusion == "cancelled"
    assert not Path(f"/proc/{pid}").exists() or "\nState:\tZ" in Path(f"/proc/{pid}/status").read_text()
    run = r.get_workflow_run(run.id)
    assert (run.status, run.conclusion) == ("completed", "cancelled")
    assert "started" in requests.get(next(iter(run.jobs())).logs_url(), timeout=10).text


def test_the_nightly_runs_like_sglangs_and_its_kl_test_fails_at_head_and_passes_at_good(sandbox):
    """The scenario's nightly as SGLang's PR Test Base runs on schedule: CPU suite partitions, the accuracy stage
    that alone runs the KL test (its reading in run_suite's report), a pull-request-only job skipped."""
    state, seeded, scenario = sandbox["state"], sandbox["seeded"], sandbox["scenario"]
    bad = state.start_run(seeded.repo, NIGHTLY_WORKFLOW, "main", event="schedule")
    good = state.start_run(seeded.repo, NIGHTLY_WORKFLOW, scenario.good, event="workflow_dispatch")
    r = gh(sandbox).get_repo(seeded.repo)
    wait_run(sandbox, bad, 120), wait_run(sandbox, good, 120)
    jobs = {x: {j.name: j for j in r.get_workflow_run(x).jobs()} for x in (bad, good)}
    accuracy = "stage-b-test-accuracy / stage-b-test-accuracy (0)"
    assert set(jobs[bad]) == {
        "stage-a-test-cpu / stage-a-test-cpu (0)",
        "stage-a-test-cpu / stage-a-test-cpu (1)",
        accuracy,
        "multimodal-gen-test",
    }
    assert jobs[bad]["multimodal-gen-test"].conclusion == "skipped"
    logs = {x: requests.get(jobs[x][accuracy].logs_url(), timeout=10).text for x in (bad, good)}
    assert jobs[bad][accuracy].conclusion == "failure", logs[bad][-2000:]
    assert jobs[good][accuracy].conclusion == "success", logs[good][-2000:]
    assert "avg_kl_div=" in logs[bad] and "avg_kl_div=" in logs[good]
    assert "/test/nightly/test_kl_decode_cache_hit.py (exit code 1)" in logs[bad]
    assert '{"file": "test/nightly/test_kl_decode_cache_hit.py", "passed": true' in logs[good]
    run = r.get_workflow_run(bad)
    assert (run.event, run.head_branch, run.head_sha, run.name) == ("schedule", "main", scenario.bad, "Nightly Test")
    assert run.display_title == "Scheduled Full Run" and run.conclusion == "failure"
    scheduled = r.get_workflow("nightly-test.yml").get_runs(event="schedule", branch="main")
    assert [x.id for x in scheduled] == [bad]


def test_signed_workflow_run_webhooks(sandbox):
    """The runs this test starts (one that succeeds, one cancelled while in progress) each send their
    `workflow_run` deliveries, signed; what other tests of the module did is not needed."""
    state, received = sandbox["state"], sandbox["received"]
    repo = state.repo(sandbox["seeded"].repo)
    echo = state.start_run(repo.full_name, "echo.yml", "main", event="workflow_dispatch")
    sleeping = state.start_run(repo.full_name, "sleep.yml", "main", event="workflow_dispatch")
    assert until(lambda: status_of(sandbox, sleeping) == "in_progress", 20)
    assert gh(sandbox).get_repo(repo.full_name).get_workflow_run(sleeping).cancel() is True
    runs = [wait_run(sandbox, echo), wait_run(sandbox, sleeping, 15)]
    assert runs and all(x.done.is_set() for x in runs)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        completed = {json.loads(b)["workflow_run"]["id"] for h, b in received if json.loads(b)["action"] == "completed"}
        if {x.id for x in runs} <= completed:
            break
        time.sleep(0.1)
    assert {x.id for x in runs} <= completed
    for headers, body in received:
        assert headers["x-github-event"] == "workflow_run"
        assert verify(SECRET.encode(), body, headers["x-hub-signature-256"])
        assert not verify(b"wrong secret", body, headers["x-hub-signature-256"])
    assert len({h["x-github-delivery"] for h, _ in received}) == len(received)
    fixture = json.loads((FIXTURES / "github/webhooks/workflow_run.completed.json").read_text())
    sleep_run = next(x for x in runs if x.conclusion == "cancelled")
    payload = next(
        json.loads(b)
        for _, b in received
        if json.loads(b)["action"] == "completed" and json.loads(b)["workflow_run"]["id"] == sleep_run.id
    )
    assert set(fixture["workflow_run"]) <= set(payload["workflow_run"])
    assert {"action", "repository", "sender", "workflow", "workflow_run"} <= set(payload)
    assert payload["repository"]["full_name"] == repo.full_name
    assert payload["workflow_run"]["conclusion"] == "cancelled" and payload["workflow"]["path"].endswith("sleep.yml")
    actions = [json.loads(b)["action"] for _, b in received if json.loads(b)["workflow_run"]["id"] == sleep_run.id]
    assert actions == ["requested", "in_progress", "completed"]
    recorded = [d for d in state.hook_deliveries if d["run_id"] == sleep_run.id]
    assert [d["status"] for d in recorded] == [202, 202, 202] and all(d["attempts"] == 1 for d in recorded)


def test_webhook_retries_then_gives_up(tmp_path):
    state = SandboxState(tmp_path / "gh")
    repo = state.create_repo("o/r")
    state.actions.retry_delays = (0.05, 0.05)
    state.add_hook("http://127.0.0.1:9/unreachable", SECRET)
    import subprocess

    src = tmp_path / "src"
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    subprocess.run(
        [
            "git",
            "-C",
            str(src),
            "-c",
            "user.name=a",
            "-c",
            "user.email=a@b",
            "commit",
            "-q",
            "--allow-empty",
            "-m",
            "x",
        ],
        check=True,
    )
    subprocess.run(
        ["git", "-C", str(src), "push", "-q", str(repo.path), "main"],
        check=True,
        env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"},
    )
    state.bind_workflow("o/r", "t.yml", ["true"])
    run_id = state.start_run("o/r", "t.yml", "main")
    assert state.actions.wait(run_id, 20).conclusion == "success"
    deadline = time.monotonic() + 10
    while len(state.hook_deliveries) < 3 and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [d["action"] for d in state.hook_deliveries] == ["requested", "in_progress", "completed"]
    assert all(d["attempts"] == 3 and d["status"] is None and d["error"] for d in state.hook_deliveries)


def test_timeout_concludes_timed_out(sandbox):
    state, seeded = sandbox["state"], sandbox["seeded"]
    state.bind_workflow(seeded.repo, "slow.yml", ["sh", "-c", "echo slow; exec sleep 60"], timeout=0.5)
    run_id = state.start_run(seeded.repo, "slow.yml", "main", event="workflow_dispatch")
    run = wait_run(sandbox, run_id, 15)
    assert run.conclusion == "timed_out" and "exceeded the maximum execution time" in "\n".join(run.log)


def test_actions_contract_coverage(tmp_path, monkeypatch):
    """Every Actions operation of the subset is exercised by the tests above and validated (the statuses GitHub
    sends). They run again here, on a sandbox of this test's own, so the check stands alone in any order."""
    with actions_sandbox(tmp_path) as own:
        record(monkeypatch, own["checker"])
        for exercise in (
            test_dispatch_without_and_with_run_details,
            test_jobs_logs_and_artifacts,
            test_failing_command_and_errors,
            test_cancel_kills_the_process,
        ):
            exercise(own)
    assert not own["checker"].failures(), [e.error for e in own["checker"].failures()]
    covered = own["checker"].covered()
    expected = {
        "actions/get-workflow": {200},
        "actions/create-workflow-dispatch": {200, 204},
        "actions/list-workflow-runs": {200},
        "actions/get-workflow-run": {200},
        "actions/list-jobs-for-workflow-run": {200},
        "actions/download-job-logs-for-workflow-run": {302},
        "actions/list-workflow-run-artifacts": {200},
        "actions/download-artifact": {302},
        "actions/cancel-workflow-run": {202, 409},
    }
    missing = {op: codes - covered.get(op, set()) for op, codes in expected.items() if codes - covered.get(op, set())}
    assert not missing


def test_cli_hook_and_schedule(tmp_path):
    """`python -m sandbox --scenario DIR --hook URL --hook-secret S --schedule`: the scheduled nightly
    run on main fails (HEAD has the regression) and its signed `workflow_run.completed` arrives."""
    import subprocess
    import sys

    build(tmp_path / "scenario", commits=8, seed=2)
    got: list[tuple[dict, bytes]] = []

    class Sink(BaseHTTPRequestHandler):
        def do_POST(self):
            body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
            got.append(({k.lower(): v for k, v in self.headers.items()}, body))
            self.send_response(204)
            self.end_headers()

        def log_message(self, *args):
            pass

    sink = ThreadingHTTPServer(("127.0.0.1", 0), Sink)
    threading.Thread(target=sink.serve_forever, daemon=True).start()
    # a port number, not a bound socket: `python -m sandbox` runs in another process and takes --port
    port = free_port()
    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "sandbox",
            "--scenario",
            str(tmp_path / "scenario"),
            "--port",
            str(port),
            "--root",
            str(tmp_path / "gh"),
            "--schedule",
            "--hook",
            f"http://127.0.0.1:{sink.server_address[1]}/",
            "--hook-secret",
            SECRET,
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
    try:
        deadline = time.monotonic() + 50
        done = []
        while time.monotonic() < deadline and not done:
            done = [json.loads(b) for _, b in got if json.loads(b)["action"] == "completed"]
            time.sleep(0.1)
        assert done, "no workflow_run.completed delivered"
        event = done[0]
        assert event["workflow_run"]["event"] == "schedule" and event["workflow_run"]["head_branch"] == "main"
        assert event["workflow_run"]["conclusion"] == "failure"
        assert event["workflow_run"]["url"].startswith(f"http://127.0.0.1:{port}/repos/")
        assert all(verify(SECRET.encode(), b, h["x-hub-signature-256"]) for h, b in got)
    finally:
        proc.terminate()
        proc.wait(10)
        sink.shutdown()


# -- workflow semantics read from the workflow file (sandbox/workflow.py) --

STEP_WORKFLOW = Path(__file__).resolve().parents[2] / "runners" / "github" / "revert-bisect-step.yml"


class JobReceiver(Receiver):
    received: ClassVar[list[tuple[dict, bytes]]] = []


def repo_with(sandbox, name: str, files: dict[str, str]) -> str:
    """A new repository of the sandbox (same owner and maintainer) whose main branch holds `files`."""
    import subprocess

    src = sandbox["root"] / f"src-{name}"
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    (src / "README.md").write_text(f"# {name}\n")
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(src), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "-m", "workflows"],
        check=True,
    )
    full = f"{sandbox['seeded'].repo.split('/')[0]}/{name}"
    state = sandbox["state"]
    state.create_repo(full, source=src)
    state.set_permission(full, sandbox["seeded"].maintainer, "maintain")
    return full


def dispatch(sandbox, full: str, workflow: str, inputs: dict | None = None) -> requests.Response:
    url = f"{sandbox['base']}/repos/{full}/actions/workflows/{workflow}/dispatches"
    body = {"ref": "main", "return_run_details": True, **({"inputs": inputs} if inputs is not None else {})}
    return requests.post(url, json=body, headers=auth(sandbox), timeout=10)


def started(sandbox, full: str, workflow: str, inputs: dict | None = None) -> int:
    resp = dispatch(sandbox, full, workflow, inputs)
    assert resp.status_code == 200, resp.text
    return resp.json()["workflow_run_id"]


def status_of(sandbox, run_id: int) -> str:
    return sandbox["state"].actions.run(run_id).status


def until(predicate, timeout: float = 15) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def passed_over(sandbox, run_id: int, times: int = 2) -> bool:
    """The run's job was looked at `times` times by the scheduler and no runner took it: "still queued" is then
    an answer, not what a slow scheduler shows before it got to the job."""
    jobs = sandbox["state"].actions.run(run_id).jobs
    return until(lambda: bool(jobs) and jobs[0].passed_over >= times)


def log_of(sandbox, run_id: int) -> str:
    return "\n".join(sandbox["state"].actions.run(run_id).log)


def job_json(sandbox, full: str, run_id: int) -> dict:
    resp = requests.get(f"{sandbox['base']}/repos/{full}/actions/runs/{run_id}/jobs", headers=auth(sandbox), timeout=10)
    assert resp.status_code == 200
    return resp.json()["jobs"][0]


def artifact_zip(sandbox, full: str, run_id: int, name: str) -> zipfile.ZipFile:
    arts = requests.get(
        f"{sandbox['base']}/repos/{full}/actions/runs/{run_id}/artifacts", headers=auth(sandbox), timeout=10
    ).json()["artifacts"]
    art = next(a for a in arts if a["name"] == name)
    resp = requests.get(art["archive_download_url"], headers=auth(sandbox), timeout=10)
    return zipfile.ZipFile(io.BytesIO(resp.content))


INPUTS_YML = """\
name: Inputs
run-name: "inputs ${{ inputs.who }} ${{ github.event.inputs.mode }} ${{ vars.GREETING }}"
on:
  workflow_dispatch:
    inputs:
      who: {required: true, type: string}
      mode: {default: fast, type: choice, options: [fast, slow]}
      note: {type: string}
jobs:
  j:
    runs-on: self-hosted
    steps: [{run: "true"}]
"""
NO_INPUTS_YML = (
    "name: No inputs\non:\n  workflow_dispatch:\njobs:\n  j:\n    runs-on: self-hosted\n    steps: [{run: 'true'}]\n"
)


def test_dispatch_inputs_validated_like_github(sandbox, monkeypatch):
    from github import GithubException

    full = repo_with(
        sandbox, "inputs", {".github/workflows/inputs.yml": INPUTS_YML, ".github/workflows/none.yml": NO_INPUTS_YML}
    )
    state = sandbox["state"]
    state.bind_workflow(full, "inputs.yml", ["true"])
    state.bind_workflow(full, "none.yml", ["true"])
    assert state.actions.workflow(state.repo(full), "inputs.yml").spec is not None  # bind kept the parsed file
    monkeypatch.setitem(state.actions.variables, "GREETING", "hi")
    wf = gh(sandbox).get_repo(full).get_workflow("inputs.yml")
    with pytest.raises(GithubException) as err:
        wf.create_dispatch("main", {"who": "ada", "name": "x"}, throw=True)
    assert err.value.status == 422 and err.value.data["message"] == 'Unexpected inputs provided: ["name"]'
    cases = [
        ({"mode": "slow"}, "Required input 'who' not provided"),
        (
            {"who": "ada", "mode": "medium"},
            "Provided value 'medium' for input 'mode' not in the list of allowed values",
        ),
        ({f"i{n}": "x" for n in range(26)}, "you may only define up to 25 `inputs` for a `workflow_dispatch` event"),
    ]
    for inputs, message in cases:
        resp = dispatch(sandbox, full, "inputs.yml", inputs)
        assert (resp.status_code, resp.json()["message"]) == (422, message)
    resp = dispatch(sandbox, full, "none.yml", {"a": "1"})  # `workflow_dispatch:` declaring no inputs
    assert (resp.status_code, resp.json()["message"]) == (422, 'Unexpected inputs provided: ["a"]')
    assert state.actions.runs_of(state.repo(full)) == []
    assert wait_run(sandbox, started(sandbox, full, "none.yml")).conclusion == "success"
    run = wf.create_dispatch("main", {"who": "ada"}, throw=True, return_run_details=True)
    done = wait_run(sandbox, run.id)
    assert done.inputs == {"who": "ada", "mode": "fast"}  # the declared default applied
    got = gh(sandbox).get_repo(full).get_workflow_run(run.id)
    assert got.display_title == "inputs ada fast hi" and got.conclusion == "success"


LABELS_YML = """\
name: Labels
on:
  workflow_dispatch:
    inputs:
      runs_on: {required: true}
jobs:
  gpu:
    runs-on: ${{ fromJSON(inputs.runs_on) }}
    steps: [{run: "true"}]
"""


def test_unmatched_runner_labels_stay_queued_until_cancelled(sandbox, monkeypatch):
    full = repo_with(sandbox, "labels", {".github/workflows/labels.yml": LABELS_YML})
    state = sandbox["state"]
    state.bind_workflow(full, "labels.yml", ["sh", "-c", "echo ran"])
    gpu = started(sandbox, full, "labels.yml", {"runs_on": '["self-hosted", "4-gpu-h100"]'})
    ok = started(sandbox, full, "labels.yml", {"runs_on": '["Self-Hosted", "LINUX"]'})  # case-insensitive
    assert wait_run(sandbox, ok).conclusion == "success"
    assert job_json(sandbox, full, ok)["labels"] == ["Self-Hosted", "LINUX"]
    assert passed_over(sandbox, gpu)
    assert status_of(sandbox, gpu) == "queued" and "echo ran" not in log_of(sandbox, gpu)
    job = job_json(sandbox, full, gpu)
    assert (job["status"], job["labels"], job["runner_name"]) == ("queued", ["self-hosted", "4-gpu-h100"], None)
    r = gh(sandbox).get_repo(full)
    assert r.get_workflow_run(gpu).status == "queued"
    assert r.get_workflow_run(gpu).cancel() is True
    assert wait_run(sandbox, gpu, 10).conclusion == "cancelled"
    assert (r.get_workflow_run(gpu).status, r.get_workflow_run(gpu).conclusion) == ("completed", "cancelled")
    # a runner with the labels coming online picks a waiting job up
    later = started(sandbox, full, "labels.yml", {"runs_on": '["self-hosted", "4-gpu-h100"]'})
    assert passed_over(sandbox, later)
    assert status_of(sandbox, later) == "queued"
    monkeypatch.setattr(state.actions, "runner_labels", ["self-hosted", "linux", "x64", "4-gpu-h100"])
    assert wait_run(sandbox, later, 15).conclusion == "success"
    assert job_json(sandbox, full, later)["runner_name"] == "sandbox-self-hosted"


TIMEOUT_YML = """\
name: Timeout
on: workflow_dispatch
jobs:
  slow:
    runs-on: self-hosted
    timeout-minutes: 2
    steps: [{run: "sleep 60"}]
"""


def test_timeout_minutes_from_the_file(sandbox, monkeypatch):
    full = repo_with(
        sandbox, "timeouts", {".github/workflows/slow.yml": TIMEOUT_YML, ".github/workflows/bound.yml": TIMEOUT_YML}
    )
    state = sandbox["state"]
    monkeypatch.setattr(state.actions, "minute_s", 0.25)  # 2 minutes: 0.5 s
    state.bind_workflow(full, "slow.yml", ["sh", "-c", "echo slow; exec sleep 60"])
    state.bind_workflow(full, "bound.yml", ["sh", "-c", "sleep 1.5; echo done"], timeout=30)  # explicit wins
    slow, bound = started(sandbox, full, "slow.yml"), started(sandbox, full, "bound.yml")
    run = wait_run(sandbox, slow, 15)
    assert run.conclusion == "timed_out"
    assert "has exceeded the maximum execution time of 2 minutes." in log_of(sandbox, slow)
    assert wait_run(sandbox, bound, 15).conclusion == "success"


GROUP_YML = """\
name: Grouped
on:
  workflow_dispatch:
    inputs:
      key: {required: true}
concurrency:
  group: g-${{ inputs.key }}
  cancel-in-progress: CANCEL
jobs:
  j:
    runs-on: self-hosted
    steps: [{run: "true"}]
"""
GATED = ["sh", "-c", 'echo "started $INPUT_KEY"; while [ ! -f "$GATE" ]; do sleep 0.05; done; echo released']


def test_concurrency_group_pending_and_cancelled_by_a_newer_one(sandbox):
    full = repo_with(sandbox, "groups", {".github/workflows/group.yml": GROUP_YML.replace("CANCEL", "false")})
    state, gate = sandbox["state"], sandbox["root"] / "gate-groups"
    state.bind_workflow(full, "group.yml", GATED, env={"GATE": str(gate)})
    try:
        first = started(sandbox, full, "group.yml", {"key": "x"})
        assert until(lambda: "started x" in log_of(sandbox, first))
        second = started(sandbox, full, "group.yml", {"key": "X"})  # groups are case-insensitive
        r = gh(sandbox).get_repo(full)
        assert r.get_workflow_run(second).status == "pending"
        other = started(sandbox, full, "group.yml", {"key": "y"})  # another group runs at once
        assert until(lambda: status_of(sandbox, other) == "in_progress")
        third = started(sandbox, full, "group.yml", {"key": "x"})
        assert wait_run(sandbox, second, 10).conclusion == "cancelled"  # the older pending one
        assert status_of(sandbox, third) == "pending" and status_of(sandbox, first) == "in_progress"
        assert "started" not in log_of(sandbox, second)
        time.sleep(0.5)
        assert status_of(sandbox, third) == "pending"
    finally:
        gate.write_text("go")
    assert wait_run(sandbox, first).conclusion == "success"
    assert wait_run(sandbox, third).conclusion == "success"
    assert wait_run(sandbox, other).conclusion == "success"
    runs = {x: state.actions.run(x) for x in (first, third)}
    assert runs[third].run_started_at >= runs[first].jobs[0].completed_at


def test_concurrency_cancel_in_progress(sandbox):
    full = repo_with(sandbox, "cancel-groups", {".github/workflows/group.yml": GROUP_YML.replace("CANCEL", "true")})
    state, gate = sandbox["state"], sandbox["root"] / "gate-cancel"
    state.bind_workflow(full, "group.yml", GATED, env={"GATE": str(gate)})
    try:
        first = started(sandbox, full, "group.yml", {"key": "x"})
        assert until(lambda: "started x" in log_of(sandbox, first))
        second = started(sandbox, full, "group.yml", {"key": "x"})
        assert wait_run(sandbox, first, 15).conclusion == "cancelled"  # the running one
        assert until(lambda: "started x" in log_of(sandbox, second))
    finally:
        gate.write_text("go")
    assert wait_run(sandbox, second).conclusion == "success"


ARTIFACTS_YML = """\
name: Artifacts
on:
  workflow_dispatch:
    inputs:
      tag: {required: true}
jobs:
  build:
    runs-on: self-hosted
    steps:
      - run: make
      - uses: actions/upload-artifact@v4
        with:
          name: dir-${{ inputs.tag }}
          path: ${{ runner.temp }}/out/
      - uses: actions/upload-artifact@v4
        with: {name: single, path: report.txt}
      - uses: actions/upload-artifact@v4
        with: {name: missing, path: nothing/here}
      - uses: actions/upload-artifact@v4
        with: {name: ignored, path: nothing/there, if-no-files-found: ignore}
      - uses: actions/upload-artifact@v4
        with:
          path: ${{ runner.temp }}/out/a.txt
"""
ERROR_YML = """\
name: Artifact error
on: workflow_dispatch
jobs:
  build:
    runs-on: self-hosted
    steps:
      - uses: actions/upload-artifact@v4
        with: {name: only-on-success, path: "${{ runner.temp }}/x.txt"}
      - uses: actions/upload-artifact@v4
        if: always()
        with: {name: always, path: "${{ runner.temp }}/x.txt"}
      - uses: actions/upload-artifact@v4
        with: {name: required, path: absent.txt, if-no-files-found: error}
"""
MAKE = (
    'echo "temp=$RUNNER_TEMP"; mkdir -p "$RUNNER_TEMP/out/sub"; echo a > "$RUNNER_TEMP/out/a.txt"; '
    'echo b > "$RUNNER_TEMP/out/sub/b.txt"; echo hidden > "$RUNNER_TEMP/out/.hidden"; echo r > report.txt; '
    'echo "{}" > "$REVERT_BISECT_RESULT"; echo x > "$RUNNER_TEMP/x.txt"; exit ${EXIT:-0}'
)


def test_artifacts_named_by_the_workflow(sandbox):
    full = repo_with(
        sandbox,
        "artifacts",
        {
            ".github/workflows/arts.yml": ARTIFACTS_YML,
            ".github/workflows/error.yml": ERROR_YML,
            ".github/workflows/failing.yml": ERROR_YML,
        },
    )
    state = sandbox["state"]
    state.bind_workflow(full, "arts.yml", ["sh", "-c", MAKE])
    state.bind_workflow(full, "error.yml", ["sh", "-c", MAKE])
    state.bind_workflow(full, "failing.yml", ["sh", "-c", MAKE], env={"EXIT": "4"})
    run_id = started(sandbox, full, "arts.yml", {"tag": "t1"})
    run = wait_run(sandbox, run_id)
    text = log_of(sandbox, run_id)
    assert run.conclusion == "success", text
    assert [a.name for a in run.artifacts] == ["dir-t1", "single", "artifact"]  # no `result`: the file decides
    assert sorted(artifact_zip(sandbox, full, run_id, "dir-t1").namelist()) == ["a.txt", "sub/b.txt"]
    assert artifact_zip(sandbox, full, run_id, "dir-t1").read("sub/b.txt") == b"b\n"
    assert artifact_zip(sandbox, full, run_id, "single").namelist() == ["report.txt"]
    assert artifact_zip(sandbox, full, run_id, "artifact").namelist() == ["a.txt"]
    assert "##[warning]No files were found with the provided path: nothing/here" in text
    assert "No files were found with the provided path: nothing/there" not in text  # if-no-files-found: ignore
    temp = next(line.split("temp=", 1)[1] for line in run.log if "temp=/" in line)
    assert temp.startswith(str(state.root)) and not Path(temp).exists()  # RUNNER_TEMP removed after the run

    err = wait_run(sandbox, started(sandbox, full, "error.yml"))
    assert err.conclusion == "failure"
    assert "##[error]No files were found with the provided path: absent.txt" in "\n".join(err.log)
    assert sorted(a.name for a in err.artifacts) == ["always", "only-on-success"]
    failing = wait_run(sandbox, started(sandbox, full, "failing.yml"))
    assert failing.conclusion == "failure" and [a.name for a in failing.artifacts] == ["always"]  # if: always()


def test_workflow_job_webhooks(sandbox):
    full = repo_with(sandbox, "job-hooks", {".github/workflows/labels.yml": LABELS_YML})
    state = sandbox["state"]
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), JobReceiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    try:
        state.add_hook(f"http://127.0.0.1:{receiver.server_address[1]}/jobs", SECRET, ("workflow_job",), repo=full)
        state.bind_workflow(full, "labels.yml", ["sh", "-c", "echo hi"])
        run_id = started(sandbox, full, "labels.yml", {"runs_on": '["self-hosted"]'})
        assert wait_run(sandbox, run_id).conclusion == "success"
        assert until(lambda: len(JobReceiver.received) >= 3)
        time.sleep(0.3)
    finally:
        receiver.shutdown()
    assert [h["x-github-event"] for h, _ in JobReceiver.received] == ["workflow_job"] * 3
    assert all(verify(SECRET.encode(), b, h["x-hub-signature-256"]) for h, b in JobReceiver.received)
    payloads = [json.loads(b) for _, b in JobReceiver.received]
    assert [p["action"] for p in payloads] == ["queued", "in_progress", "completed"]
    fixture = json.loads(
        (FIXTURES / "github/webhooks/workflow_job.completed.failure.with-organization.json").read_text()
    )
    done = payloads[-1]
    assert {"action", "workflow_job", "repository", "sender"} <= set(done)
    assert set(fixture["workflow_job"]) <= set(done["workflow_job"])
    assert set(fixture["workflow_job"]["steps"][0]) <= set(done["workflow_job"]["steps"][0])
    job = done["workflow_job"]
    assert (job["run_id"], job["head_sha"], job["status"], job["conclusion"]) == (
        run_id,
        state.actions.run(run_id).head_sha,
        "completed",
        "success",
    )
    assert (job["labels"], job["runner_name"], job["workflow_name"], job["name"]) == (
        ["self-hosted"],
        "sandbox-self-hosted",
        "Labels",
        "gpu",
    )
    assert payloads[0]["workflow_job"]["status"] == "queued" and payloads[1]["workflow_job"]["status"] == "in_progress"
    assert done["repository"]["full_name"] == full
    recorded = [d for d in state.hook_deliveries if d["event"] == "workflow_job"]
    assert [d["run_id"] for d in recorded] == [run_id] * 3


STEP_PROGRAM = """\
import json, os, pathlib
out = pathlib.Path(os.environ["RUNNER_TEMP"]) / "revert-bisect"
out.mkdir(parents=True, exist_ok=True)
(out / "result.json").write_text(json.dumps({"sha": os.environ["INPUT_SHA"], "step": os.environ["INPUT_STEP"]}))
print("probe done")
"""


def test_the_real_step_workflow(sandbox, monkeypatch):
    import sys

    full = repo_with(sandbox, "step-workflow", {".github/workflows/revert-bisect-step.yml": STEP_WORKFLOW.read_text()})
    state = sandbox["state"]
    monkeypatch.setattr(state.actions, "minute_s", 1.0)
    state.bind_workflow(full, "revert-bisect-step.yml", [sys.executable, "-c", STEP_PROGRAM])
    sha = (
        state.repo(full)
        and requests.get(f"{sandbox['base']}/repos/{full}/commits/main", headers=auth(sandbox), timeout=10).json()[
            "sha"
        ]
    )
    inputs = {
        "bisection": "b-1",
        "step": "s-7",
        "sha": sha,
        "test": "kl",
        "spec": '{"schema": 1}',
        "runs_on": '["self-hosted"]',
        "timeout_minutes": "5",
        "correlation": "corr-42",
    }
    wf = gh(sandbox).get_repo(full).get_workflow("revert-bisect-step.yml")
    run = wf.create_dispatch("main", inputs, throw=True, return_run_details=True)
    done = wait_run(sandbox, run.id)
    assert done.conclusion == "success", log_of(sandbox, run.id)
    assert done.jobs[0].timeout == 5.0 and done.group == "revert-bisect-step-s-7-corr-42"
    got = gh(sandbox).get_repo(full).get_workflow_run(run.id)
    assert "[corr-42]" in got.display_title and got.display_title.startswith("revert-bisect step s-7 of bisection b-1")
    assert [a.name for a in got.get_artifacts()] == ["revert-bisect-step-s-7"]
    z = artifact_zip(sandbox, full, run.id, "revert-bisect-step-s-7")
    assert z.namelist() == ["result.json"] and json.loads(z.read("result.json")) == {"sha": sha, "step": "s-7"}
    assert job_json(sandbox, full, run.id)["labels"] == ["self-hosted"]

    missing = {k: v for k, v in inputs.items() if k != "correlation"}
    resp = dispatch(sandbox, full, "revert-bisect-step.yml", missing)
    assert (resp.status_code, resp.json()["message"]) == (422, "Required input 'correlation' not provided")
    bad = wait_run(sandbox, started(sandbox, full, "revert-bisect-step.yml", {**inputs, "runs_on": "not json"}))
    assert bad.conclusion == "failure" and "##[error]The workflow is not valid" in "\n".join(bad.log)

    gpu = started(
        sandbox, full, "revert-bisect-step.yml", {**inputs, "step": "s-8", "runs_on": '["self-hosted","4-gpu-h100"]'}
    )
    assert passed_over(sandbox, gpu)
    assert status_of(sandbox, gpu) == "queued" and "probe done" not in log_of(sandbox, gpu)
    assert job_json(sandbox, full, gpu)["labels"] == ["self-hosted", "4-gpu-h100"]
    assert gh(sandbox).get_repo(full).get_workflow_run(gpu).cancel() is True
    assert wait_run(sandbox, gpu, 10).conclusion == "cancelled"
