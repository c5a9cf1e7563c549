"""Run the sandbox with uvicorn: in a background thread (tests) or standalone (`python -m sandbox`).

With the API comes its blob host (sandbox/state/blobs.py): a second small server on a port of its own, named
by another host name, where the download redirects point, as GitHub's point at blob storage."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

import uvicorn

from .app import create_sandbox
from .state import SandboxState


def run_in_thread(state: SandboxState, port: int = 0, host: str = "127.0.0.1") -> tuple[str, Callable[[], None]]:
    """Start the sandbox on `host:port` (0: any free port) and its blob host; return its base URL and a `stop()`."""
    stop_blobs = state.blobs.serve(host)
    config = uvicorn.Config(
        create_sandbox(state), host=host, port=port, log_level="warning", access_log=False, lifespan="off"
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, name="github-sandbox", daemon=True)
    thread.start()
    deadline = time.monotonic() + 15
    while not server.started:
        if not thread.is_alive() or time.monotonic() > deadline:
            server.should_exit = True
            stop_blobs()
            raise RuntimeError("the GitHub sandbox did not start")
        time.sleep(0.02)
    bound = server.servers[0].sockets[0].getsockname()[1]

    def stop() -> None:
        server.should_exit = True
        thread.join(timeout=10)
        stop_blobs()

    return f"http://{host}:{bound}", stop
