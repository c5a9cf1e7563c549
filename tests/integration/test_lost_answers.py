"""A POST that GitHub did, whose answer was lost (the connection dropped before the client read it): the sandbox's
lost-answer fault (sandbox/lost_answers.py) does the request in full and aborts the connection; the bot, through
real PyGithub, makes no second comment, issue, PR or workflow run (the transport retries no POST; the forge
looks up before it sends again; the Actions backend finds the run by its correlation id)."""

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import httpx
import pytest

from bot.adapters.dispatch.actions import GitHubActionsBackend, Limits
from bot.adapters.github.actions import GitHubActions
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.github.push import push_branch
from runners.spec import StepSpec
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from sandbox.lost_answers import ADMIN, lost_answers
from scenarios.mamba_track_boundary import build

QUEUED_WORKFLOW = """\
name: step
run-name: step [${{ inputs.correlation }}]
on:
  workflow_dispatch:
    inputs:
      correlation:
        required: true
jobs:
  step:
    runs-on: [self-hosted, no-such-runner]
    steps:
      - run: echo never
"""


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("lost")
    scenario = build(tmp / "scenario", commits=8, seed=3)
    state = SandboxState(tmp / "sandbox")
    seeded = seed_from_scenario(state, tmp / "scenario")
    base, stop = run_in_thread(state)
    token = seeded.tokens["revert-bisect-bot"]
    forge = GitHubForge(connect(base, token, throttle=False), seeded.repo)
    yield dict(scenario=scenario, state=state, seeded=seeded, base=base, forge=forge, token=token, tmp=tmp)
    state.actions.shutdown()
    stop()


def test_the_sandbox_does_the_request_and_drops_the_connection(sandbox):
    state, repo, number = sandbox["state"], sandbox["seeded"].repo, sandbox["scenario"].followup["number"]
    lost_answers(state).drop("POST", rf"/repos/{repo}/issues/{number}/comments$", times=1)
    headers = {"Authorization": f"token {sandbox['token']}"}
    url = f"{sandbox['base']}/repos/{repo}/issues/{number}/comments"
    before = len(state.comments_of(state.repo(repo), number))
    with pytest.raises(httpx.RemoteProtocolError):  # no status line at all: the client cannot know what happened
        httpx.post(url, json={"body": "written, answer lost"}, headers=headers)
    bodies = [c.body for c in state.comments_of(state.repo(repo), number)]
    assert len(bodies) == before + 1 and bodies[-1] == "written, answer lost"  # done in full
    assert lost_answers(state).dropped[-1] == ("POST", f"/repos/{repo}/issues/{number}/comments", 201)
    answer = httpx.post(url, json={"body": "answered"}, headers=headers)  # once: the next one is answered
    assert answer.status_code == 201


def test_rules_are_set_over_http_for_a_sandbox_run_apart(sandbox):
    base = sandbox["base"]
    assert httpx.post(f"{base}{ADMIN}", json={"method": "GET", "path": r"/never-asked$", "times": 2}).status_code == 201
    assert httpx.get(f"{base}{ADMIN}").json()["rules"] >= 1
    assert httpx.delete(f"{base}{ADMIN}").json()["rules"] == 0
    bad = httpx.post(f"{base}{ADMIN}", json={"path": "x"})
    assert bad.status_code == 400 and "method" in bad.json()["message"]


def test_a_lost_answer_to_a_comment_makes_no_second_comment(sandbox):
    forge, state, repo = sandbox["forge"], sandbox["state"], sandbox["seeded"].repo
    number = sandbox["scenario"].followup["number"]
    lost_answers(state).drop("POST", rf"/issues/{number}/comments$", times=1)
    comment_id, created = forge.comment_once(number, "lost-1", "the status")
    mine = [c for c in state.comments_of(state.repo(repo), number) if "revert-bisect:lost-1" in c.body]
    assert len(mine) == 1 and mine[0].id == comment_id and created
    assert mine[0].body.endswith("the status")


def test_a_lost_answer_to_an_issue_makes_no_second_issue(sandbox):
    forge, state, repo = sandbox["forge"], sandbox["state"], sandbox["seeded"].repo
    lost_answers(state).drop("POST", rf"^/repos/{repo}/issues$", times=2)  # and the retry's answer too
    number, created = forge.ensure_issue("tracking-lost", "Track the fix", "the body")
    mine = [i for i in state.issues_of(state.repo(repo)) if "revert-bisect:tracking-lost" in (i.body or "")]
    assert [i.number for i in mine] == [number] and created
    assert forge.ensure_issue("tracking-lost", "Track the fix", "the body") == (number, False)


def clone_with_a_commit(sandbox, name: str, files: dict[str, str] | None = None) -> tuple[Path, str]:
    """A clone of the sandbox's repository with one commit on top (changing `files`, else empty)."""
    clone, token = sandbox["tmp"] / name, sandbox["token"]
    auth = ["-c", f"http.extraHeader=Authorization: Bearer {token}"]
    url = f"{sandbox['base']}/{sandbox['seeded'].repo}.git"
    subprocess.run(["git", *auth, "clone", "-q", url, str(clone)], check=True)
    for path, text in (files or {}).items():
        (clone / path).parent.mkdir(parents=True, exist_ok=True)
        (clone / path).write_text(text)
    git = ["git", "-C", str(clone), "-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run([*git, "add", "-A"], check=True)
    subprocess.run([*git, "commit", "-q", "--allow-empty", "-m", "a change"], check=True)
    head = subprocess.run([*git, "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
    return clone, head


def test_a_lost_answer_to_a_pull_request_makes_no_second_one(sandbox):
    forge, state, repo = sandbox["forge"], sandbox["state"], sandbox["seeded"].repo
    clone, head = clone_with_a_commit(sandbox, "clone-pr")
    push_branch(clone, f"{sandbox['base']}/{repo}.git", "revert-bisect/lost", head, sandbox["token"])
    lost_answers(state).drop("POST", rf"^/repos/{repo}/pulls$", times=1)
    pr = forge.open_pr("Revert it", "Reverts it", "revert-bisect/lost", "main")
    opened = [i for i in state.issues_of(state.repo(repo)) if i.pull and i.pull.head == "revert-bisect/lost"]
    assert [i.number for i in opened] == [pr.number] and pr.created


def _repo_with_a_dispatchable_workflow(root: Path, state: SandboxState) -> str:
    src = root / "dispatch-src"
    (src / ".github" / "workflows").mkdir(parents=True)
    (src / ".github" / "workflows" / "step.yml").write_text(QUEUED_WORKFLOW)
    run = lambda *a: subprocess.run(["git", "-C", str(src), *a], check=True, capture_output=True)  # noqa: E731
    run("init", "-q", "-b", "main")
    run("add", "-A")
    run("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "the step workflow")
    slug = "acme/lost-dispatch"
    state.create_repo(slug, source=src)
    state.set_permission(slug, "revert-bisect-bot", "write")
    return slug


def test_a_lost_answer_to_a_dispatch_makes_no_second_run(sandbox):
    state, base = sandbox["state"], sandbox["base"]
    slug = _repo_with_a_dispatchable_workflow(sandbox["tmp"], state)
    gh = connect(base, sandbox["token"], throttle=False)
    actions = GitHubActions(gh.get_repo(slug), "step.yml")
    lost_answers(state).drop("POST", r"/actions/workflows/[^/]+/dispatches$", times=1)
    backend = GitHubActionsBackend(
        actions, "main", lambda spec, c: {"correlation": c}, 1, ["self-hosted"], Limits(poll_s=0.1, find_timeout_s=60)
    )
    backend.submit(StepSpec(1, "0" * 40, ("true",), 60, None))
    flight = backend._flights[1]
    deadline = time.monotonic() + 30
    while flight.run_id is None and time.monotonic() < deadline:  # found by its correlation id in the run-name
        backend.wait(0.2)
    runs = _run_ids(state, slug)
    method, path, status = lost_answers(state).dropped[-1]
    assert method == "POST" and path.startswith(f"/repos/{slug}/actions/workflows/") and path.endswith("/dispatches")
    assert status == 200  # done: GitHub answers a dispatch with return_run_details 200 and the run's id
    assert len(runs) == 1, f"the dispatch made {len(runs)} runs"
    assert flight.run_id == runs[0] and flight.dispatches == 1
    backend.close()


def _run_ids(state: SandboxState, slug: str) -> list[int]:
    return sorted(run.id for run in state.actions.runs_of(state.repo(slug)))
