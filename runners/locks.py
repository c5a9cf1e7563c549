"""Exclusive file locks whose lock file can be deleted by the holder, so none is left behind.

Deleting a lock file races with a process that opened it just before: that process would then lock a
file no longer on disk while a third one creates and locks a new one. `take` closes the gap by checking,
once it holds the lock, that the file it locked is still the one at the path, and starting over if not.
"""

from __future__ import annotations

import fcntl
import os
from pathlib import Path
from typing import IO


def take(path: Path, wait: bool = True) -> IO | None:
    """An exclusive lock on `path` (created if missing); None if `wait` is false and another process holds it."""
    while True:
        lock = open(path, "a")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if wait else fcntl.LOCK_NB))
        except BlockingIOError:
            lock.close()
            return None
        try:
            held = os.fstat(lock.fileno())
            current = os.stat(path)
            if (held.st_dev, held.st_ino) == (current.st_dev, current.st_ino):
                return lock
        except FileNotFoundError:
            pass  # its holder removed it as we waited: lock the one at the path now
        lock.close()


def release_and_remove(lock: IO, path: Path) -> None:
    """Delete the lock file, then release the lock (in that order, so `take` sees the deletion)."""
    path.unlink(missing_ok=True)
    lock.close()
