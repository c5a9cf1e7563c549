"""Ports on loopback for the tests' servers."""

import socket


def free_port() -> int:
    """A port nothing listens on now: for a server in another process, which binds it by number."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
