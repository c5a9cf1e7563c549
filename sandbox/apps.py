"""GitHub Apps in the sandbox: an app's JWT (RS256, signed with its private key) finds its
installation on a repository and exchanges it for an installation token, as on GitHub."""

from __future__ import annotations

import secrets
import threading
from dataclasses import dataclass, field
from datetime import datetime, timedelta, timezone

import jwt
from fastapi import FastAPI, Request

from .schema import conform


@dataclass
class App:
    id: int
    slug: str
    public_key: str
    installations: dict[str, int] = field(default_factory=dict)  # repo full name (lower) -> installation id

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


class AppRegistry:
    def __init__(self) -> None:
        self.apps: dict[int, App] = {}
        self.lock = threading.Lock()

    def app_for(self, token: str | None) -> App | None:
        """The app whose key signed this JWT (issuer = app id, not expired), else None."""
        if not token or token.count(".") != 2:
            return None
        try:
            issuer = int(jwt.decode(token, options={"verify_signature": False})["iss"])
            app = self.apps.get(issuer)
            if app is None:
                return None
            jwt.decode(token, app.public_key, algorithms=["RS256"], options={"require": ["exp", "iat", "iss"]})
            return app
        except (jwt.PyJWTError, KeyError, ValueError, TypeError):
            return None


def register(app: FastAPI, state, *, renderer, ApiError) -> None:
    def need_app(request: Request) -> App:
        found = getattr(request.state, "app", None)
        if found is None:
            raise ApiError(401, "A JSON web token could not be decoded")
        return found

    def installation_body(request: Request, found: App, installation_id: int, owner: str) -> dict:
        base = str(request.base_url).rstrip("/")
        body = {
            "id": installation_id, "app_id": found.id, "app_slug": found.slug, "target_type": "Organization",
            "account": renderer(request).user(owner), "target_id": 1, "repository_selection": "selected",
            "access_tokens_url": f"{base}/app/installations/{installation_id}/access_tokens",
            "repositories_url": f"{base}/installation/repositories", "html_url": f"{base}/settings/installations/{installation_id}",
            "permissions": {"contents": "write", "pull_requests": "write", "issues": "write", "actions": "write", "checks": "write"},
            "events": ["workflow_run", "issue_comment"], "created_at": "2026-01-01T00:00:00Z", "updated_at": "2026-01-01T00:00:00Z",
            "single_file_name": None, "suspended_by": None, "suspended_at": None,
        }
        return conform(body, "installation", base)

    @app.get("/repos/{owner}/{repo}/installation")
    def get_repo_installation(request: Request, owner: str, repo: str) -> dict:
        found = need_app(request)
        installation_id = found.installations.get(f"{owner}/{repo}".lower())
        if installation_id is None:
            raise ApiError(404, "Not Found")
        return installation_body(request, found, installation_id, owner)

    @app.post("/app/installations/{installation_id}/access_tokens", status_code=201)
    def create_installation_token(request: Request, installation_id: int) -> dict:
        found = need_app(request)
        repos = [name for name, iid in found.installations.items() if iid == installation_id]
        if not repos:
            raise ApiError(404, "Not Found")
        token = "ghs_" + secrets.token_hex(18)
        state.add_token(token, found.bot_login)
        for name in repos:
            state.set_permission(name, found.bot_login, "write")
        expires = (datetime.now(timezone.utc) + timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M:%SZ")
        base = str(request.base_url).rstrip("/")
        body = {"token": token, "expires_at": expires, "permissions": {"contents": "write", "pull_requests": "write", "issues": "write"},
                "repository_selection": "selected"}
        return conform(body, "installation-token", base)
