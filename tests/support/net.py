"""Ports on loopback for the tests' servers."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import uvicorn


def free_port() -> int:
    """A port nothing listens on now, for a server in another process that can only be given a number.
    Between this release and that server's bind another process may take it: a server in this process
    binds port 0 instead (`serving`)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def bound_socket(host: str = "127.0.0.1") -> socket.socket:
    """A listening-ready TCP socket on a port the kernel chose (port 0): nobody else can take it."""
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, 0))
    return sock


@dataclass
class Served:
    url: str
    server: uvicorn.Server
    thread: threading.Thread


@contextmanager
def serving(app, start_timeout: float = 20, **config) -> Iterator[Served]:
    """`app` served by uvicorn in a thread on a socket bound before it starts (port 0, read back), so no
    other process can take the port in between; stopped on exit."""
    sock = bound_socket()
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", **config))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + start_timeout
    try:
        while not server.started:
            assert time.monotonic() < deadline and thread.is_alive(), "uvicorn did not start"
            time.sleep(0.02)
        yield Served(f"http://127.0.0.1:{port}", server, thread)
    finally:
        server.should_exit = True
        thread.join(timeout=10)
        sock.close()
