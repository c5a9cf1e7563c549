"""Merging a pull request (pulls/merge, `PUT .../pulls/{n}/merge`) as GitHub does it for a branch that is up to date
with its base: a merge commit (`merge`, the default) or one squashed commit (`squash`, `<title> (#N)`), the base moved,
the PR closed as merged, and a `pull_request` `closed` webhook with `merged: true`. A head that is not up to date with
its base is refused (405 "Pull Request is not mergeable"): the sandbox merges no trees (never kinder than GitHub)."""

from __future__ import annotations

import time

from fastapi import APIRouter, Request

from .. import gitstore
from ..actions.outbox import hook_repository
from ..models import now_iso
from .deps import Access, State, body_of, need_write, pull_of
from .errors import ApiError, invalid, respond

router = APIRouter()
MERGE_DOCS = "https://docs.github.com/rest/pulls/pulls#merge-a-pull-request"
METHODS = ("merge", "squash")


def _commit(repo_path, tree: str, parents: list[str], message: str, author: tuple[str, str]) -> str:
    name, email = author
    stamp = f"{int(time.time())} +0000"
    env = dict(
        GIT_AUTHOR_NAME=name,
        GIT_AUTHOR_EMAIL=email,
        GIT_AUTHOR_DATE=stamp,
        GIT_COMMITTER_NAME="GitHub",
        GIT_COMMITTER_EMAIL="noreply@github.com",
        GIT_COMMITTER_DATE=stamp,
    )
    args = ["commit-tree", tree, *[a for p in parents for a in ("-p", p)], "-m", message]
    return gitstore.git_env(repo_path, env, *args).strip()


@router.put("/repos/{owner}/{repo}/pulls/{pull_number}/merge")
async def merge(request: Request, access: Access, state: State, pull_number: int):
    r, rr, login = access
    issue = pull_of(r, pull_number)
    need_write(r, login)
    body = await body_of(request)
    body = body if isinstance(body, dict) else {}
    method = body.get("merge_method", "merge")
    if method not in METHODS:
        raise invalid([{"resource": "PullRequest", "field": "merge_method", "code": "invalid"}])
    p = issue.pull
    if p.merged or issue.state != "open":
        raise ApiError(405, "Pull Request is not mergeable", doc=MERGE_DOCS)
    head, base = rr.pull_shas(r, issue)
    if not head or not base or gitstore.merge_base(r.path, base, head) != base:
        raise ApiError(405, "Pull Request is not mergeable", doc=MERGE_DOCS)
    if body.get("sha") and body["sha"] != head:
        raise ApiError(409, "Head branch was modified. Review and try the merge again.", doc=MERGE_DOCS)
    user = state.users.get(issue.user)
    author = (user.name or issue.user, user.email or f"{issue.user}@users.noreply.github.com") if user else ("", "")
    tree = gitstore.git(r.path, "rev-parse", f"{head}^{{tree}}").strip()
    if method == "squash":
        title = body.get("commit_title") or f"{issue.title} (#{pull_number})"
        message = f"{title}\n\n{body['commit_message']}" if body.get("commit_message") else title
        sha = _commit(r.path, tree, [base], message, author)
    else:
        title = body.get("commit_title") or f"Merge pull request #{pull_number} from {r.owner}/{p.head}"
        sha = _commit(r.path, tree, [base, head], f"{title}\n\n{body.get('commit_message') or issue.title}", author)
    gitstore.update_ref(r.path, f"refs/heads/{p.base}", sha)
    with state.lock:
        when = now_iso()
        p.merged, p.merged_at, p.merge_commit_sha, p.head_sha, p.base_sha = True, when, sha, head, base
        issue.state, issue.closed_at, issue.updated_at = "closed", when, when
    pull = rr.pull(r, issue)
    pull["merged_by"] = rr.user(login)
    state.actions.deliver(
        r.full_name,
        "pull_request",
        {
            "action": "closed",
            "number": pull_number,
            "pull_request": pull,
            "repository": hook_repository(rr, r),
            "sender": rr.user(login),
        },
    )
    return respond(200, {"sha": sha, "merged": True, "message": "Pull Request successfully merged"})
