"""The routes' shared prologue as typed dependencies: `State` (the sandbox behind the app) and `Access`
(the repository named by the path, which the caller may see, a renderer for this request's base URL and
the caller's login); plus the body, paging and permission helpers every resource uses."""

from __future__ import annotations

import json
from typing import Annotated, NamedTuple
from urllib.parse import urlencode

from fastapi import Depends, Request

from ..models import Issue, Repo
from ..render import Renderer
from ..state import SandboxState
from .errors import ApiError, invalid, not_found


def sandbox_state(request: Request) -> SandboxState:
    return request.app.state.sandbox


State = Annotated[SandboxState, Depends(sandbox_state)]


def renderer(request: Request) -> Renderer:
    return Renderer(request.app.state.sandbox, str(request.base_url))


class RepoAccess(NamedTuple):
    repo: Repo
    rr: Renderer
    login: str


def repo_access(request: Request, state: State, owner: str, repo: str) -> RepoAccess:
    """The repository at /repos/{owner}/{repo}; a private one the caller has no role on is a 404, as on GitHub."""
    r = state.repo(f"{owner}/{repo}")
    login = request.state.login
    if r is None or (r.private and login not in r.permissions):
        raise not_found()
    return RepoAccess(r, renderer(request), login)


Access = Annotated[RepoAccess, Depends(repo_access)]


def need_write(r: Repo, login: str) -> None:
    if r.permissions.get(login) not in ("admin", "maintain", "write"):
        raise ApiError(403, "Resource not accessible by integration")


def issue_of(r: Repo, number: int) -> Issue:
    issue = r.issues.get(number)
    if issue is None:
        raise not_found()
    return issue


def pull_of(r: Repo, number: int) -> Issue:
    issue = r.issues.get(number)
    if issue is None or issue.pull is None:
        raise not_found()
    return issue


async def body_of(request: Request) -> dict | list:
    raw = await request.body()
    if not raw:
        return {}
    try:
        return json.loads(raw)
    except ValueError:
        raise ApiError(400, "Problems parsing JSON") from None


def page(request: Request, items: list, default: int = 30) -> tuple[list, dict]:
    try:
        per = max(1, min(100, int(request.query_params.get("per_page", default))))
        num = max(1, int(request.query_params.get("page", 1)))
    except ValueError:
        raise invalid([{"code": "invalid", "message": "page and per_page must be integers"}]) from None
    chunk = items[(num - 1) * per : num * per]
    last = max(1, -(-len(items) // per))
    links = []

    def url(n: int) -> str:
        q = dict(request.query_params)
        q.update(page=str(n), per_page=str(per))
        return f"{str(request.base_url).rstrip('/')}{request.url.path}?{urlencode(q)}"

    if num < last:
        links += [f'<{url(num + 1)}>; rel="next"', f'<{url(last)}>; rel="last"']
    if num > 1:
        links += [f'<{url(1)}>; rel="first"', f'<{url(num - 1)}>; rel="prev"']
    return chunk, ({"Link": ", ".join(links)} if links else {})
