"""bot.adapters.github.downloads against scripted answers: GitHub's redirect asked and not followed, the signed URL
fetched without credentials, a stale URL asked for again, a failing blob host given up after bounded tries -- and
the Actions backend turning that into an infra result, once, instead of polling for ever."""

from __future__ import annotations

import pytest
import requests
from github import GithubException

from bot.adapters.dispatch.actions import ArtifactUnreadable, GitHubActionsBackend, Limits
from bot.adapters.github.actions import RunState
from bot.adapters.github.downloads import BlobClient, DownloadError, DownloadLimits, Downloads
from bot.observability.github_api import STATS
from runners.spec import StepSpec

API = "https://api.github.com/repos/o/r/actions/artifacts/7/zip"
XML_403 = (
    b'\xef\xbb\xbf<?xml version="1.0" encoding="utf-8"?><Error><Code>AuthenticationFailed</Code><Message>Server '
    b"failed to authenticate the request.\nRequestId:1\nTime:2026</Message></Error>"
)


class Requester:
    """PyGithub's requester as downloads uses it: GET without following, answering 302 to a fresh URL each time."""

    def __init__(self, status: int = 302):
        self.asked: list[tuple[str, dict]] = []
        self.status = status

    def requestJson(self, verb, url, headers=None):  # noqa: N802 -- PyGithub's name
        self.asked.append((url, dict(headers or {})))
        if self.status != 302:
            return self.status, {}, '{"message": "Artifact has expired"}'
        return 302, {"location": f"https://blob.example.net/a/{len(self.asked)}?sig=s"}, ""

    createException = staticmethod(lambda status, headers, data: GithubException(status, data, headers))  # noqa: N815


class Answer:
    def __init__(self, status: int, body: bytes = b"", headers: dict | None = None):
        self.status_code, self.content, self.headers, self.reason = status, body, headers or {}, "Reason"

    def iter_content(self, size):
        yield from (self.content[i : i + size] for i in range(0, len(self.content), size))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


class Session:
    """A scripted blob host: each GET takes the next answer (an Answer or an exception to raise)."""

    def __init__(self, *answers):
        self.answers = list(answers)
        self.gets: list[tuple[str, dict]] = []

    def get(self, url, auth=None, stream=False, timeout=None):
        prepared = requests.Request("GET", url, headers={"Authorization": "token leaked"}).prepare()
        self.gets.append((url, dict(auth(prepared).headers), timeout))
        answer = self.answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer


def downloads(session, requester=None, **limits):
    client = BlobClient(DownloadLimits(**{"backoff_s": 0.0, **limits}), session)
    return Downloads(requester or Requester(), client, sleep=lambda s: None)


def test_the_redirect_is_asked_not_followed_and_its_location_fetched_without_credentials():
    STATS.reset()
    session, requester = Session(Answer(200, b"PK zip")), Requester()
    assert downloads(session, requester).fetch(API, "the artifact") == b"PK zip"
    assert [url for url, _ in requester.asked] == [API]
    [(url, headers, timeout)] = session.gets
    assert url == "https://blob.example.net/a/1?sig=s" and "Authorization" not in headers and timeout == (10.0, 60.0)
    assert STATS.downloads_snapshot() == {"2xx": 1}


def test_an_expired_url_asks_github_for_a_fresh_one():
    session, requester = Session(Answer(403, XML_403), Answer(200, b"data")), Requester()
    assert downloads(session, requester).fetch(API, "the artifact") == b"data"
    assert len(requester.asked) == 2  # a fresh URL for the second fetch
    assert [url for url, _, _ in session.gets] == [
        "https://blob.example.net/a/1?sig=s",
        "https://blob.example.net/a/2?sig=s",
    ]


def test_a_server_error_or_a_lost_connection_tries_the_same_url_again():
    session, requester = Session(Answer(503), requests.ConnectionError("reset"), Answer(200, b"ok")), Requester()
    assert downloads(session, requester).fetch(API, "the log") == b"ok"
    assert len(requester.asked) == 1 and len({url for url, _, _ in session.gets}) == 1


def test_a_blob_host_that_keeps_failing_is_given_up_after_bounded_tries_with_the_reason():
    slept = []
    session = Session(*[Answer(503, b"<Error><Code>ServerBusy</Code><Message>Busy</Message></Error>")] * 10)
    d = downloads(session, tries=3, backoff_s=1.0)
    d.sleep = slept.append
    with pytest.raises(DownloadError) as err:
        d.fetch(API, "the artifact revert-bisect-step-1 of run 9")
    assert len(session.gets) == 3 and slept == [1.0, 2.0]
    assert str(err.value) == (
        "cannot download the artifact revert-bisect-step-1 of run 9: 3 tries failed, the last: 503 ServerBusy: Busy"
    )


def test_a_refusal_no_retry_mends_and_an_oversized_download_fail_at_once():
    with pytest.raises(DownloadError, match="refused the download: 400 InvalidAuthenticationInfo"):
        body = b"<Error><Code>InvalidAuthenticationInfo</Code><Message>Check it.</Message></Error>"
        downloads(Session(Answer(400, body))).fetch(API, "x")
    with pytest.raises(DownloadError, match="over the limit of 8 bytes"):
        downloads(Session(Answer(200, b"123456789")), max_bytes=8).fetch(API, "x")
    with pytest.raises(DownloadError, match="is 100 bytes, over the limit"):
        downloads(Session(Answer(200, b"", {"Content-Length": "100"})), max_bytes=8).fetch(API, "x")


def test_github_refusing_the_download_is_said_at_once():
    with pytest.raises(DownloadError, match="cannot download the artifact: GitHub answered 410 Artifact has expired"):
        downloads(Session(), Requester(status=410)).fetch(API, "the artifact")


class UnreadableArtifacts:
    """The Actions port with one run that succeeded and an artifact that cannot be downloaded."""

    def __init__(self):
        self.reads = 0

    def dispatch(self, ref, inputs):
        return 101

    def state(self, run_id):
        return RunState(run_id, "completed", "success", f"https://gh/runs/{run_id}")

    def artifact_file(self, run_id, artifact, member):
        self.reads += 1
        raise ArtifactUnreadable("cannot download the artifact: 4 tries failed, the last: 503 ServerBusy")

    def cancel(self, run_id):
        return False


def test_an_artifact_that_cannot_be_downloaded_is_an_infra_result_with_the_reason_not_another_poll():
    fake = UnreadableArtifacts()
    inputs = lambda spec, correlation: {"correlation": correlation}  # noqa: E731
    b = GitHubActionsBackend(fake, "main", inputs, 2, ["self-hosted"], Limits(poll_s=0.0), lambda: 0.0)
    b.submit(StepSpec(1, "a" * 40, ("probe",)))
    [got] = b.wait(0)
    assert (got.exit_code, got.metric) == (None, None)
    assert got.infra_reason == (
        "run 101 concluded success; its artifact revert-bisect-step-1: cannot download the artifact: 4 tries failed, "
        "the last: 503 ServerBusy (https://gh/runs/101)"
    )
    assert b.wait(0) == [] and fake.reads == 1 and b.free == 2


class Broken(Answer):
    def iter_content(self, size):
        yield b"PK"
        raise requests.exceptions.ChunkedEncodingError("connection broken: IncompleteRead")


def test_a_download_broken_off_halfway_is_tried_again():
    session = Session(Broken(200, b""), Answer(200, b"PK whole"))
    assert downloads(session).fetch(API, "the artifact") == b"PK whole"
    assert len(session.gets) == 2
