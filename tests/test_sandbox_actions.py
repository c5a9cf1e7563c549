"""The sandbox's GitHub Actions emulation (bot/sandbox/actions.py) through real PyGithub: workflows,
dispatches (with and without `return_run_details`), runs, jobs, logs, artifacts, cancellation and signed
`workflow_run` webhooks -- every REST response checked against the OpenAPI subset (tests/sandbox_helpers.py)."""

from __future__ import annotations

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

import tests.sandbox_helpers as helpers
from bot.sandbox import SandboxState, run_in_thread, seed_from_scenario
from bot.sandbox.state import NIGHTLY_WORKFLOW
from bot.webhooks.signature import verify
from examples.mamba_track_boundary import build
from tests.sandbox_helpers import ContractChecker

SECRET = "sandbox-hook-secret"
ECHO = ("sh", "-c", ('echo "hello $INPUT_GREETING at $REVERT_BISECT_SHA run $GITHUB_RUN_ID in $(pwd)"; '
                     'test -f mini_sglang/__init__.py && echo "worktree ok"; '
                     'printf \'{"metric": 1.5, "sha": "%s"}\' "$REVERT_BISECT_SHA" > "$REVERT_BISECT_RESULT"; '
                     'exit ${EXIT:-0}'))


class Receiver(BaseHTTPRequestHandler):
    received: ClassVar[list[tuple[dict, bytes]]] = []

    def do_POST(self):
        body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
        type(self).received.append(({k.lower(): v for k, v in self.headers.items()}, body))
        self.send_response(202)
        self.end_headers()

    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    root = tmp_path_factory.mktemp("actions")
    scenario = build(root / "scenario", commits=12, seed=1)
    state = SandboxState(root / "github")
    seeded = seed_from_scenario(state, root / "scenario")
    state.bind_workflow(seeded.repo, "echo.yml", list(ECHO), env={"EXIT": "0"})
    state.bind_workflow(seeded.repo, "fails.yml", list(ECHO), env={"EXIT": "3"})
    sleeper = f'echo $$ > "{root}/sleep.pid"; echo started; exec sleep 120'
    state.bind_workflow(seeded.repo, "sleep.yml", ["sh", "-c", sleeper])
    receiver = ThreadingHTTPServer(("127.0.0.1", 0), Receiver)
    threading.Thread(target=receiver.serve_forever, daemon=True).start()
    state.add_hook(f"http://127.0.0.1:{receiver.server_address[1]}/hook", SECRET)
    base_url, stop = run_in_thread(state)
    state.actions.base_url = base_url
    # the Actions operations are checked here (the shared checker leaves them to this module)
    checker = ContractChecker(base_url, excluded=("/app/installations/", "/repos/{owner}/{repo}/installation"))
    yield {"state": state, "seeded": seeded, "scenario": scenario, "base": base_url, "checker": checker,
           "root": root}
    state.actions.shutdown()
    stop()
    receiver.shutdown()


@pytest.fixture(autouse=True)
def contract(sandbox, monkeypatch):
    checker: ContractChecker = sandbox["checker"]
    original = requests.Session.send

    def send(self, request, **kwargs):
        response = original(self, request, **kwargs)
        # download links (`/_sandbox/...`) are the sandbox's stand-in for GitHub's blob storage, not the API
        if request.url.startswith(checker.base_url) and "/_sandbox/" not in request.url:
            first = response.history[0] if response.history else response  # a followed 302: check the 302
            first.content  # noqa: B018
            checker.check(request, first)
        return response

    monkeypatch.setattr(requests.Session, "send", send)
    before = len(checker.exchanges)
    yield checker
    bad = [e for e in checker.exchanges[before:] if e.error]
    assert not bad, "\n".join(f"{e.method} {e.url} -> {e.status} ({e.operation}): {e.error}" for e in bad)


def gh(sandbox) -> Github:
    token = sandbox["seeded"].tokens[sandbox["seeded"].maintainer]
    return Github(base_url=sandbox["base"], auth=Auth.Token(token), seconds_between_requests=0,
                  seconds_between_writes=0, retry=None)


def auth(sandbox) -> dict:
    return {"Authorization": f"token {sandbox['seeded'].tokens[sandbox['seeded'].maintainer]}"}


def wait_run(sandbox, run_id: int, timeout: float = 50):
    return sandbox["state"].actions.wait(run_id, timeout)


def test_workflows_discovered_and_nightly_bound(sandbox):
    state, repo = sandbox["state"], sandbox["state"].repo(sandbox["seeded"].repo)
    paths = {w.path: w for w in state.actions.workflows_of(repo)}
    assert {".github/workflows/pr-test.yml", NIGHTLY_WORKFLOW} <= set(paths)
    assert paths[NIGHTLY_WORKFLOW].name == "Nightly Test"
    assert paths[NIGHTLY_WORKFLOW].argv == sandbox["scenario"].test_command
    assert paths[".github/workflows/pr-test.yml"].argv is None
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    wf = r.get_workflow("nightly-test.yml")
    assert (wf.name, wf.path, wf.state) == ("Nightly Test", NIGHTLY_WORKFLOW, "active")
    assert r.get_workflow(wf.id).path == NIGHTLY_WORKFLOW
    assert wf.url.startswith(sandbox["base"] + "/")


def test_dispatch_without_and_with_run_details(sandbox):
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    wf = r.get_workflow("echo.yml")
    assert wf.create_dispatch("main", {"greeting": "plain"}, throw=True) is True  # 204
    run = wf.create_dispatch("main", {"greeting": "detailed"}, throw=True, return_run_details=True)  # 200
    assert run.id and run.url == f"{sandbox['base']}/repos/{sandbox['seeded'].repo}/actions/runs/{run.id}"
    done = wait_run(sandbox, run.id)
    assert done.conclusion == "success" and done.inputs == {"greeting": "detailed"}

    got = r.get_workflow_run(run.id)
    head = sandbox["scenario"].bad
    assert (got.status, got.conclusion, got.event, got.head_sha, got.head_branch) == (
        "completed", "success", "workflow_dispatch", head, "main")
    assert got.path == ".github/workflows/echo.yml" and got.workflow_id == wf.id and got.run_number == 2
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
    run = r.get_workflow("echo.yml").create_dispatch(sha, {"greeting": "logs"}, throw=True,
                                                     return_run_details=True)
    wait_run(sandbox, run.id)
    run = r.get_workflow_run(run.id)
    assert run.head_sha == sha and run.head_branch is None
    jobs = list(run.jobs())
    assert len(jobs) == 1 and jobs[0].conclusion == "success" and jobs[0].run_id == run.id
    location = jobs[0].logs_url()  # the 302's Location
    assert location.startswith(sandbox["base"] + "/_sandbox/")
    text = requests.get(location, timeout=10).text  # signed: no credentials needed
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
        assert s.post(f"{base}/workflows/pr-test.yml/dispatches", json={"ref": "main"}, headers=h,
                      timeout=10).status_code == 422  # no workflow_dispatch trigger
        assert s.post(f"{base}/workflows/echo.yml/dispatches", json={"ref": "no-such-branch"}, headers=h,
                      timeout=10).status_code == 422


def test_cancel_kills_the_process(sandbox):
    r = gh(sandbox).get_repo(sandbox["seeded"].repo)
    run = r.get_workflow("sleep.yml").create_dispatch("main", throw=True, return_run_details=True)
    pid_file = sandbox["root"] / "sleep.pid"
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


def test_real_probe_head_fails_and_good_passes(sandbox):
    state, seeded, scenario = sandbox["state"], sandbox["seeded"], sandbox["scenario"]
    bad = state.start_run(seeded.repo, NIGHTLY_WORKFLOW, "main", event="schedule")
    good = state.start_run(seeded.repo, NIGHTLY_WORKFLOW, scenario.good, event="workflow_dispatch")
    r = gh(sandbox).get_repo(seeded.repo)
    bad_run, good_run = wait_run(sandbox, bad, 55), wait_run(sandbox, good, 55)
    logs = {x: requests.get(next(iter(r.get_workflow_run(x).jobs())).logs_url(), timeout=10).text for x in (bad, good)}
    assert bad_run.conclusion == "failure", logs[bad][-2000:]
    assert good_run.conclusion == "success", logs[good][-2000:]
    assert "avg_kl_div=" in logs[bad] and "avg_kl_div=" in logs[good]
    run = r.get_workflow_run(bad)
    assert (run.event, run.head_branch, run.head_sha, run.name) == ("schedule", "main", scenario.bad, "Nightly Test")
    scheduled = r.get_workflow("nightly-test.yml").get_runs(event="schedule", branch="main")
    assert [x.id for x in scheduled] == [bad]
    art = next(iter(run.get_artifacts()))
    resp = requests.get(art.archive_download_url, headers=auth(sandbox), timeout=10)
    result = json.loads(zipfile.ZipFile(io.BytesIO(resp.content)).read("result.json"))
    assert result["sha"] == scenario.bad and result["metric"]["name"] == "avg_kl_div"


def test_signed_workflow_run_webhooks(sandbox):
    state = sandbox["state"]
    repo = state.repo(sandbox["seeded"].repo)
    runs = state.actions.runs_of(repo)
    assert runs and all(x.done.is_set() for x in runs)
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        completed = {json.loads(b)["workflow_run"]["id"] for h, b in Receiver.received
                     if json.loads(b)["action"] == "completed"}
        if {x.id for x in runs} <= completed:
            break
        time.sleep(0.1)
    assert {x.id for x in runs} <= completed
    for headers, body in Receiver.received:
        assert headers["x-github-event"] == "workflow_run"
        assert verify(SECRET.encode(), body, headers["x-hub-signature-256"])
        assert not verify(b"wrong secret", body, headers["x-hub-signature-256"])
    assert len({h["x-github-delivery"] for h, _ in Receiver.received}) == len(Receiver.received)
    fixture = json.loads((Path(helpers.__file__).parent / "fixtures/github/webhooks/workflow_run.completed.json")
                         .read_text())
    sleep_run = next(x for x in runs if x.conclusion == "cancelled")
    payload = next(json.loads(b) for _, b in Receiver.received
                   if json.loads(b)["action"] == "completed" and json.loads(b)["workflow_run"]["id"] == sleep_run.id)
    assert set(fixture["workflow_run"]) <= set(payload["workflow_run"])
    assert {"action", "repository", "sender", "workflow", "workflow_run"} <= set(payload)
    assert payload["repository"]["full_name"] == repo.full_name
    assert payload["workflow_run"]["conclusion"] == "cancelled" and payload["workflow"]["path"].endswith("sleep.yml")
    actions = [json.loads(b)["action"] for _, b in Receiver.received if json.loads(b)["workflow_run"]["id"] == sleep_run.id]
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
    subprocess.run(["git", "-C", str(src), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q",
                    "--allow-empty", "-m", "x"], check=True)
    subprocess.run(["git", "-C", str(src), "push", "-q", str(repo.path), "main"], check=True,
                   env={**os.environ, "GIT_CONFIG_NOSYSTEM": "1"})
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


def test_actions_contract_coverage(sandbox):
    """Every Actions operation of the subset was exercised above and validated (the statuses GitHub sends)."""
    covered = sandbox["checker"].covered()
    expected = {"actions/get-workflow": {200}, "actions/create-workflow-dispatch": {200, 204},
                "actions/list-workflow-runs": {200}, "actions/get-workflow-run": {200},
                "actions/list-jobs-for-workflow-run": {200}, "actions/download-job-logs-for-workflow-run": {302},
                "actions/list-workflow-run-artifacts": {200}, "actions/download-artifact": {302},
                "actions/cancel-workflow-run": {202, 409}}
    missing = {op: codes - covered.get(op, set()) for op, codes in expected.items() if codes - covered.get(op, set())}
    assert not missing


def test_cli_hook_and_schedule(tmp_path):
    """`python -m bot.sandbox --scenario DIR --hook URL --hook-secret S --schedule`: the scheduled nightly
    run on main fails (HEAD has the regression) and its signed `workflow_run.completed` arrives."""
    import socket
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
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    proc = subprocess.Popen([sys.executable, "-m", "bot.sandbox", "--scenario", str(tmp_path / "scenario"),
                             "--port", str(port), "--root", str(tmp_path / "gh"), "--schedule",
                             "--hook", f"http://127.0.0.1:{sink.server_address[1]}/", "--hook-secret", SECRET],
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
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
