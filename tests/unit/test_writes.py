"""When the bot sends a write again (bot.adapters.github.writes.Writes), decided without a network: only when
GitHub did nothing (429, a rate limit), or when the write is looked up first or idempotent on GitHub's side."""

from __future__ import annotations

import pytest
import requests
from github import GithubException, RateLimitExceededException

from bot.adapters.github.forge import retry_policy
from bot.adapters.github.writes import TRANSPORT_METHODS, Writes


class Script:
    """A write that fails with each of `failures` in turn, then answers `made`; and what was slept."""

    def __init__(self, *failures: Exception, made="made"):
        self.failures, self.made, self.sent, self.slept = list(failures), made, 0, []

    def __call__(self):
        self.sent += 1
        if self.failures:
            raise self.failures.pop(0)
        return self.made


def writes(script: Script, **kw) -> Writes:
    return Writes(pause=1.0, timeout=10.0, sleep=script.slept.append, **kw)


def test_the_transport_never_retries_a_post():
    assert "POST" not in TRANSPORT_METHODS and {"GET", "PUT", "DELETE", "PATCH"} <= TRANSPORT_METHODS
    assert "POST" not in retry_policy(patient=True).allowed_methods


def test_a_lost_answer_is_looked_up_before_it_is_sent_again():
    script = Script(requests.ConnectionError("Remote end closed connection without response"))
    found = []
    assert writes(script).make("commenting", script, lambda: found.append(1) or "it was made") == "it was made"
    assert script.sent == 1 and found == [1]  # found, not sent twice


def test_a_lost_answer_not_found_is_sent_again_after_the_lookup():
    script = Script(requests.ConnectionError("reset"), made="second")
    assert writes(script).make("commenting", script, lambda: None) == "second"
    assert script.sent == 2 and script.slept == [1.0]


def test_a_timeout_waits_for_a_request_still_in_flight_before_looking():
    script = Script(requests.ReadTimeout("read timed out"))
    writes(script).make("opening the PR", script, lambda: None)
    assert script.slept == [20.0]  # two client timeouts, not the 1 s backoff


def test_a_write_that_cannot_be_looked_up_is_not_sent_twice_after_a_lost_answer():
    for failure in (requests.ConnectionError("reset"), GithubException(502, {"message": "Server Error"}, {})):
        script = Script(failure)
        with pytest.raises(type(failure)):
            writes(script).make("dispatching", script)
        assert script.sent == 1


def test_an_idempotent_write_is_sent_again_as_it_is():
    script = Script(GithubException(503, {"message": "Service Unavailable"}, {}), made=None)
    writes(script).make("labelling", script, idempotent=True)
    assert script.sent == 2


def test_not_now_is_waited_out_as_github_says_and_sent_again():
    message = {"message": "You have exceeded a secondary rate limit."}
    limited = RateLimitExceededException(403, message, {"Retry-After": "7"})
    too_many = GithubException(429, {"message": "Too Many Requests"}, {})
    script = Script(limited, too_many)
    assert writes(script, secondary_wait=60.0).make("dispatching", script) == "made"  # no lookup needed: not done
    assert script.slept == [7.0, 60.0]  # Retry-After, then GitHub's "wait at least a minute"


def test_a_refusal_is_raised_at_once_and_attempts_are_bounded():
    refused = Script(GithubException(422, {"message": "Validation Failed"}, {}))
    with pytest.raises(GithubException):
        writes(refused).make("opening the PR", refused, lambda: None)
    assert refused.sent == 1 and refused.slept == []
    down = Script(*[requests.ConnectionError("refused")] * 9)
    with pytest.raises(requests.ConnectionError):
        writes(down, attempts=3).make("commenting", down, lambda: None)
    assert down.sent == 3 and down.slept == [1.0, 2.0]


def test_a_write_not_sent_because_github_is_down_is_given_up_at_once_for_the_job_to_park():
    """GitHubUnreachable (the breaker's: nothing went over the network) is not waited on in a worker thread: the job
    that made the write is parked and resumed when GitHub answers again (bot.ingress.worker)."""
    from bot.observability.reachability import GitHubUnreachable

    down = Script(GitHubUnreachable("GitHub did not answer the last requests; POST not sent"))
    with pytest.raises(GitHubUnreachable):
        writes(down).make("commenting", down, lambda: None)
    assert down.sent == 1 and down.slept == []
