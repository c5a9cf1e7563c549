"""Who may see the dashboard and its JSON API.

Open to clients on loopback (the bot's own machine, or an SSH tunnel to it). Anyone else needs the
token in `REVERT_BISECT_DASHBOARD_TOKEN`: `Authorization: Bearer <token>`, or the cookie that
`GET /login?token=<token>` sets (it holds an HMAC of the token, never the token). Compared in
constant time. With no token configured, non-loopback clients get 403 saying how to configure one.

Behind a reverse proxy on the same machine every client looks like loopback: configure the token
and have the proxy connect from another address, or do not expose the dashboard through it.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress

from fastapi import HTTPException, Request

from bot.settings import PLACEHOLDERS

COOKIE = "revert_bisect_dashboard"
NOT_CONFIGURED = (
    "The dashboard is open only to clients on loopback (127.0.0.1, ::1). To allow others, set "
    "REVERT_BISECT_DASHBOARD_TOKEN on the bot and send `Authorization: Bearer <token>`, "
    "or open /login?token=<token> once."
)
NEEDS_TOKEN = "This dashboard needs its token: send `Authorization: Bearer <token>`, or open /login?token=<token> once."


def is_loopback(host: str | None) -> bool:
    if not host:
        return False
    try:
        address = ipaddress.ip_address(host.split("%", 1)[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return address.is_loopback


def configured_token(request: Request) -> str | None:
    settings = getattr(request.app.state, "settings", None)
    secret = getattr(settings, "dashboard_token", None)
    value = secret.get_secret_value() if secret is not None else ""
    return None if value.strip().lower() in PLACEHOLDERS else value


def cookie_value(token: str) -> str:
    return hmac.new(token.encode(), b"revert-bisect dashboard session", hashlib.sha256).hexdigest()


def token_matches(given: str | None, token: str) -> bool:
    return given is not None and hmac.compare_digest(given.encode(), token.encode())


def authorized(request: Request, token: str) -> bool:
    header = request.headers.get("authorization", "")
    scheme, _, credentials = header.partition(" ")
    if scheme.lower() == "bearer" and token_matches(credentials.strip(), token):
        return True
    return token_matches(request.cookies.get(COOKIE), cookie_value(token))


def require_access(request: Request) -> None:
    """A dependency of every dashboard and API route."""
    if is_loopback(request.client.host if request.client else None):
        return
    token = configured_token(request)
    if token is None:
        raise HTTPException(403, NOT_CONFIGURED)
    if not authorized(request, token):
        raise HTTPException(401, NEEDS_TOKEN, headers={"WWW-Authenticate": 'Bearer realm="revert-bisect dashboard"'})
