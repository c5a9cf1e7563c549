"""The REST API's primary rate limit and conditional requests, as GitHub does them.

- Every authenticated answer carries `x-ratelimit-limit`, `-remaining`, `-used`, `-reset` (epoch
  seconds) and `-resource: core` for its caller's hourly budget (5,000 for a user token or an App
  installation). When it is spent, requests answer 403 "API rate limit exceeded ..." with
  `x-ratelimit-remaining: 0` until the reset.
- Search (`/search/...`) has a budget of its own: 30 requests a minute, `-resource: search`, the same 403 when
  spent (docs.github.com/en/rest/search/search#rate-limit).
- A GET answers with an `ETag`; a GET whose `If-None-Match` names the current one answers
  `304 Not Modified` without a body, and a 304 does not count against the budget.

Sources: docs.github.com/en/rest/using-the-rest-api/rate-limits-for-the-rest-api and
docs.github.com/en/rest/using-the-rest-api/best-practices-for-using-the-rest-api
("Use conditional requests if appropriate"); REALITY.md.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from fastapi import Request
from fastapi.responses import JSONResponse, Response

LIMIT = 5000
WINDOW_S = 3600
# Search has its own budget: 30 requests a minute for an authenticated caller, answered 403 with
# `x-ratelimit-resource: search` when spent (docs.github.com/en/rest/search/search#rate-limit).
SEARCH_LIMIT = 30
SEARCH_WINDOW_S = 60
DOCS = "https://docs.github.com/rest/overview/rate-limits-for-the-rest-api#about-primary-rate-limits"


@dataclass
class Budget:
    reset: float
    used: int = 0
    not_modified: int = 0
    resource: str = "core"


@dataclass
class RateBook:
    """Each caller's budget, and every REST request counted by (method, path) and by answer status."""

    limit: int = LIMIT
    search_limit: int = SEARCH_LIMIT
    clock: Callable[[], float] = time.time
    budgets: dict[str, Budget] = field(default_factory=dict)
    calls: Counter = field(default_factory=Counter)  # (method, path) -> requests answered
    statuses: Counter = field(default_factory=Counter)  # status code -> requests answered
    lock: threading.Lock = field(default_factory=threading.Lock)

    def budget(self, login: str, resource: str = "core") -> Budget:
        now = self.clock()
        key = login if resource == "core" else f"{resource}:{login}"
        got = self.budgets.get(key)
        if got is None or now >= got.reset:
            window = WINDOW_S if resource == "core" else SEARCH_WINDOW_S
            got = self.budgets[key] = Budget(reset=now + window, resource=resource)
        return got

    def limit_of(self, budget: Budget) -> int:
        return self.limit if budget.resource == "core" else self.search_limit

    def total(self) -> int:
        return sum(self.statuses.values())

    def headers(self, budget: Budget) -> dict[str, str]:
        return {
            "X-RateLimit-Limit": str(self.limit_of(budget)),
            "X-RateLimit-Remaining": str(max(0, self.limit_of(budget) - budget.used)),
            "X-RateLimit-Used": str(budget.used),
            "X-RateLimit-Reset": str(int(budget.reset)),
            "X-RateLimit-Resource": budget.resource,
        }


def etag_of(body: bytes) -> str:
    return 'W/"' + hashlib.sha256(body).hexdigest()[:32] + '"'


def _matches(header: str | None, etag: str) -> bool:
    if not header:
        return False
    wanted = {t.strip().removeprefix("W/") for t in header.split(",")}
    return "*" in wanted or etag.removeprefix("W/") in wanted


async def rate_and_etag(request: Request, call_next, book: RateBook):
    """Installed inside the credentials check (it reads the caller's login from request.state)."""
    login = getattr(request.state, "login", None) or getattr(request.state, "app", None)
    if login is None or request.url.path.startswith("/_sandbox/") or ".git/" in request.url.path:  # git: no REST budget
        return await call_next(request)
    key = str(login)
    resource = "search" if request.url.path.startswith("/search/") else "core"
    with book.lock:
        budget = book.budget(key, resource)
        spent = budget.used >= book.limit_of(budget)
    if spent:
        with book.lock:
            book.statuses[403] += 1
        body = {"message": f"API rate limit exceeded for {key}.", "documentation_url": DOCS}
        return JSONResponse(body, status_code=403, headers=book.headers(budget))
    response = await call_next(request)
    status = response.status_code
    if (
        request.method == "GET"
        and status == 200
        and response.headers.get("content-type", "").startswith("application/json")
    ):
        body = b"".join([chunk async for chunk in response.body_iterator])
        etag = etag_of(body)
        headers = {k: v for k, v in response.headers.items() if k.lower() != "content-length"}
        if _matches(request.headers.get("if-none-match"), etag):
            status = 304
            response = Response(status_code=304, headers={"ETag": etag, **_keep(headers)})
        else:
            response = Response(body, status_code=200, headers={**headers, "ETag": etag})
    with book.lock:
        if status == 304:
            budget.not_modified += 1
        else:
            budget.used += 1
        book.calls[(request.method, request.url.path)] += 1
        book.statuses[status] += 1
        for name, value in book.headers(budget).items():
            response.headers[name] = value
    return response


def _keep(headers: dict[str, str]) -> dict[str, str]:
    """A 304 keeps the headers a 200 would have sent, except those describing the body."""
    return {k: v for k, v in headers.items() if k.lower() not in ("content-type", "etag")}
