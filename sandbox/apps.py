"""GitHub Apps in the sandbox: an app's JWT (RS256, signed with its private key) finds its
installation on a repository and exchanges it for an installation token, as on GitHub."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import jwt


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
