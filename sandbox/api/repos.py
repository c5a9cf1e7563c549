"""Repositories, commits, comparisons, git refs and collaborator permissions."""

from __future__ import annotations

import re

from fastapi import APIRouter, Request
from fastapi.responses import Response

from .. import gitstore
from .deps import Access, State, body_of, need_write, page
from .errors import ApiError, invalid, not_found, respond

router = APIRouter()


@router.get("/repos/{owner}/{repo}")
def get_repo(request: Request, access: Access):
    r, rr, login = access
    return rr.repo(r, login)


@router.get("/repos/{owner}/{repo}/commits")
def list_commits(request: Request, access: Access, sha: str | None = None, path: str | None = None):
    r, rr, _ = access
    start = gitstore.resolve(r.path, sha or r.default_branch)
    if start is None:
        if sha is None:  # an empty repository
            raise ApiError(409, "Git Repository is empty.")
        raise not_found()
    total = int(gitstore.git(r.path, "rev-list", "--count", start, "--", *((path,) if path else ())).strip())
    window, headers = page(request, range(total))
    commits = (
        gitstore.log(
            r.path, start, max_count=len(window), skip=window.start if len(window) else 0, paths=(path,) if path else ()
        )
        if len(window)
        else []
    )
    items = [rr.commit(r, c) for c in commits]
    return respond(200, items, headers)


@router.get("/repos/{owner}/{repo}/commits/{commit_sha}/pulls")
def commit_pulls(request: Request, access: Access, state: State, commit_sha: str):
    r, rr, _ = access
    sha = gitstore.resolve(r.path, commit_sha)
    if sha is None:
        raise ApiError(422, "No commit found for SHA: " + commit_sha, [])
    found = [
        i
        for i in state.issues_of(r)
        if i.pull and (i.pull.merge_commit_sha == sha or (not i.pull.merged and rr.pull_shas(r, i)[0] == sha))
    ]
    found.sort(key=lambda i: -i.number)
    items, headers = page(request, found)
    return respond(200, [rr.pull(r, i, "pull-request-simple") for i in items], headers)


@router.get("/repos/{owner}/{repo}/commits/{ref:path}")
def get_commit(request: Request, access: Access, ref: str):
    r, rr, _ = access
    sha = gitstore.resolve(r.path, ref)
    if sha is None:
        if re.fullmatch(r"[0-9a-fA-F]{7,40}", ref):
            raise invalid([], f"No commit found for SHA: {ref}")
        raise not_found()
    return rr.commit(r, gitstore.commit(r.path, sha), with_files=True)


@router.get("/repos/{owner}/{repo}/compare/{basehead:path}")
def compare(request: Request, owner: str, repo: str, access: Access, basehead: str):
    r, rr, _ = access
    if "..." in basehead:
        base_rev, head_rev = basehead.split("...", 1)
    elif ".." in basehead:
        base_rev, head_rev = basehead.split("..", 1)
    else:
        raise not_found()
    base_rev, head_rev = base_rev.split(":")[-1], head_rev.split(":")[-1]
    base, head = gitstore.resolve(r.path, base_rev), gitstore.resolve(r.path, head_rev)
    if base is None or head is None:
        raise not_found()
    mb = gitstore.merge_base(r.path, base, head) or base
    ahead, behind = gitstore.count(r.path, f"{base}..{head}"), gitstore.count(r.path, f"{head}..{base}")
    status = "identical" if ahead == behind == 0 else "ahead" if behind == 0 else "behind" if ahead == 0 else "diverged"
    commits = gitstore.log(r.path, f"{mb}..{head}", reverse=True)[:250]
    files = [rr.file(r, head, f) for f in gitstore.files(r.path, mb, head)][:300]
    h = rr.html(r)
    return {
        "url": f"{rr.api(r)}/compare/{basehead}",
        "html_url": f"{h}/compare/{basehead}",
        "permalink_url": f"{h}/compare/{owner}:{base[:7]}...{owner}:{head[:7]}",
        "diff_url": f"{h}/compare/{basehead}.diff",
        "patch_url": f"{h}/compare/{basehead}.patch",
        "base_commit": rr.commit(r, gitstore.commit(r.path, base)),
        "merge_base_commit": rr.commit(r, gitstore.commit(r.path, mb)),
        "status": status,
        "ahead_by": ahead,
        "behind_by": behind,
        "total_commits": ahead,
        "commits": [rr.commit(r, c) for c in commits],
        "files": files,
    }


# -- git refs --


@router.get("/repos/{owner}/{repo}/git/ref/{ref:path}")
def get_ref(request: Request, access: Access, ref: str):
    r, rr, _ = access
    sha = gitstore.ref_sha(r.path, f"refs/{ref}")
    if sha is None:
        raise not_found()
    return rr.git_ref(r, f"refs/{ref}", sha)


@router.post("/repos/{owner}/{repo}/git/refs", status_code=201)
async def create_ref(request: Request, access: Access, state: State):
    r, rr, login = access
    need_write(r, login)
    body = await body_of(request)
    ref, sha = body.get("ref") if isinstance(body, dict) else None, body.get("sha") if isinstance(body, dict) else None
    if not isinstance(ref, str) or not isinstance(sha, str):
        raise invalid(
            [{"resource": "Reference", "field": "ref" if not isinstance(ref, str) else "sha", "code": "missing_field"}],
            "Invalid request.",
        )
    if not ref.startswith("refs/") or ref.count("/") < 2 or not gitstore.valid_ref(ref):
        raise invalid([], "Reference name is invalid")
    if gitstore.ref_sha(r.path, ref) is not None:
        raise invalid([], "Reference already exists")
    if not re.fullmatch(r"[0-9a-f]{40}", sha) or gitstore.object_type(r.path, sha) is None:
        raise invalid([], "Object does not exist")
    with state.lock:
        gitstore.update_ref(r.path, ref, sha)
    return respond(201, rr.git_ref(r, ref, sha), {"Location": f"{rr.api(r)}/git/{ref}"})


@router.delete("/repos/{owner}/{repo}/git/refs/{ref:path}", status_code=204)
def delete_ref(request: Request, access: Access, state: State, ref: str):
    r, _, login = access
    need_write(r, login)
    full = f"refs/{ref}"
    with state.lock:
        if gitstore.ref_sha(r.path, full) is None:
            raise invalid([], "Reference does not exist")
        gitstore.delete_ref(r.path, full)
    return Response(status_code=204)


# -- collaborators, search --


@router.get("/repos/{owner}/{repo}/collaborators/{username}/permission")
def collaborator_permission(request: Request, access: Access, state: State, username: str):
    r, rr, _ = access
    if username not in state.users:
        raise not_found()
    role = r.permissions.get(username, "none")
    permission = {"maintain": "write", "triage": "read"}.get(role, role)
    permissions = {
        "admin": role == "admin",
        "maintain": role in ("admin", "maintain"),
        "push": role in ("admin", "maintain", "write"),
        "triage": role in ("admin", "maintain", "write", "triage"),
        "pull": role != "none",
    }
    role_name = "" if role == "none" else role  # a stranger: permission "none", an empty role_name (REALITY.md)
    user = rr.user(username, "nullable-collaborator", permissions=permissions, role_name=role_name)
    return {"permission": permission, "role_name": role_name, "user": user}
