"""What went wrong, for bot.domain.patience: an exception from PyGithub, requests or git, read as an outage
(GitHub does not answer), a rate limit (GitHub answered: wait this long) or any other error.

GitHub's rules (docs, "Rate limits for the REST API"): a secondary rate limit answers 403 or 429, with
`Retry-After` (seconds) when GitHub names the wait, else wait at least one minute; the primary limit answers
403/429 with `x-ratelimit-remaining: 0`, and the wait lasts until `x-ratelimit-reset` (epoch seconds).
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Iterator

import requests
import urllib3.exceptions
from github import GithubException, RateLimitExceededException

from bot.domain.patience import Failure, Trouble

SECONDARY_WAIT_S = 60.0
# what git (through curl) says when the host does not answer, or answers with a server error
GIT_UNREACHABLE = re.compile(
    r"Failed to connect|Could not connect|Couldn't connect|Connection refused|Connection timed out|"
    r"Operation timed out|Could not resolve host|Empty reply from server|Recv failure|Connection reset|"
    r"The requested URL returned error: 5\d\d|HTTP 5\d\d|unexpected disconnect|early EOF",
    re.IGNORECASE,
)


def _chain(exc: BaseException) -> Iterator[BaseException]:
    seen = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        yield current
        current = current.__cause__ or current.__context__


def _header(headers, name: str) -> str | None:
    if not headers:
        return None
    for key, value in dict(headers).items():
        if str(key).lower() == name:
            return str(value)
    return None


def _rate_wait(exc: GithubException, now: float) -> float | None:
    """Seconds GitHub asks us to wait, when `exc` is a rate limit; None when it is not one."""
    headers = exc.headers or {}
    after = _header(headers, "retry-after")
    remaining, reset = _header(headers, "x-ratelimit-remaining"), _header(headers, "x-ratelimit-reset")
    message = str((exc.data or {}).get("message", "") if isinstance(exc.data, dict) else exc.data or "").lower()
    limited = (
        isinstance(exc, RateLimitExceededException)
        or exc.status == 429
        or (exc.status == 403 and (after is not None or remaining == "0" or "rate limit" in message))
    )
    if not limited:
        return None
    if after is not None and after.strip().isdigit():
        return float(after)
    if remaining == "0" and reset is not None and reset.strip().isdigit():
        return max(0.0, float(reset) - now)
    return SECONDARY_WAIT_S


def classify(exc: BaseException, now: Callable[[], float] = time.time) -> Failure:
    detail = f"{type(exc).__name__}: {exc}"[:500]
    for link in _chain(exc):
        if isinstance(link, GithubException):
            wait = _rate_wait(link, now())
            if wait is not None:
                return Failure(Trouble.RATE_LIMITED, detail, wait)
            if link.status >= 500:
                return Failure(Trouble.OUTAGE, detail)
            return Failure(Trouble.ERROR, detail)  # GitHub answered and refused: waiting will not change it
        if isinstance(
            link,
            requests.ConnectionError
            | requests.Timeout
            | urllib3.exceptions.MaxRetryError
            | urllib3.exceptions.ProtocolError
            | urllib3.exceptions.TimeoutError
            | ConnectionError
            | TimeoutError,
        ):
            return Failure(Trouble.OUTAGE, detail)
    if GIT_UNREACHABLE.search(str(exc)):  # a fetch or push the git host did not answer
        return Failure(Trouble.OUTAGE, detail)
    return Failure(Trouble.ERROR, detail)
