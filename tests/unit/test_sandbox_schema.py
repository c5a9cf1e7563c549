"""sandbox.schema.conform checks a body against GitHub's description; it no longer fills what a renderer left
out (the contract check must see the body as the sandbox wrote it)."""

import pytest

from sandbox.schema import KNOWN_GAPS, SchemaGap, conform, missing

ARTIFACT = {
    "id": 7,
    "node_id": "AR_7",
    "name": "result",
    "size_in_bytes": 12,
    "url": "http://h/repos/o/r/actions/artifacts/7",
    "archive_download_url": "http://h/repos/o/r/actions/artifacts/7/zip",
    "expired": False,
    "created_at": "2026-07-17T03:12:45Z",
    "expires_at": "2026-10-15T03:12:45Z",
    "updated_at": "2026-07-17T03:12:45Z",
}


def test_a_complete_body_passes_unchanged():
    body = dict(ARTIFACT)
    assert conform(body, "artifact", "http://h") == ARTIFACT


def test_a_body_lacking_a_required_field_is_refused_naming_it_not_filled():
    body = {k: v for k, v in ARTIFACT.items() if k not in ("expired", "node_id")}
    with pytest.raises(SchemaGap, match=r"artifact body lacks required field\(s\) node_id, expired"):
        conform(body, "artifact", "http://h")
    assert "expired" not in body and "node_id" not in body  # nothing filled in


def test_nested_gaps_are_named_by_their_path():
    run = {"id": 1, "head_commit": {"id": "abc"}, "pull_requests": [{"id": 2}]}
    gaps = missing(run, "workflow-run")
    assert "head_commit.tree_id" in gaps and "head_commit.message" in gaps and "node_id" in gaps
    assert any(g.startswith("pull_requests.0.") for g in gaps)


def test_no_required_field_is_filled_by_the_check():
    assert KNOWN_GAPS == set()  # every renderer writes every field GitHub's description requires
    collaborator = {
        "login": "ada",
        "id": 1,
        "node_id": "U_1",
        "avatar_url": "http://h/a",
        "gravatar_id": "",
        "url": "http://h/u",
        "html_url": "http://h/ada",
        "followers_url": "http://h/f",
        "following_url": "http://h/g",
        "gists_url": "http://h/g",
        "starred_url": "http://h/s",
        "subscriptions_url": "http://h/s",
        "organizations_url": "http://h/o",
        "repos_url": "http://h/r",
        "events_url": "http://h/e",
        "received_events_url": "http://h/r",
        "type": "User",
        "site_admin": False,
        "permissions": {"pull": True, "triage": False, "push": False, "maintain": False, "admin": False},
    }
    with pytest.raises(SchemaGap, match="role_name"):  # once filled with "", now the renderer's to write
        conform(dict(collaborator), "nullable-collaborator", "http://h")
    assert conform({**collaborator, "role_name": "write"}, "nullable-collaborator", "http://h")["role_name"] == "write"
    with pytest.raises(SchemaGap, match="login"):
        conform({k: v for k, v in collaborator.items() if k != "login"}, "nullable-collaborator", "http://h")
