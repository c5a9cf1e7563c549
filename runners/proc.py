"""Running a test command in a process group of its own: timeouts, cancellation, orphans."""

from __future__ import annotations

import os
import signal
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class Exit:
    code: int | None  # None: no exit status (timeout)
    infra: str | None  # why the run says nothing about the commit, if it does not


def run_logged(argv: list[str], cwd: Path, env: dict[str, str], timeout: float | None, log_path: Path,
               pidfile: Path | None = None, started: Callable[[subprocess.Popen], None] | None = None) -> Exit:
    """Run argv (never through a shell) with its output in log_path; a missing program exits 127 like a shell's."""
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=log, stderr=subprocess.STDOUT,
                                    stdin=subprocess.DEVNULL, start_new_session=True)
        except OSError as exc:
            log.write(f"revert-bisect: cannot run {argv[0]!r}: {exc.strerror}\n".encode())
            return Exit(127, None)
        if pidfile is not None:
            pidfile.write_text(str(proc.pid))
        if started is not None:
            started(proc)
        try:
            code = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            stop_group(proc)
            return Exit(None, f"timeout after {timeout:g}s")
        finally:
            if pidfile is not None:
                pidfile.unlink(missing_ok=True)
    if code < 0:
        return Exit(code, f"killed by signal {-code}")
    return Exit(code, None)


def stop_group(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> None:
    """SIGTERM first, so a probe can stop the server it launched; SIGKILL after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=grace)
    except (ProcessLookupError, PermissionError):
        proc.wait()
    except subprocess.TimeoutExpired:
        kill_group(proc.pid)
        proc.wait()


def kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def kill_orphan(pidfile: Path) -> None:
    """A test left running by a killed driver or runner still owns a worktree: stop its process group."""
    try:
        pgid = int(pidfile.read_text())
    except (OSError, ValueError):
        return
    kill_group(pgid)
    pidfile.unlink(missing_ok=True)
