"""git smart HTTP at /{owner}/{repo}.git: clone and fetch for readers, push for writers."""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import Response

from ..githttp import git_http_backend
from ..workflow_push import refusal_env
from .deps import State

router = APIRouter()


@router.api_route("/{owner}/{repo}.git/{path:path}", methods=["GET", "POST"])
async def git_http(request: Request, owner: str, repo: str, state: State, path: str):
    r = state.repo(f"{owner}/{repo}")
    if r is None:
        return Response("Repository not found.\n", status_code=404, media_type="text/plain")
    pushing = path.endswith("git-receive-pack") or request.query_params.get("service") == "git-receive-pack"
    if pushing and r.permissions.get(request.state.login) not in ("admin", "maintain", "write"):
        return Response("Permission denied.\n", status_code=403, media_type="text/plain")
    # GitHub refuses a push changing .github/workflows/ without the `workflows` permission / `workflow` scope
    extra = refusal_env(state, getattr(request.state, "token", None)) if pushing else {}
    return await git_http_backend(request, state.root, f"/{r.owner}/{r.name}.git/{path}", request.state.login, extra)
