"""Whether GitHub answers, as this process last found it, and the breaker that stops asking while it does not.

Every PyGithub request reports here (bot.observability.github_api's connection class): an answer below 500
is GitHub answering; no answer (connection refused, a timeout, after urllib3's few connect retries) or a 5xx
is not. After `threshold` unanswered requests in a row, or when the worker parks a job because GitHub is
unreachable, GitHub is taken as *down*: requests then fail at once, without touching the network
(`GitHubUnreachable`), except one trial at a time when the probe schedule says (bot.domain.patience,
exponential backoff with jitter). The worker's probe (GET /rate_limit, which GitHub does not count against the
rate limit) or any trial request that is answered brings GitHub back *up*.

One per GitHub host this process talks to (`of(url)`: github.com's API, a GitHub Enterprise server, a sandbox on
loopback), so a host that stops answering never parks the work of another; tests build their own with a fake clock.
"""

from __future__ import annotations

import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import requests

from bot.domain.patience import PROBE_BACKOFF, Backoff, ProbeSchedule

THRESHOLD = 3


class GitHubUnreachable(requests.ConnectionError):
    """A request not sent: GitHub did not answer the last ones, and the next trial is not due yet."""


@dataclass(frozen=True)
class Seen:
    up: bool
    down_since: float | None  # epoch seconds
    last_answer: float | None  # epoch seconds
    outages: int
    short_circuited: int
    probes: dict[bool, int]


class Reachability:
    def __init__(
        self,
        threshold: int = THRESHOLD,
        backoff: Backoff = PROBE_BACKOFF,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], float] = time.time,
        rng: Callable[[], float] = random.random,
    ):
        self.threshold = threshold
        self.backoff = backoff
        self.clock, self.wall, self.rng = clock, wall, rng
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        with self._lock:
            self._up = True
            self._failures = 0
            self._down_since: float | None = None
            self._last_answer: float | None = None
            self._schedule = ProbeSchedule()
            self._trying = False
            self._outages = 0
            self._short_circuited = 0
            self._probes = {True: 0, False: 0}

    @property
    def up(self) -> bool:
        return self._up

    def answered(self) -> None:
        """A request got an answer from GitHub (any status below 500)."""
        with self._lock:
            self._failures = 0
            self._last_answer = self.wall()
            if not self._up:
                self._up, self._down_since = True, None
                self._schedule = ProbeSchedule(0, self.clock())

    def unanswered(self) -> None:
        """A request got no answer, or a 5xx, after the transport's own retries."""
        with self._lock:
            self._failures += 1
            if self._up and self._failures >= self.threshold:
                self._down()

    def mark_down(self) -> None:
        """A job gave up for now because GitHub (its API or its git host) did not answer."""
        with self._lock:
            if self._up:
                self._down()

    def _down(self) -> None:
        self._up, self._down_since, self._outages = False, self.wall(), self._outages + 1
        self._schedule = ProbeSchedule(0, self.clock() + self.backoff.delay(0, self.rng()))

    def claim_trial(self) -> bool:
        """True for the one caller that may ask GitHub now: the probe is due and nobody else is asking."""
        with self._lock:
            if self._trying or not self._schedule.is_due(self.clock()):
                return False
            self._trying = True
            return True

    def trial_done(self, answered: bool, probe: bool = False) -> None:
        with self._lock:
            self._trying = False
            self._schedule = self._schedule.after_probe(answered, self.clock(), self.rng(), self.backoff)
            if probe:
                self._probes[answered] += 1
        if answered:
            self.answered()
        else:
            self.mark_down()

    def ticket(self) -> str | None:
        """May a request go out now? "go" while GitHub answers; else "trial" for the one due trial, or None:
        not sent (counted as short-circuited). The caller reports how it went with `report`."""
        if self._up:
            return "go"
        if self.claim_trial():
            return "trial"
        with self._lock:
            self._short_circuited += 1
        return None

    def report(self, ticket: str, answered: bool) -> None:
        if ticket == "trial":
            self.trial_done(answered)
        elif answered:
            self.answered()
        else:
            self.unanswered()

    def next_trial_in(self) -> float:
        with self._lock:
            return max(0.0, self._schedule.due - self.clock())

    def answered_since(self, epoch: float) -> bool:
        """GitHub answered this process after `epoch` (and still does)."""
        with self._lock:
            return self._up and self._last_answer is not None and self._last_answer > epoch

    def seen(self) -> Seen:
        with self._lock:
            return Seen(
                self._up,
                self._down_since,
                self._last_answer,
                self._outages,
                self._short_circuited,
                dict(self._probes),
            )


_HOSTS: dict[str, Reachability] = {}
_HOSTS_LOCK = threading.Lock()


def host_key(host: str, port: int | None, scheme: str = "https") -> str:
    return f"{host.lower()}:{port or (443 if scheme == 'https' else 80)}"


def of(url: str) -> Reachability:
    """The reachability of the host serving `url` (its API base, e.g. https://api.github.com)."""
    parts = urlsplit(url)
    return of_host(host_key(parts.hostname or "", parts.port, parts.scheme or "https"))


def of_host(key: str) -> Reachability:
    with _HOSTS_LOCK:
        if key not in _HOSTS:
            _HOSTS[key] = Reachability()
        return _HOSTS[key]


def reset_all() -> None:
    """Forget every host's state (tests: each starts with every host answering)."""
    with _HOSTS_LOCK:
        _HOSTS.clear()


def probe(api_url: str, timeout: float = 5.0) -> bool:
    """One cheap request: does GitHub answer at all? GET /rate_limit costs nothing against the rate limit
    (GitHub docs, "Get rate limit status for the authenticated user"); any status below 500 is an answer, even
    401 (no credentials are sent: the probe needs none)."""
    try:
        return requests.get(api_url.rstrip("/") + "/rate_limit", timeout=timeout).status_code < 500
    except requests.RequestException:
        return False


class ReachabilityCollector:
    """The configured GitHub's reachability as Prometheus series."""

    def __init__(self, reach: Reachability):
        self.reach = reach

    def describe(self):
        return []

    def collect(self):
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        seen = self.reach.seen()
        up = GaugeMetricFamily(
            "revert_bisect_github_reachable",
            "1 while GitHub answers this process's requests; 0 after it stopped answering, until a probe is answered.",
        )
        up.add_metric([], 1 if seen.up else 0)
        yield up
        since = GaugeMetricFamily(
            "revert_bisect_github_unreachable_since_timestamp_seconds",
            "When GitHub stopped answering (epoch seconds; 0 while it answers).",
        )
        since.add_metric([], seen.down_since or 0.0)
        yield since
        outages = CounterMetricFamily(
            "revert_bisect_github_outages", "Times this process found GitHub not answering (down after up)."
        )
        outages.add_metric([], seen.outages)
        yield outages
        skipped = CounterMetricFamily(
            "revert_bisect_github_short_circuited",
            "GitHub API requests not sent because GitHub was not answering (each failed at once, with no network).",
        )
        skipped.add_metric([], seen.short_circuited)
        yield skipped
        probes = CounterMetricFamily(
            "revert_bisect_github_probes",
            "Probes of GitHub (GET /rate_limit) by the worker while jobs were parked, by whether GitHub answered.",
            labels=["answered"],
        )
        for answered in (True, False):
            probes.add_metric(["true" if answered else "false"], seen.probes[answered])
        yield probes
