"""Git's smart HTTP protocol through `git http-backend` (CGI), one subprocess per request."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from fastapi import Request
from fastapi.responses import Response
from starlette.concurrency import run_in_threadpool


async def git_http_backend(
    request: Request, root: Path, path_info: str, user: str, extra_env: dict[str, str] | None = None
) -> Response:
    """`extra_env`: for receive-pack, what GitHub checks of this pusher (sandbox/workflow_push.py)."""
    body = await request.body()
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": os.environ.get("HOME", "/tmp"),
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_PROJECT_ROOT": str(root),
        "GIT_HTTP_EXPORT_ALL": "1",
        "GIT_HTTP_MAX_REQUEST_BUFFER": "100M",
        "PATH_INFO": path_info,
        "REQUEST_METHOD": request.method,
        "QUERY_STRING": request.url.query,
        "CONTENT_TYPE": request.headers.get("content-type", ""),
        "CONTENT_LENGTH": str(len(body)),
        "REMOTE_USER": user,
        "REMOTE_ADDR": request.client.host if request.client else "127.0.0.1",
        "SERVER_PROTOCOL": "HTTP/1.1",
        "GATEWAY_INTERFACE": "CGI/1.1",
        **(extra_env or {}),
    }
    if request.headers.get("content-encoding"):
        env["HTTP_CONTENT_ENCODING"] = request.headers["content-encoding"]
    if request.headers.get("git-protocol"):
        env["GIT_PROTOCOL"] = env["HTTP_GIT_PROTOCOL"] = request.headers["git-protocol"]
    proc = await run_in_threadpool(subprocess.run, ["git", "http-backend"], input=body, capture_output=True, env=env)
    out = proc.stdout
    split = out.find(b"\r\n\r\n")
    sep_len = 4
    if split < 0 or (out.find(b"\n\n") >= 0 and out.find(b"\n\n") < split):
        split, sep_len = out.find(b"\n\n"), 2
    if split < 0:
        return Response(proc.stderr or b"git http-backend failed\n", status_code=500, media_type="text/plain")
    status, headers = 200, {}
    for line in out[:split].decode("latin-1").splitlines():
        name, _, value = line.partition(":")
        if name.lower() == "status":
            status = int(value.strip().split()[0])
        elif name:
            headers[name.strip()] = value.strip()
    return Response(out[split + sep_len :], status_code=status, headers=headers)
