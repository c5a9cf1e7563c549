"""Launching an inference server under test, waiting for it, and always stopping it.

The command is a template (`{port}`, `{host}` and `{python}` are substituted), split with shlex
and started without a shell, from the worktree under test, as the leader of a process group of
its own, with stdout and stderr going to a log file. `stop()` ends the whole group: SIGTERM,
a grace period, then SIGKILL, and reaps the leader. On Linux the leader also gets SIGKILL if the
probe dies without cleaning up (PR_SET_PDEATHSIG), so a probe killed by its runner does not
leave a server holding a port and a GPU.
"""

from __future__ import annotations

import http.client
import json
import os
import shlex
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

from runners.proc import stop_group

LOCALHOST = "127.0.0.1"


class InfraError(Exception):
    """The run says nothing about the commit: the server, the network or the protocol failed."""


class HttpError(InfraError):
    def __init__(self, message: str, status: int | None = None) -> None:
        super().__init__(message)
        self.status = status


def free_port(host: str = LOCALHOST) -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind((host, 0))
        return sock.getsockname()[1]


def render_command(template: str, *, port: int | None = None, host: str = LOCALHOST) -> list[str]:
    """shlex-split `template`, then substitute the placeholders in each argument (never a shell)."""
    try:
        argv = shlex.split(template)
    except ValueError as exc:
        raise ValueError(f"cannot parse command {template!r}: {exc}") from None
    if not argv:
        raise ValueError("empty command")
    python = (
        os.environ.get("REVERT_BISECT_PYTHON") or sys.executable
    )  # the commit's environment, when the step made one
    values = {"{python}": python, "{host}": host, "{port}": "" if port is None else str(port)}
    out = []
    for arg in argv:
        for key, value in values.items():
            arg = arg.replace(key, value)
        out.append(arg)
    return out


# -- HTTP, stdlib only, never through a proxy --

_OPENER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def http_request(method: str, url: str, body: Any = None, timeout: float = 60.0) -> tuple[int, bytes]:
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    try:
        with _OPENER.open(req, timeout=timeout) as resp:
            return resp.status, resp.read()
    except urllib.error.HTTPError as exc:
        try:
            detail = exc.read().decode(errors="replace").strip()
        except Exception:  # noqa: BLE001 - the body of an error is best effort
            detail = ""
        raise HttpError(
            f"{method} {_path(url)} returned HTTP {exc.code}: {detail[:500] or exc.reason}", exc.code
        ) from None
    except (
        urllib.error.URLError,
        http.client.HTTPException,
        OSError,
        ValueError,
    ) as exc:  # refused, reset, timeout, bad status line
        reason = getattr(exc, "reason", exc)
        raise HttpError(f"{method} {_path(url)} failed: {reason}") from None


def http_json(method: str, url: str, body: Any = None, timeout: float = 60.0) -> Any:
    _, raw = http_request(method, url, body, timeout)
    try:
        return json.loads(raw)
    except ValueError:
        raise InfraError(f"{method} {_path(url)} returned a body that is not JSON: {raw[:200]!r}") from None


def _path(url: str) -> str:
    return urllib.parse.urlsplit(url).path or "/"


# -- the server process --


def _pdeathsig():
    """A preexec_fn giving the child SIGKILL when the probe dies (Linux); None elsewhere."""
    if not sys.platform.startswith("linux"):
        return None
    try:
        import ctypes

        prctl = ctypes.CDLL(None, use_errno=True).prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(1, signal.SIGKILL, 0, 0, 0)  # PR_SET_PDEATHSIG
        if os.getppid() != parent:  # the probe died between fork and prctl
            os._exit(1)

    return preexec


class ServerProcess:
    """One launched server; use as a context manager so it is always stopped."""

    def __init__(
        self,
        template: str,
        cwd: Path,
        log_path: Path,
        host: str = LOCALHOST,
        port: int | None = None,
        env: dict[str, str] | None = None,
    ) -> None:
        self.host = host
        self.port = port or free_port(host)
        self.argv = render_command(template, port=self.port, host=host)
        self.cwd = Path(cwd)
        self.log_path = Path(log_path)
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
        self.proc: subprocess.Popen | None = None

    @property
    def base_url(self) -> str:
        return f"http://{self.host}:{self.port}"

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def start(self) -> ServerProcess:
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            log.write(f"$ {shlex.join(self.argv)}   (cwd {self.cwd})\n".encode())
            log.flush()
            try:
                self.proc = subprocess.Popen(
                    self.argv,
                    cwd=self.cwd,
                    env=self.env,
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,
                    preexec_fn=_pdeathsig(),
                )
            except OSError as exc:
                raise InfraError(f"cannot start server {self.argv[0]!r}: {exc.strerror or exc}") from None
        return self

    def exit_code(self) -> int | None:
        return None if self.proc is None else self.proc.poll()

    def describe_exit(self) -> str | None:
        """'exited with code N' / 'was killed by signal S' when the server is gone, else None."""
        code = self.exit_code()
        if code is None:
            return None
        if code < 0:
            try:
                name = signal.Signals(-code).name
            except ValueError:
                name = str(-code)
            return f"was killed by {name}"
        return f"exited with code {code}"

    def wait_healthy(self, timeout: float, health: tuple[str, ...] = ("/health", "/get_server_info")) -> dict | None:
        return wait_healthy(self.base_url, timeout, health, self.describe_exit)

    def stop(self, grace: float = 10.0) -> int | None:
        """SIGTERM the group, SIGKILL it after `grace` seconds, reap the leader. Idempotent."""
        proc = self.proc
        if proc is None:
            return None
        blocked = {signal.SIGTERM, signal.SIGINT, signal.SIGHUP}
        old = signal.pthread_sigmask(signal.SIG_BLOCK, blocked)  # finish cleaning up even if signalled again
        try:
            return stop_group(proc, grace)
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def log_tail(self, lines: int = 40) -> str:
        return tail(self.log_path, lines)

    def __enter__(self) -> ServerProcess:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


def wait_healthy(
    base_url: str,
    timeout: float,
    health: tuple[str, ...] = ("/health", "/get_server_info"),
    gone: Callable[[], str | None] = lambda: None,
) -> dict | None:
    """Poll the health endpoints in order (404: the next one) until one answers 200; the server info if any.
    `gone` says how a server we launched ended, if it did, so a crash is reported at once."""
    deadline = time.monotonic() + timeout
    delay = 0.1
    last = "no answer yet"
    while True:
        if ended := gone():
            raise InfraError(f"server {ended} before becoming healthy")
        for path in health:
            try:
                status, _ = http_request("GET", base_url + path, timeout=min(5.0, max(0.5, timeout)))
            except HttpError as exc:
                last = str(exc)
                if exc.status == 404:
                    continue  # try the next endpoint
                break
            if status == 200:
                return server_info(base_url)
        if time.monotonic() >= deadline:
            raise InfraError(f"server not healthy within --startup-timeout {timeout:g}s at {base_url} (last: {last})")
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 1.5, 1.0)


def server_info(base_url: str) -> dict | None:
    for path in ("/get_server_info", "/server_info"):
        try:
            info = http_json("GET", base_url + path, timeout=30)
        except InfraError:
            continue
        if isinstance(info, dict):
            return info
    return None


def tail(path: Path, lines: int = 40, max_bytes: int = 64_000) -> str:
    try:
        with open(path, "rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - max_bytes))
            data = fh.read().decode(errors="replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])
