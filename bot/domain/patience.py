"""Patience with GitHub: what a failed job does next, and when to ask GitHub again whether it answers.

Pure decisions over plain values; the adapters say what went wrong (`Failure`), the worker does what is decided.

- GitHub unreachable (connection refused, timeouts, 5xx for every call): the job is *parked*; it waits, without
  counting against its attempts, until a cheap probe finds GitHub answering again, then goes back to the queue.
- A rate limit (403/429 secondary limit with Retry-After, or the primary limit spent until X-RateLimit-Reset):
  the job waits as long as GitHub asks (never less than the backoff), also without counting an attempt.
- Anything else: tried again after an exponential backoff with jitter, up to `max_attempts`, then failed for good.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum


class Trouble(StrEnum):
    OUTAGE = "outage"  # no answer, or a server error: GitHub is down or unreachable from here
    RATE_LIMITED = "rate_limited"  # GitHub answered, and asked us to wait
    ERROR = "error"  # anything else: a bug, a refusal, a bad payload


@dataclass(frozen=True)
class Failure:
    trouble: Trouble
    detail: str = ""
    retry_after_s: float | None = None  # what GitHub asked for (Retry-After, or until X-RateLimit-Reset)


@dataclass(frozen=True)
class Backoff:
    """Exponential backoff with jitter: the n-th wait (n from 0) is base * factor**n, capped, and then shortened
    by up to `jitter` of itself at random, so that many jobs (or replicas) woken together do not ask together."""

    base_s: float = 2.0
    factor: float = 2.0
    cap_s: float = 300.0
    jitter: float = 0.5

    def delay(self, n: int, rng: float) -> float:
        """`rng` in [0, 1): the random draw, handed in so that the decision stays a function of its inputs."""
        full = min(self.cap_s, self.base_s * self.factor ** max(0, n))
        return full * (1.0 - self.jitter * min(max(rng, 0.0), 1.0))


JOB_BACKOFF = Backoff(base_s=2.0, cap_s=600.0)
PROBE_BACKOFF = Backoff(base_s=1.0, cap_s=300.0)
MAX_RATE_WAIT_S = 3600.0  # a Retry-After or reset longer than this is not believed (a clock skew, a bad header)


@dataclass(frozen=True)
class Later:
    """Back in the queue, not to be claimed for `after_s`; `counts`: this failure uses up one of the attempts."""

    after_s: float
    counts: bool
    reason: str


@dataclass(frozen=True)
class Park:
    """Waits for GitHub to answer a probe, however long that takes; its attempts are not used up."""

    reason: str


@dataclass(frozen=True)
class GiveUp:
    reason: str


Next = Later | Park | GiveUp


class NotYet(Exception):  # noqa: N818 -- it is not an error: the job asks to be run later
    """Raised by a handler whose job is not due yet (a red run's grace period for re-runs to start, a re-run still
    in flight): the worker queues the job again, not claimed for `after_s`, without using one of its attempts."""

    def __init__(self, after_s: float, reason: str):
        super().__init__(reason)
        self.after_s, self.reason = max(0.0, after_s), reason


def after_failure(
    failure: Failure, failed_attempts: int, max_attempts: int, rng: float, backoff: Backoff = JOB_BACKOFF
) -> Next:
    """What a job does after `failure`; `failed_attempts` counts this one (1 after the first failure)."""
    if failure.trouble is Trouble.OUTAGE:
        return Park(f"GitHub unreachable: {failure.detail}" if failure.detail else "GitHub unreachable")
    if failure.trouble is Trouble.RATE_LIMITED:
        asked = min(max(failure.retry_after_s or 0.0, 0.0), MAX_RATE_WAIT_S)
        wait = max(asked, backoff.delay(0, rng))
        return Later(wait, counts=False, reason=f"rate limited by GitHub; waiting {wait:.0f}s: {failure.detail}")
    if failed_attempts >= max_attempts:
        return GiveUp(f"failed {failed_attempts} time(s): {failure.detail}")
    wait = backoff.delay(failed_attempts - 1, rng)
    return Later(wait, counts=True, reason=failure.detail)


@dataclass(frozen=True)
class ProbeSchedule:
    """When to ask GitHub again whether it answers: `failed` probes in a row so far, the next one at `due`
    (a clock reading, seconds)."""

    failed: int = 0
    due: float = 0.0

    def after_probe(self, answered: bool, now: float, rng: float, backoff: Backoff = PROBE_BACKOFF) -> ProbeSchedule:
        if answered:
            return ProbeSchedule(0, now + backoff.delay(0, rng))  # a job parked right after waits one beat
        return ProbeSchedule(self.failed + 1, now + backoff.delay(self.failed + 1, rng))

    def is_due(self, now: float) -> bool:
        return now >= self.due
