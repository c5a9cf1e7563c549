"""GitHub Apps in the sandbox: an app's JWT (RS256, signed with its private key) finds its
installation on a repository and exchanges it for an installation token, as on GitHub."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import jwt

# What the sandbox's App is granted: what a GitHub App registered from deploy/github-app-manifest.json is granted
# (tests/integration/test_refused_writes.py holds them equal), so without `workflows`: GitHub then refuses its pushes
# that create or change a file under .github/workflows/. A test grants it with `app.permissions["workflows"] =
# "write"` (tokens made after that carry it).
DEFAULT_PERMISSIONS = {
    "actions": "write",
    "contents": "write",
    "issues": "write",
    "metadata": "read",
    "pull_requests": "write",
}


@dataclass
class App:
    id: int
    slug: str
    public_key: str
    installations: dict[str, int] = field(default_factory=dict)  # repo full name (lower) -> installation id
    permissions: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_PERMISSIONS))

    @property
    def bot_login(self) -> str:
        return f"{self.slug}[bot]"


class AppRegistry:
    def __init__(self) -> None:
        self.apps: dict[int, App] = {}
        self.lock = threading.Lock()
        # installation token -> the permissions it was issued with (GitHub's token carries its own, fixed for its hour)
        self.token_permissions: dict[str, dict[str, str]] = {}

    def permissions_of(self, token: str | None) -> dict[str, str] | None:
        """The permissions of an installation token; None for any other credential."""
        return self.token_permissions.get(token) if token else None

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
