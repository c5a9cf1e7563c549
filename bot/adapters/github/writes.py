"""Writes that survive a lost answer: retried by the bot, above the transport, each retry looked up first.

A POST that GitHub processed can still time out or lose its answer. PyGithub's transport retry would send it
again and make a second comment, issue, PR or workflow run, so the transport retries only idempotent methods
(`TRANSPORT_METHODS`) and every POST goes through `Writes.make`: on a failure that may be retried (the
connection dropped, a timeout, 5xx, 429 or a secondary rate limit) it waits (Retry-After when GitHub says,
else an exponential backoff, and after a timeout long enough for a request still in flight to land), then asks
`find` whether the first attempt was done after all, and only then sends the write again.
"""

from __future__ import annotations

import logging
import time
import weakref
from collections.abc import Callable
from dataclasses import dataclass
from typing import TypeVar

import requests
from github import Github, GithubException, RateLimitExceededException
from urllib3.util.retry import Retry

from bot.observability.reachability import GitHubUnreachable

log = logging.getLogger(__name__)
T = TypeVar("T")

# GET, HEAD, OPTIONS, PUT, DELETE, TRACE (urllib3's idempotent methods) and PATCH: every PATCH the bot sends sets a
# field to a value (a comment's body), so sending it twice leaves what sending it once does. Never POST.
TRANSPORT_METHODS = frozenset(Retry.DEFAULT_ALLOWED_METHODS | {"PATCH"}) - {"POST"}


@dataclass(frozen=True)
class Writes:
    """How a client's writes are retried: `attempts` sends at most, `pause` the first backoff (doubled each time),
    `timeout` the client's per-request timeout, `max_wait` the longest wait GitHub's Retry-After gets,
    `secondary_wait` the wait after a secondary rate limit that names none (GitHub: "wait at least one minute")."""

    attempts: int = 5
    pause: float = 2.0
    timeout: float = 15.0
    max_wait: float = 120.0
    secondary_wait: float = 60.0
    sleep: Callable[[float], None] = time.sleep

    def make(
        self, what: str, write: Callable[[], T], find: Callable[[], T | None] | None = None, *, idempotent: bool = False
    ) -> T:
        """`write()`, retried on an answer that says "not now" (429, a secondary rate limit: GitHub did nothing), and
        on a lost answer or a 5xx (GitHub may have done it) when it can be looked up first -- `find()` returns what
        the earlier attempt made, if it did -- or is `idempotent` on GitHub's side (the same label, reaction or
        review request twice is one)."""
        for attempt in range(1, self.attempts + 1):
            try:
                return write()
            except Exception as exc:
                wait = self.wait_after(exc, attempt)
                if wait is not None and not (find or idempotent) and not refused_for_now(exc):
                    wait = None  # it may have been done, and nothing can tell: not sent twice
                if wait is None or attempt == self.attempts:
                    raise  # a refusal, or the last attempt's failure, as the transport raised it
                log.warning("%s: %s; trying again in %.1fs", what, describe(exc), wait)
                self.sleep(wait)
            if find is not None and (found := find()) is not None:
                log.info("%s: the earlier attempt was done after all; not sent again", what)
                return found
        raise AssertionError("unreachable")

    def wait_after(self, exc: Exception, attempt: int) -> float | None:
        """How long to wait before retrying after `exc`, or None when it must not be retried (a refusal)."""
        if isinstance(exc, GitHubUnreachable):  # not sent at all: the job is parked until GitHub answers again
            return None
        backoff = self.pause * 2 ** (attempt - 1)
        if isinstance(exc, requests.Timeout):  # the request may still be in flight: let it land before looking
            return max(backoff, 2 * self.timeout)
        if isinstance(exc, requests.ConnectionError):  # includes an answer lost with the connection
            return backoff
        if isinstance(exc, GithubException):
            if exc.status >= 500 or exc.status == 429 or isinstance(exc, RateLimitExceededException):
                after = (exc.headers or {}).get("retry-after") or (exc.headers or {}).get("Retry-After")
                if after and str(after).isdigit():
                    return min(float(after), self.max_wait)
                return max(backoff, self.secondary_wait) if exc.status in (403, 429) else backoff
        return None


def refused_for_now(exc: Exception) -> bool:
    """GitHub answered "not now" (429, or a rate limit): it did nothing, so the same request may be sent again."""
    return isinstance(exc, RateLimitExceededException) or isinstance(exc, GithubException) and exc.status == 429


def describe(exc: Exception) -> str:
    if isinstance(exc, GithubException):
        data = exc.data if isinstance(exc.data, dict) else {}
        return f"{exc.status} {data.get('message') or ''}".strip()
    return f"{type(exc).__name__}: {exc}"


_POLICIES: weakref.WeakKeyDictionary[Github, Writes] = weakref.WeakKeyDictionary()


def register(gh: Github, writes: Writes) -> Github:
    """Remember how `gh`'s writes are retried (the factories that build clients call this)."""
    _POLICIES[gh] = writes
    return gh


def writes_of(gh: Github) -> Writes:
    return _POLICIES.get(gh) or Writes()


def for_client(*, patient: bool, timeout: float) -> Writes:
    """GitHub: patient (2 s, doubled); a local sandbox: quick."""
    if patient:
        return Writes(timeout=timeout)
    return Writes(pause=0.1, timeout=timeout, max_wait=2.0, secondary_wait=1.0)
