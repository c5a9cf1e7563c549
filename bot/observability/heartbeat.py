"""A thread's heartbeat, for its supervisor: the worker loop sets one for its thread (`beating`), and code that
waits long inside a job (a bisection waiting for its steps) says it is still making progress with `beat()`."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_beat: ContextVar[Callable[[], None] | None] = ContextVar("revert_bisect_heartbeat", default=None)


@contextmanager
def beating(beat: Callable[[], None]) -> Iterator[None]:
    """`beat` is what `beat()` calls inside the block (in this thread or context)."""
    token = _beat.set(beat)
    try:
        yield
    finally:
        _beat.reset(token)


def beat() -> None:
    """Still alive and making progress; nothing when no supervisor listens."""
    if (f := _beat.get()) is not None:
        f()
