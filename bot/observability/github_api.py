"""GitHub API calls, counted where PyGithub sends them, and the rate limit GitHub reports.

PyGithub sends every request through its connection class (`Requester.getresponse`); PyGithub lets a
program replace that class (`Requester.injectConnectionClasses`). Ours is PyGithub's own, counting
each answered request by method and status class (and "error" when no answer came), keeping the
last `X-RateLimit-*` headers per resource, and registering the request's token for log redaction.

It is process-wide (every Github, GithubIntegration and installation-token client built after
`install()`, which the app factory and the wiring call before they build a client: importing a module
patches nothing), like the rate limit it watches; `STATS.reset()` clears it for tests.
Retries done inside urllib3 (GithubRetry) are invisible here: a call retried three times counts once,
with its final status. The same class stops sending requests while GitHub does not answer
(bot.observability.reachability). The fetches of the signed URLs GitHub's downloads redirect to go to another
host, not through PyGithub: bot.adapters.github.downloads counts each (`record_download`).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field

import requests

from bot.observability.logs import register_secret
from bot.observability.reachability import GitHubUnreachable, host_key, of_host


@dataclass
class ApiStats:
    calls: dict[tuple[str, str], int] = field(default_factory=dict)  # (method, status class) -> count
    remaining: dict[str, int] = field(default_factory=dict)  # X-RateLimit-Resource -> X-RateLimit-Remaining
    limit: dict[str, int] = field(default_factory=dict)
    reset_at: dict[str, int] = field(default_factory=dict)  # epoch seconds
    downloads: dict[str, int] = field(default_factory=dict)  # signed-URL fetches (blob host): status class -> count
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def record(self, method: str, status: int | None, headers) -> None:
        status_class = f"{status // 100}xx" if status else "error"
        key = (method.upper(), status_class)
        resource = (headers.get("X-RateLimit-Resource") or "core") if headers else "core"
        with self._lock:
            self.calls[key] = self.calls.get(key, 0) + 1
            for target, name in (
                (self.remaining, "X-RateLimit-Remaining"),
                (self.limit, "X-RateLimit-Limit"),
                (self.reset_at, "X-RateLimit-Reset"),
            ):
                value = headers.get(name) if headers else None
                if value is not None and str(value).isdigit():
                    target[resource] = int(value)

    def record_download(self, status_class: str) -> None:
        """One fetch of a signed download URL (bot.adapters.github.downloads): 2xx, 4xx, 5xx, error, too_large."""
        with self._lock:
            self.downloads[status_class] = self.downloads.get(status_class, 0) + 1

    def downloads_snapshot(self) -> dict[str, int]:
        with self._lock:
            return dict(self.downloads)

    def snapshot(self) -> tuple[dict, dict, dict, dict]:
        with self._lock:
            return dict(self.calls), dict(self.remaining), dict(self.limit), dict(self.reset_at)

    def reset(self) -> None:
        with self._lock:
            self.calls.clear()
            self.remaining.clear()
            self.limit.clear()
            self.reset_at.clear()
            self.downloads.clear()


STATS = ApiStats()


def _token_of(headers) -> str | None:
    value = (headers or {}).get("Authorization") or (headers or {}).get("authorization")
    if not value or " " not in value:
        return None
    return value.split(" ", 1)[1].strip()


class _Counted:
    """Mixed into PyGithub's connection classes: every response (or failure) is recorded, and GitHub's
    reachability of its host learns from it; while that host does not answer, a request is not sent at all."""

    def getresponse(self):
        register_secret(_token_of(getattr(self, "headers", None)), transient=True)
        reach = of_host(host_key(self.host, self.port, self.protocol))  # this host's: another's outage is not ours
        ticket = reach.ticket()
        if ticket is None:
            raise GitHubUnreachable(
                f"GitHub did not answer the last requests; {self.verb} not sent "
                f"(the next try in {reach.next_trial_in():.0f}s)"
            )
        try:
            response = super().getresponse()
        except Exception as exc:
            STATS.record(self.verb, None, None)
            reach.report(ticket, answered=not isinstance(exc, requests.RequestException))
            raise
        STATS.record(self.verb, response.status, response.headers)  # requests' case-insensitive dict
        reach.report(ticket, answered=response.status < 500)
        return response


_installed = False
_install_lock = threading.Lock()


def install() -> None:
    """Count every PyGithub request from now on (idempotent: the app factory and the wiring both call it).
    Clients built before keep their class."""
    global _installed
    with _install_lock:
        if _installed:
            return
        from github.Requester import HTTPRequestsConnectionClass, HTTPSRequestsConnectionClass, Requester

        class CountedHTTPConnection(_Counted, HTTPRequestsConnectionClass):
            pass

        class CountedHTTPSConnection(_Counted, HTTPSRequestsConnectionClass):
            pass

        Requester.injectConnectionClasses(CountedHTTPConnection, CountedHTTPSConnection)
        _installed = True


class GitHubApiCollector:
    """STATS as Prometheus series; one per app registry, all reading the same process-wide numbers."""

    def __init__(self, stats: ApiStats = STATS):
        self.stats = stats

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        calls, remaining, limit, reset_at = self.stats.snapshot()
        counter = CounterMetricFamily(
            "revert_bisect_github_api_calls",
            "GitHub API requests made by this process (PyGithub), by method and status class (error: no answer).",
            labels=["method", "status_class"],
        )
        for (method, status_class), n in sorted(calls.items()):
            counter.add_metric([method, status_class], n)
        yield counter
        downloads = CounterMetricFamily(
            "revert_bisect_github_downloads",
            "Fetches of signed download URLs GitHub redirected to (artifacts, logs), by status class "
            "(error: no answer; too_large: over the size limit).",
            labels=["status_class"],
        )
        for status_class, n in sorted(self.stats.downloads_snapshot().items()):
            downloads.add_metric([status_class], n)
        yield downloads
        for name, values, doc in (
            (
                "revert_bisect_github_rate_limit_remaining",
                remaining,
                "X-RateLimit-Remaining of the latest GitHub API answer, by X-RateLimit-Resource.",
            ),
            (
                "revert_bisect_github_rate_limit_limit",
                limit,
                "X-RateLimit-Limit of the latest GitHub API answer, by X-RateLimit-Resource.",
            ),
            (
                "revert_bisect_github_rate_limit_reset_timestamp_seconds",
                reset_at,
                "X-RateLimit-Reset (epoch seconds) of the latest GitHub API answer, by X-RateLimit-Resource.",
            ),
        ):
            gauge = GaugeMetricFamily(name, doc, labels=["resource"])
            for resource, value in sorted(values.items()):
                gauge.add_metric([resource], value)
            yield gauge
