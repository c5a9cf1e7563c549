"""The blob host GitHub's download redirects point at, as GitHub's do: another host, signed short-lived URLs.

`GET .../actions/artifacts/{id}/zip`, `.../actions/runs/{id}/logs` and `.../actions/jobs/{id}/logs` answer
302 with a `Location` on another host (Azure blob storage: `productionresultssa<N>.blob.core.windows.net`,
`pipelines.actions.githubusercontent.com`), signed, expiring after a minute (GitHub REST docs, "Download
workflow run logs": "The link expires after 1 minute."; REALITY.md, "GitHub: downloads"). That host is not
GitHub's API: a request carrying `Authorization` is refused (400) and an unknown or expired signature too
(403), each with an XML error body in Azure's shape.

The sandbox's routes put a blob here (`put`) and sign a URL for it (`sign`); a second small server (started by
sandbox.server with the API's) serves `app`. Its base URL names the machine by another host name than the API
(`localhost` for an API on `127.0.0.1`), so a client that follows the redirect with its GitHub credentials, or
only to GitHub's own host, fails here as it would against GitHub. `clock` (epoch seconds) is injectable: a test
expires a URL without sleeping. `outage(n)` answers the next n requests 503 (None: until `outage(0)`).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from email.utils import formatdate
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import Response
from starlette.types import Receive, Scope, Send

LINK_TTL_S = 60  # "The link expires after 1 minute."
PREFIX = "/actions-results/"
API_VERSION = "2025-01-05"


def other_host_name(host: str) -> str:
    """The same machine by another name, as GitHub's blob storage is another host than its API."""
    return {"127.0.0.1": "localhost", "localhost": "127.0.0.1", "::1": "localhost"}.get(host, host)


def _iso(epoch: float) -> str:
    return datetime.fromtimestamp(epoch, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _epoch(iso: str) -> float | None:
    try:
        return datetime.strptime(iso, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC).timestamp()
    except ValueError:
        return None


class BlobHost:
    def __init__(self, clock: Callable[[], float] = time.time, ttl_s: float = LINK_TTL_S) -> None:
        self.clock = clock
        self.ttl_s = ttl_s
        self.base_url: str | None = None  # set by sandbox.server once the blob server listens
        self.served: list[tuple[str, int, bool]] = []  # (path, status, carried Authorization), for tests
        self._blobs: dict[str, tuple[bytes, str]] = {}  # path -> (data, content type)
        self._key = secrets.token_bytes(32)
        self._failing: int | None = 0
        self._lock = threading.Lock()

    # -- the API side: store a blob, sign a URL for it --

    def put(self, name: str, data: bytes, content_type: str) -> str:
        """Store `data` under `name` (`<kind>/<id>/<file>`, replacing what was there); its path."""
        path = PREFIX + quote(name)
        with self._lock:
            self._blobs[path] = (data, content_type)
        return path

    def sign(self, path: str) -> str:
        """A URL for the blob at `path`, valid for `ttl_s` from now on `clock`, in a SAS token's shape."""
        if self.base_url is None:
            raise RuntimeError("the sandbox's blob host is not serving (sandbox.server starts it with the API)")
        start, expiry = _iso(self.clock() - 300), _iso(self.clock() + self.ttl_s)
        sig = self._sig(path, expiry)
        return f"{self.base_url}{path}?sv={API_VERSION}&spr=https&st={start}&se={expiry}&sr=b&sp=r&sig={sig}"

    def _sig(self, path: str, expiry: str) -> str:
        return hmac.new(self._key, f"r\n{expiry}\n{path}".encode(), hashlib.sha256).hexdigest()

    def outage(self, requests: int | None) -> None:
        """Answer the next `requests` requests 503 ServerBusy (None: every one until `outage(0)`)."""
        with self._lock:
            self._failing = requests

    # -- the blob host's side --

    def serve(self, host: str = "127.0.0.1") -> Callable[[], None]:
        """Serve this host on `host`, any free port, named by another host name for the same machine; a `stop()`."""
        import uvicorn

        config = uvicorn.Config(self, host=host, port=0, log_level="warning", access_log=False, lifespan="off")
        server = uvicorn.Server(config)
        thread = threading.Thread(target=server.run, name="github-sandbox-blobs", daemon=True)
        thread.start()
        deadline = time.monotonic() + 15
        while not server.started:
            if not thread.is_alive() or time.monotonic() > deadline:
                server.should_exit = True
                raise RuntimeError("the sandbox's blob host did not start")
            time.sleep(0.02)
        self.base_url = f"http://{other_host_name(host)}:{server.servers[0].sockets[0].getsockname()[1]}"

        def stop() -> None:
            server.should_exit = True
            thread.join(timeout=10)

        return stop

    def answer(self, method: str, path: str, query: dict[str, str], authorized: bool) -> Response:
        with self._lock:
            failing = self._failing
            if failing:
                self._failing = failing - 1
        if failing is None or failing > 0:
            return _error(503, "ServerBusy", "The server is currently unable to receive requests. Please retry.")
        if authorized:
            return _error(
                400,
                "InvalidAuthenticationInfo",
                "Authentication information is not given in the correct format. Check the value of Authorization "
                "header.",
            )
        if method not in ("GET", "HEAD"):
            return _error(400, "UnsupportedHttpVerb", "The resource doesn't support specified Http Verb.")
        expiry, sig = query.get("se", ""), query.get("sig", "")
        if not sig or not hmac.compare_digest(self._sig(path, expiry), sig):
            return _error(
                403,
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure the value of Authorization header is formed "
                "correctly including the signature.",
                "Signature did not match." if sig else "The signature is missing.",
            )
        ends = _epoch(expiry)
        now = self.clock()
        if ends is None or now > ends:
            return _error(
                403,
                "AuthenticationFailed",
                "Server failed to authenticate the request. Make sure the value of Authorization header is formed "
                "correctly including the signature.",
                f"Signed expiry time [{formatdate(ends or 0, usegmt=True)}] must be after the current time "
                f"[{formatdate(now, usegmt=True)}]",
            )
        with self._lock:
            found = self._blobs.get(path)
        if found is None:
            return _error(404, "BlobNotFound", "The specified blob does not exist.")
        data, content_type = found
        return Response(b"" if method == "HEAD" else data, 200, _headers(content_type, len(data)))

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """The blob host, an ASGI app: every path, every method."""
        if scope["type"] != "http":
            return
        request = Request(scope, receive)
        response = self.answer(
            request.method,
            request.url.path,
            dict(request.query_params),
            "authorization" in request.headers,
        )
        with self._lock:
            self.served.append((request.url.path, response.status_code, "authorization" in request.headers))
        await response(scope, receive, send)


def _headers(content_type: str, length: int | None = None) -> dict[str, str]:
    out = {
        "Content-Type": content_type,
        "x-ms-request-id": str(uuid.uuid4()),
        "x-ms-version": API_VERSION,
        "Date": formatdate(usegmt=True),
    }
    if length is not None:
        out["Content-Length"] = str(length)
    return out


def _error(status: int, code: str, message: str, detail: str | None = None) -> Response:
    """Azure Storage's error body: <Error><Code/><Message/> (and <AuthenticationErrorDetail/>)."""
    text = f"{message}\nRequestId:{uuid.uuid4()}\nTime:{datetime.now(UTC).isoformat(timespec='microseconds')}"
    extra = f"<AuthenticationErrorDetail>{detail}</AuthenticationErrorDetail>" if detail else ""
    body = f'\ufeff<?xml version="1.0" encoding="utf-8"?><Error><Code>{code}</Code><Message>{text}</Message>'
    body += f"{extra}</Error>"
    headers = _headers("application/xml")
    headers["x-ms-error-code"] = code
    return Response(body.encode(), status, headers)
