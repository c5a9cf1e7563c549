"""GitHub's refusals the publisher must live with, against the sandbox through real PyGithub and git over HTTP:
a review request for someone who is not a collaborator (422, the reviewer skipped, publishing goes on), and a push
that changes a workflow file without the `workflows` permission or the `workflow` scope (refused, said on the
culprit PR, no PR, no failed job)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import httpx
import pytest

from bot.adapters.git.clones import GIT_CLONES
from bot.adapters.git.revert import Revert
from bot.adapters.github.app_auth import AppCredentials
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.github.push import WorkflowPushRefused, push_branch, workflow_refusal
from bot.adapters.policy_files import load
from bot.ports import CulpritFacts
from bot.service.pr_body import PullRequestDraft
from bot.service.publish import Clone, Publisher, Target
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from sandbox.apps import DEFAULT_PERMISSIONS
from sandbox.workflow_push import without_workflow_scope
from scenarios.mamba_track_boundary import build
from tests.integration.test_app_auth import keypair

POLICY = Path(__file__).resolve().parents[2] / "policies" / "example.yaml"
OUTSIDER = "outside-contributor"
APP_ID = 5151


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("refused")
    scenario = build(tmp / "scenario", commits=8, seed=4)
    state = SandboxState(tmp / "sandbox")
    seeded = seed_from_scenario(state, tmp / "scenario")
    state.add_user(OUTSIDER)  # a GitHub user, no role on the repository: an outside contributor
    private, public = keypair()
    state.register_app(APP_ID, public, [seeded.repo])
    base, stop = run_in_thread(state)
    token = seeded.tokens["revert-bisect-bot"]
    forge = GitHubForge(connect(base, token, throttle=False), seeded.repo)
    yield dict(
        scenario=scenario, state=state, seeded=seeded, base=base, forge=forge, token=token, tmp=tmp, private=private
    )
    stop()


def git(clone: Path, *args: str) -> str:
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    return subprocess.run(["git", "-C", str(clone), *ident, *args], capture_output=True, text=True, check=True).stdout


def clone_of(world, name: str) -> Path:
    clone = world["tmp"] / name
    auth = ["-c", f"http.extraHeader=Authorization: Bearer {world['token']}"]
    url = f"{world['base']}/{world['seeded'].repo}.git"
    subprocess.run(["git", *auth, "clone", "-q", url, str(clone)], check=True)
    return clone


def commit(clone: Path, files: dict[str, str | None], message: str) -> str:
    for path, text in files.items():
        if text is None:
            (clone / path).unlink()
        else:
            (clone / path).parent.mkdir(parents=True, exist_ok=True)
            (clone / path).write_text(text)
    git(clone, "add", "-A")
    git(clone, "commit", "-q", "-m", message)
    return git(clone, "rev-parse", "HEAD").strip()


def app_token(world) -> str:
    return AppCredentials(APP_ID, world["private"], world["base"], throttle=False).token(world["seeded"].repo)


def remote(world) -> str:
    return f"{world['base']}/{world['seeded'].repo}.git"


def reverted(world, clone: Path, culprit: str, files: list[str]) -> tuple[Revert, PullRequestDraft]:
    sha, branch = git(clone, "rev-parse", "HEAD").strip(), f"revert-bisect/{culprit[:7]}"
    revert = Revert(culprit, world["scenario"].bad, sha, branch, "", files, "", "")
    return revert, PullRequestDraft('Revert "the culprit"', "the evidence", branch, "main")


def publish_it(world, clone, token, revert, draft, policy, *, bisection_id: int, author: str | None):
    scenario = world["scenario"]
    target = Target(
        forge=world["forge"],
        policy=policy,
        repo_slug=world["seeded"].repo,
        clone=Clone(clones=GIT_CLONES, repo=GIT_CLONES.open(clone), remote_url=remote(world), token=token),
        bisection_id=bisection_id,
        tests=("decode-cache-hit",),
    )
    facts = CulpritFacts(scenario.culprit_pr, "the culprit", author, ())
    return Publisher(target).open_pr(
        revert, draft, "HEAD fails, HEAD + revert passes", facts, followup=scenario.followup["number"]
    )


def marked(world, number: int, key: str) -> list[str]:
    issue = world["state"].repo(world["seeded"].repo)
    return [c.body for c in world["state"].comments_of(issue, number) if f"revert-bisect:{key} -->" in c.body]


# -- review requests --


def test_the_sandbox_refuses_a_review_request_for_a_non_collaborator_as_github_does(world):
    repo, state = world["seeded"].repo, world["state"]
    pr = state.repo(repo).issues[world["scenario"].culprit_pr]
    answer = httpx.post(
        f"{world['base']}/repos/{repo}/pulls/{pr.number}/requested_reviewers",
        json={"reviewers": [OUTSIDER]},
        headers={"Authorization": f"token {world['token']}"},
    )
    assert answer.status_code == 422
    body = answer.json()
    assert set(body) == {"message", "documentation_url"}  # GitHub's error body: no `errors` for this one
    assert body["message"].startswith("Reviews may only be requested from collaborators.")
    assert repo in body["message"]
    assert OUTSIDER not in pr.pull.requested_reviewers


def test_a_refused_reviewer_is_skipped_and_publishing_goes_on(world):
    scenario, forge = world["scenario"], world["forge"]
    clone = clone_of(world, "clone-review")
    git(clone, "revert", "--no-edit", scenario.culprit)
    revert, draft = reverted(world, clone, scenario.culprit, [])
    base = load(POLICY)
    policy = base.model_copy(
        update={"revert": base.revert.model_copy(update={"reviewers": ["sandbox-maintainer"]})}
    )  # the author (an outsider) first, then a maintainer
    result = publish_it(world, clone, world["token"], revert, draft, policy, bisection_id=91, author=OUTSIDER)
    assert result.pr_number and result.refused is None
    pr = forge.repo.get_pull(result.pr_number)
    assert [u.login for u in pr.requested_reviewers] == ["sandbox-maintainer"]  # the collaborator still asked
    assert len(result.notes) == 1 and OUTSIDER in result.notes[0]
    assert "Reviews may only be requested from collaborators" in result.notes[0]
    # what came after the review request still happened: the culprit PR's comment and the follow-up's link
    assert len(marked(world, scenario.culprit_pr, "culprit-91")) == 1
    assert f"#{result.pr_number}" in marked(world, scenario.followup["number"], "followup-91")[0]


# -- workflow files --


def test_an_app_without_the_workflows_permission_cannot_push_a_workflow_change(world):
    clone = clone_of(world, "clone-app")
    sha = commit(clone, {".github/workflows/extra.yml": "on: push\njobs: {}\n"}, "add a workflow")
    token = app_token(world)
    with pytest.raises(WorkflowPushRefused) as refused:
        push_branch(clone, remote(world), "app/workflow", sha, token)
    assert refused.value.path == ".github/workflows/extra.yml"
    assert refused.value.reason == (
        "refusing to allow a GitHub App to create or update workflow `.github/workflows/extra.yml` "
        "without `workflows` permission"
    )
    assert token not in str(refused.value)
    repo = world["state"].repo(world["seeded"].repo)
    assert (
        subprocess.run(
            ["git", "--git-dir", str(repo.path), "rev-parse", "-q", "--verify", "app/workflow"], capture_output=True
        ).returncode
        != 0
    )  # nothing landed
    other = commit(clone, {"NOTES.md": "not a workflow\n"}, "a plain change")  # on top: the workflow commit too
    with pytest.raises(WorkflowPushRefused):
        push_branch(clone, remote(world), "app/workflow", other, token)
    git(clone, "checkout", "-q", "-b", "plain", "origin/main")
    plain = commit(clone, {"NOTES.md": "not a workflow\n"}, "only a plain change")
    push_branch(clone, remote(world), "app/plain", plain, token)  # no workflow file: pushed


def test_an_app_granted_workflows_write_may_push_it(world):
    clone = clone_of(world, "clone-app-granted")
    sha = commit(clone, {".github/workflows/granted.yml": "on: push\njobs: {}\n"}, "add a workflow")
    app = world["state"].apps.apps[APP_ID]
    app.permissions["workflows"] = "write"
    try:
        push_branch(clone, remote(world), "app/granted", sha, app_token(world))
    finally:
        del app.permissions["workflows"]


def test_a_classic_token_without_the_workflow_scope_cannot_push_it(world):
    state, repo = world["state"], world["seeded"].repo
    state.add_user("scopeless-writer", token="classic-token-without-workflow")
    state.set_permission(repo, "scopeless-writer", "write")
    without_workflow_scope(state, "classic-token-without-workflow")
    clone = clone_of(world, "clone-classic")
    sha = commit(clone, {".github/workflows/classic.yml": "on: push\njobs: {}\n"}, "add a workflow")
    with pytest.raises(WorkflowPushRefused) as refused:
        push_branch(clone, remote(world), "classic/without-scope", sha, "classic-token-without-workflow")
    assert refused.value.reason == (
        "refusing to allow a Personal Access Token to create or update workflow `.github/workflows/classic.yml` "
        "without `workflow` scope"
    )
    push_branch(clone, remote(world), "classic/with-scope", sha, world["seeded"].tokens["sandbox-maintainer"])


def test_a_refused_push_is_said_on_the_culprit_pr_and_opens_nothing(world):
    scenario, forge = world["scenario"], world["forge"]
    clone = clone_of(world, "clone-publish")
    maintainer = world["seeded"].tokens["sandbox-maintainer"]
    culprit = commit(clone, {".github/workflows/culprit.yml": "on: push\njobs: {}\n"}, "the culprit adds a workflow")
    push_branch(clone, remote(world), "main", culprit, maintainer)
    git(clone, "revert", "--no-edit", culprit)
    revert, draft = reverted(world, clone, culprit, [".github/workflows/culprit.yml"])
    open_before = {p.number for p in forge.repo.get_pulls(state="open")}
    result = publish_it(world, clone, app_token(world), revert, draft, load(POLICY), bisection_id=92, author=None)
    assert result.pr_number is None and result.branch is None and result.evidence_on == scenario.culprit_pr
    assert "workflow" in result.refused and ".github/workflows/culprit.yml" in result.refused
    assert {p.number for p in forge.repo.get_pulls(state="open")} == open_before
    said = marked(world, scenario.culprit_pr, "culprit-92")
    assert len(said) == 1
    assert "`.github/workflows/culprit.yml`" in said[0] and "`workflows: write`" in said[0]
    assert "refusing to allow a GitHub App" in said[0]


def test_the_sandbox_app_is_granted_what_the_manifest_asks_for(world):
    """The sandbox's App has the permissions deploy/github-app-manifest.json registers (so no `workflows`), and
    its installation tokens carry them."""
    manifest = json.loads((POLICY.parents[1] / "deploy" / "github-app-manifest.json").read_text())
    assert DEFAULT_PERMISSIONS == manifest["default_permissions"] and "workflows" not in DEFAULT_PERMISSIONS
    assert "workflows" in manifest["description"]  # the manifest says why, and what happens without it
    assert world["state"].apps.permissions_of(app_token(world)) == manifest["default_permissions"]


def test_githubs_own_layout_of_the_refusal_is_read_too():
    """GitHub puts the reason in the ref's `[remote rejected] (...)`; the sandbox on `remote:` lines: both read."""
    github = (
        "To https://github.com/o/r.git\n"
        " ! [remote rejected] 26dcf23 -> revert-bisect/12-abcdef0 (refusing to allow a GitHub App to create or "
        "update workflow `.github/workflows/ci.yml` without `workflows` permission)\n"
        "error: failed to push some refs to 'https://github.com/o/r.git'\n"
    )
    reason = (
        "refusing to allow a GitHub App to create or update workflow `.github/workflows/ci.yml` without "
        "`workflows` permission"
    )
    assert workflow_refusal(github) == (reason, ".github/workflows/ci.yml")
    oauth = (
        "remote: refusing to allow an OAuth App to create or update workflow `.github/workflows/a b.yml` "
        "without `workflow` scope\n"
    )
    assert workflow_refusal(oauth)[1] == ".github/workflows/a b.yml"
    assert workflow_refusal("! [rejected] main -> main (non-fast-forward)\n") is None
