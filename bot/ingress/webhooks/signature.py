"""GitHub's webhook signature: `X-Hub-Signature-256: sha256=<hex HMAC-SHA256 of the raw body>`."""

from __future__ import annotations

import hashlib
import hmac

PREFIX = "sha256="


def sign(secret: bytes, body: bytes) -> str:
    return PREFIX + hmac.new(secret, body, hashlib.sha256).hexdigest()


def verify(secret: bytes, body: bytes, header: str | None) -> bool:
    """True only for a well-formed header whose digest matches, compared in constant time."""
    if not secret or not header or not header.startswith(PREFIX):
        return False
    return hmac.compare_digest(sign(secret, body).encode(), header.strip().encode())
