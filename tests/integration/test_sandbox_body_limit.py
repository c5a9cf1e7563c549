"""The sandbox refuses a body over 65,536 characters as GitHub does: 422 "Validation Failed", the error's message
"body is too long (maximum is 65536 characters)" (docs/github-contract.md, "Writes")."""

from __future__ import annotations

import httpx
import pytest

from sandbox import SandboxState, run_in_thread
from tests.support.incident import BOT, seed_incident

LIMIT = 65_536  # written out, not imported: a test reading the sandbox's own constant would pass whatever it said
TOO_LONG = "body is too long (maximum is 65536 characters)"


@pytest.fixture(scope="module")
def api(tmp_path_factory):
    state = SandboxState(tmp_path_factory.mktemp("limit"))
    slug = seed_incident(state)
    base, stop = run_in_thread(state)
    with httpx.Client(base_url=f"{base}/repos/{slug}", headers={"Authorization": f"token sandbox-token-{BOT}"}) as c:
        yield c
    stop()


def refused(response: httpx.Response, resource: str) -> bool:
    body = response.json()
    return (
        response.status_code == 422
        and body["message"] == "Validation Failed"
        and body["errors"] == [{"resource": resource, "code": "custom", "field": "body", "message": TOO_LONG}]
    )


def test_an_issue_body_of_the_limit_is_taken_and_one_more_character_refused(api):
    assert api.post("/issues", json={"title": "t", "body": "x" * LIMIT}).status_code == 201
    assert refused(api.post("/issues", json={"title": "t", "body": "x" * (LIMIT + 1)}), "Issue")


def test_a_comment_over_the_limit_is_refused_when_made_and_when_edited(api):
    made = api.post("/issues/29792/comments", json={"body": "ok"})
    assert made.status_code == 201
    assert refused(api.post("/issues/29792/comments", json={"body": "é" * (LIMIT + 1)}), "IssueComment")
    assert refused(api.patch(f"/issues/comments/{made.json()['id']}", json={"body": "x" * (LIMIT + 1)}), "IssueComment")
    assert api.patch(f"/issues/comments/{made.json()['id']}", json={"body": "x" * LIMIT}).status_code == 200


def test_a_pull_request_body_over_the_limit_is_refused(api):
    long = {"title": "t", "head": "any", "base": "main", "body": "x" * (LIMIT + 1)}
    assert refused(api.post("/pulls", json=long), "PullRequest")


def test_the_bot_never_sends_a_body_over_the_limit_it_cuts_it_and_says_so(tmp_path):
    from bot.adapters.github.forge import GitHubForge, connect

    state = SandboxState(tmp_path / "sandbox")
    slug = seed_incident(state)
    base, stop = run_in_thread(state)
    try:
        forge = GitHubForge(connect(base, f"sandbox-token-{BOT}", throttle=False), slug)
        evidence = "<details>\n\n```\n" + "git bisect good 0123456789abcdef\n" * 4000 + "```\n\n</details>\n"
        comment_id, created = forge.comment_once(31369, "evidence-1", evidence)
        number, _ = forge.ensure_issue("tracking-31369", "Fix it", evidence)
    finally:
        stop()
    body = state.comments[comment_id][1].body
    assert created and len(body) <= LIMIT and "cut to fit GitHub's limit of 65,536 characters" in body
    assert body.count("```") % 2 == 0 and body.count("<details>") == body.count("</details>")  # still well-formed
    issue = state.repo(slug).issues[number].body
    assert len(issue) <= LIMIT and "revert-bisect:tracking-31369" in issue
