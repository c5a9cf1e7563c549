"""Patience with GitHub, decided without I/O: backoff with jitter, Retry-After, parking on an outage, the probe's
schedule, the breaker that stops asking while GitHub does not answer (a fake clock throughout)."""

import pytest
import requests
from github import GithubException, RateLimitExceededException

from bot.adapters.github.failures import classify
from bot.domain.patience import (
    MAX_RATE_WAIT_S,
    Backoff,
    Failure,
    GiveUp,
    Later,
    Park,
    ProbeSchedule,
    Trouble,
    after_failure,
)
from bot.observability.reachability import Reachability

BACKOFF = Backoff(base_s=2.0, factor=2.0, cap_s=60.0, jitter=0.5)


def test_backoff_doubles_up_to_its_cap_and_jitter_only_shortens_it_by_half_at_most():
    assert [BACKOFF.delay(n, 0.0) for n in range(7)] == [2, 4, 8, 16, 32, 60, 60]
    assert BACKOFF.delay(3, 0.999999) == pytest.approx(8.0, rel=1e-4)  # the largest draw: half the wait
    assert BACKOFF.delay(3, 0.5) == 12.0
    draws = {BACKOFF.delay(4, r / 10) for r in range(10)}
    assert len(draws) == 10 and all(16 / 2 < d <= 32 for d in draws)  # spread, so jobs woken together do not collide


def test_an_error_is_tried_again_later_each_time_longer_then_given_up():
    err = Failure(Trouble.ERROR, "KeyError: 'x'")
    waits = [after_failure(err, n, 5, 0.0, BACKOFF) for n in range(1, 5)]
    assert all(isinstance(w, Later) and w.counts for w in waits)
    assert [w.after_s for w in waits] == [2, 4, 8, 16]
    assert after_failure(err, 5, 5, 0.0, BACKOFF) == GiveUp("failed 5 time(s): KeyError: 'x'")


def test_an_outage_parks_the_job_whatever_its_attempts():
    for n in (1, 5, 50):
        decided = after_failure(Failure(Trouble.OUTAGE, "ConnectionError: refused"), n, 5, 0.3, BACKOFF)
        assert decided == Park("GitHub unreachable: ConnectionError: refused")


def test_a_rate_limit_waits_what_github_asked_never_less_than_the_backoff_and_uses_no_attempt():
    asked = after_failure(Failure(Trouble.RATE_LIMITED, "403", retry_after_s=37), 5, 5, 0.0, BACKOFF)
    assert isinstance(asked, Later) and asked.after_s == 37 and not asked.counts  # the 5th failure: not given up
    assert after_failure(Failure(Trouble.RATE_LIMITED, "", 0), 1, 5, 0.0, BACKOFF).after_s == 2  # Retry-After: 0
    assert after_failure(Failure(Trouble.RATE_LIMITED, "", None), 1, 5, 0.0, BACKOFF).after_s == 2
    absurd = after_failure(Failure(Trouble.RATE_LIMITED, "", 10 * 86400), 1, 5, 0.0, BACKOFF)
    assert absurd.after_s == MAX_RATE_WAIT_S


def test_the_probe_schedule_backs_off_while_github_does_not_answer_and_starts_over_when_it_does():
    schedule, now, dues = ProbeSchedule(), 100.0, []
    assert schedule.is_due(now)
    for _ in range(8):
        schedule = schedule.after_probe(False, now, 0.0, BACKOFF)
        dues.append(schedule.due - now)
        assert not schedule.is_due(now) and schedule.is_due(schedule.due)
        now = schedule.due
    assert dues == [4, 8, 16, 32, 60, 60, 60, 60]
    schedule = schedule.after_probe(True, now, 0.0, BACKOFF)
    assert schedule.failed == 0 and schedule.due == now + 2


class Clock:
    def __init__(self):
        self.t = 1000.0

    def __call__(self):
        return self.t


def reach(clock):
    return Reachability(threshold=3, backoff=BACKOFF, clock=clock, wall=clock, rng=lambda: 0.0)


def test_the_breaker_opens_after_unanswered_requests_in_a_row_and_lets_one_trial_through_on_schedule():
    clock = Clock()
    r = reach(clock)
    r.unanswered()
    r.unanswered()
    r.answered()  # an answer between failures: nothing is wrong with GitHub
    r.unanswered()
    r.unanswered()
    assert r.up and r.ticket() == "go"
    r.unanswered()
    assert not r.up and r.seen().down_since == clock.t and r.seen().outages == 1
    # down: nothing goes out until the first trial is due (2 s), then exactly one at a time
    assert [r.ticket() for _ in range(3)] == [None, None, None]
    clock.t += 2
    assert r.ticket() == "trial" and r.ticket() is None  # the trial is in flight: the others still wait
    r.report("trial", answered=False)
    assert not r.up and r.next_trial_in() == 4  # backed off
    clock.t += 4
    assert r.ticket() == "trial"
    r.report("trial", answered=True)
    assert r.up and r.ticket() == "go" and r.seen().down_since is None
    assert r.seen().short_circuited == 4  # the three before the first trial, the one during it


def test_a_parked_job_marks_github_down_and_an_answer_after_it_is_what_resumes_it():
    clock = Clock()
    r = reach(clock)
    r.answered()
    parked_at = clock.t
    r.mark_down()
    assert not r.up and not r.answered_since(parked_at)
    clock.t += 1
    assert not r.claim_trial()  # not due yet
    clock.t += 1
    assert r.claim_trial()
    r.trial_done(True, probe=True)
    assert r.up and r.answered_since(parked_at) and r.seen().probes == {True: 1, False: 0}


def _gh(status, headers=None, message="boom", cls=GithubException):
    return cls(status, {"message": message}, headers or {})


@pytest.mark.parametrize(
    ("exc", "trouble", "wait"),
    [
        (requests.ConnectionError("Connection refused"), Trouble.OUTAGE, None),
        (requests.ReadTimeout("read timed out"), Trouble.OUTAGE, None),
        (_gh(502), Trouble.OUTAGE, None),
        (_gh(503), Trouble.OUTAGE, None),
        (_gh(403, {"Retry-After": "30"}, "You have exceeded a secondary rate limit."), Trouble.RATE_LIMITED, 30),
        (_gh(429, {"retry-after": "7"}), Trouble.RATE_LIMITED, 7),
        (_gh(403, {}, "You have exceeded a secondary rate limit."), Trouble.RATE_LIMITED, 60),  # "at least a minute"
        (
            _gh(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1900"}, "API rate limit exceeded"),
            Trouble.RATE_LIMITED,
            900,
        ),
        (
            _gh(403, {"x-ratelimit-remaining": "0", "x-ratelimit-reset": "1300"}, cls=RateLimitExceededException),
            Trouble.RATE_LIMITED,
            300,
        ),
        (_gh(403, {}, "Resource not accessible by integration"), Trouble.ERROR, None),
        (_gh(404), Trouble.ERROR, None),
        (_gh(422, {}, "Validation Failed"), Trouble.ERROR, None),
        (KeyError("number"), Trouble.ERROR, None),
        (
            RuntimeError(
                "git fetch failed: fatal: unable to access 'http://127.0.0.1:9/o/r.git/': Failed to connect to "
                "127.0.0.1 port 9 after 0 ms: Couldn't connect to server"
            ),
            Trouble.OUTAGE,
            None,
        ),
        (RuntimeError("fatal: The requested URL returned error: 503"), Trouble.OUTAGE, None),
        (RuntimeError("fatal: The requested URL returned error: 403"), Trouble.ERROR, None),
    ],
)
def test_failures_are_read_as_github_says(exc, trouble, wait):
    failure = classify(exc, now=lambda: 1000.0)
    assert failure.trouble is trouble and failure.retry_after_s == wait


def test_the_cause_of_a_wrapped_failure_decides():
    try:
        try:
            raise requests.ConnectionError("Connection refused")
        except requests.ConnectionError as inner:
            raise ValueError("cannot read the run") from inner
    except ValueError as outer:
        assert classify(outer).trouble is Trouble.OUTAGE


def test_the_transport_tries_a_refused_connection_three_times_not_eleven():
    """Waiting for GitHub is the worker's job (parked, probed with backoff): PyGithub's transport gives up soon."""
    import urllib3.exceptions

    from bot.adapters.github.forge import retry_policy

    for patient in (True, False):
        retry, sent = retry_policy(patient=patient), 1
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            while True:
                refused = urllib3.exceptions.NewConnectionError(None, "[Errno 111] Connection refused")
                retry = retry.increment(method="GET", url="/repos/o/r", error=refused)
                sent += 1
        assert sent == 3
        retry, sent = retry_policy(patient=patient), 1
        with pytest.raises(urllib3.exceptions.MaxRetryError):
            while True:
                retry = retry.increment(
                    method="GET",
                    url="/repos/o/r",
                    error=urllib3.exceptions.ReadTimeoutError(None, "/", "read timed out"),
                )
                sent += 1
        assert sent == 4
