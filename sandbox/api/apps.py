"""GitHub App endpoints: a JWT finds the app's installation on a repository and exchanges it for an
installation token (the app's bot user, with write permission on the installed repositories)."""

from __future__ import annotations

import secrets
from datetime import UTC, datetime, timedelta

from fastapi import APIRouter, Request

from ..apps import App
from ..schema import conform
from .deps import State, renderer
from .errors import ApiError

router = APIRouter()


def need_app(request: Request) -> App:
    found = getattr(request.state, "app", None)
    if found is None:
        raise ApiError(401, "A JSON web token could not be decoded")
    return found


def installation_body(request: Request, found: App, installation_id: int, owner: str) -> dict:
    base = str(request.base_url).rstrip("/")
    body = {
        "id": installation_id,
        "app_id": found.id,
        "app_slug": found.slug,
        "target_type": "Organization",
        "account": renderer(request).user(owner),
        "target_id": 1,
        "repository_selection": "selected",
        "access_tokens_url": f"{base}/app/installations/{installation_id}/access_tokens",
        "repositories_url": f"{base}/installation/repositories",
        "html_url": f"{base}/settings/installations/{installation_id}",
        "permissions": dict(found.permissions),
        "events": ["workflow_run", "issue_comment"],
        "created_at": "2026-01-01T00:00:00Z",
        "updated_at": "2026-01-01T00:00:00Z",
        "single_file_name": None,
        "suspended_by": None,
        "suspended_at": None,
    }
    return conform(body, "installation", base)


@router.get("/repos/{owner}/{repo}/installation")
def get_repo_installation(request: Request, owner: str, repo: str) -> dict:
    found = need_app(request)
    installation_id = found.installations.get(f"{owner}/{repo}".lower())
    if installation_id is None:
        raise ApiError(404, "Not Found")
    return installation_body(request, found, installation_id, owner)


@router.post("/app/installations/{installation_id}/access_tokens", status_code=201)
def create_installation_token(request: Request, state: State, installation_id: int) -> dict:
    found = need_app(request)
    repos = [name for name, iid in found.installations.items() if iid == installation_id]
    if not repos:
        raise ApiError(404, "Not Found")
    token = "ghs_" + secrets.token_hex(18)
    state.add_token(token, found.bot_login)
    granted = dict(found.permissions)
    with state.apps.lock:
        state.apps.token_permissions[token] = granted
    for name in repos:
        state.set_permission(name, found.bot_login, "write")
    expires = (datetime.now(UTC) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
    base = str(request.base_url).rstrip("/")
    body = {
        "token": token,
        "expires_at": expires,
        "permissions": granted,
        "repository_selection": "selected",
    }
    return conform(body, "installation-token", base)
