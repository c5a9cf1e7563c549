"""Downloads as GitHub serves them: artifact zips, run-log zips and job logs.

GitHub answers `GET .../actions/artifacts/{id}/zip`, `.../runs/{id}/logs` and `.../jobs/{id}/logs` with a 302 to a
signed URL on another host (blob storage) that expires after a minute and refuses a request carrying
`Authorization`; PyGithub follows a redirect only to hosts on its allow-list and raises AssertionError for any
other (REALITY.md, "GitHub: downloads"; docs/github-contract.md, "Downloads"). So the redirect is asked of GitHub
through PyGithub's requester without following it (its credentials, retries, timeout and call counting), and the
`Location` is fetched by one plain HTTP client with no credentials, with timeouts, a size limit and bounded tries:
a 5xx or a lost connection is tried again, a 403/404 (expired or unknown signature) asks GitHub for a fresh URL.
A download that keeps failing raises DownloadError with the reason.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass
from urllib.parse import urlsplit
from xml.etree import ElementTree

import requests
from github import GithubException

from bot.domain.errors import RevertBisectError
from bot.observability.github_api import STATS

REDIRECTS = (301, 302, 303, 307, 308)


class DownloadError(RevertBisectError):
    """A download GitHub redirected to that could not be fetched (its reason, after bounded tries)."""


@dataclass(frozen=True)
class DownloadLimits:
    tries: int = 4  # fetches of the signed URL, a fresh URL counted as one
    connect_s: float = 10.0
    read_s: float = 60.0  # between bytes, not for the whole download
    max_bytes: int = 512 << 20
    backoff_s: float = 1.0  # before the n-th retry: backoff_s * 2**(n-1)


class _Fresh(Exception):
    """The signed URL is no good any more (expired, unknown): ask GitHub for another."""


class _Again(Exception):
    """A transient failure (5xx, 429, a lost connection): try the same URL again."""


def _no_credentials(request: requests.PreparedRequest) -> requests.PreparedRequest:
    """requests' auth hook: nothing from ~/.netrc or anywhere else reaches the blob host."""
    request.headers.pop("Authorization", None)
    return request


def _storage_error(response: requests.Response) -> str:
    """Blob storage's XML error as `<Code>: <Message's first line>`, else the status line."""
    text = response.content[:4096].decode("utf-8-sig", "replace").lstrip("\ufeff")
    try:
        root = ElementTree.fromstring(text)
        code, message = root.findtext("Code"), (root.findtext("Message") or "").splitlines()
        if code:
            return f"{response.status_code} {code}: {message[0] if message else ''}".strip(": ")
    except ElementTree.ParseError:
        pass
    return f"{response.status_code} {response.reason or ''}".strip()


class BlobClient:
    """The one plain HTTP client for signed download URLs: no credentials, timeouts, a size limit."""

    def __init__(self, limits: DownloadLimits = DownloadLimits(), session: requests.Session | None = None):
        self.limits = limits
        self.session = session or requests.Session()

    def get(self, url: str) -> bytes:
        """The body at `url`. _Fresh for a URL that is no good any more, _Again for a transient failure,
        DownloadError for what no retry mends (refused, too large)."""
        limits = self.limits
        try:
            response = self.session.get(
                url, auth=_no_credentials, stream=True, timeout=(limits.connect_s, limits.read_s)
            )
        except requests.RequestException as exc:  # refused, reset, timed out, a broken redirect
            STATS.record_download("error")
            raise _Again(f"no answer from {_host(url)}: {type(exc).__name__}") from exc
        with response:
            status = response.status_code
            if status >= 400:
                reason = _storage_error(response)
                STATS.record_download(f"{status // 100}xx")
                if status in (403, 404, 410):
                    raise _Fresh(reason)
                if status >= 500 or status == 429:
                    raise _Again(reason)
                raise DownloadError(f"{_host(url)} refused the download: {reason}")
            declared = response.headers.get("Content-Length")
            if declared and declared.isdigit() and int(declared) > limits.max_bytes:
                STATS.record_download("too_large")
                raise DownloadError(f"the download is {int(declared)} bytes, over the limit of {limits.max_bytes}")
            chunks, size = [], 0
            try:
                for chunk in response.iter_content(1 << 16):
                    size += len(chunk)
                    if size > limits.max_bytes:
                        STATS.record_download("too_large")
                        raise DownloadError(f"the download is over the limit of {limits.max_bytes} bytes")
                    chunks.append(chunk)
            except requests.RequestException as exc:  # a connection reset or a read timeout halfway, a broken chunk
                STATS.record_download("error")
                raise _Again(f"{_host(url)} broke off the download: {type(exc).__name__}") from exc
        STATS.record_download("2xx")
        return b"".join(chunks)


def _host(url: str) -> str:
    return urlsplit(url).netloc or url


def redirect_of(requester, url: str) -> str:
    """The `Location` GitHub answers `url` with, asked through PyGithub's requester without following it."""
    status, headers, body = requester.requestJson("GET", url, headers={"Accept": "application/vnd.github+json"})
    location = headers.get("location")
    if status in REDIRECTS and location:
        return location
    if status >= 400:
        raise requester.createException(status, headers, _json_or_text(body))
    raise DownloadError(f"GitHub answered {status} without a redirect for {url}")


def _json_or_text(body: str):
    try:
        return json.loads(body) if body else None
    except ValueError:
        return {"message": body[:200]}


class Downloads:
    """Fetch what a GitHub download URL redirects to, asking for a fresh redirect when the signed URL goes stale."""

    def __init__(
        self,
        requester,
        client: BlobClient | None = None,
        sleep: Callable[[float], None] = time.sleep,
    ):
        self.requester = requester
        self.client = client or BlobClient()
        self.sleep = sleep

    def fetch(self, api_url: str, what: str) -> bytes:
        limits = self.client.limits
        location: str | None = None
        reason = "not tried"
        for attempt in range(1, limits.tries + 1):
            if attempt > 1:
                self.sleep(limits.backoff_s * 2 ** (attempt - 2))
            try:
                if location is None:
                    location = redirect_of(self.requester, api_url)
                return self.client.get(location)
            except _Fresh as exc:
                location, reason = None, f"{exc} (a fresh URL asked of GitHub)"
            except _Again as exc:
                reason = str(exc)
            except GithubException as exc:
                message = exc.data.get("message") if isinstance(exc.data, dict) else None
                reason = f"GitHub answered {exc.status} {message or ''}".strip()
                if exc.status < 500:
                    raise DownloadError(f"cannot download {what}: {reason}") from exc
            except requests.RequestException as exc:  # asking GitHub for the redirect: no answer after its retries
                reason = f"GitHub did not answer: {type(exc).__name__}"
        raise DownloadError(f"cannot download {what}: {limits.tries} tries failed, the last: {reason}")
