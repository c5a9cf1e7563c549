"""Running a test command in a process group of its own: timeouts, cancellation, orphans."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

STOP_GRACE_S = 10.0


@dataclass(frozen=True)
class Exit:
    code: int | None  # None: no exit status (timeout)
    infra: str | None  # why the run says nothing about the commit, if it does not


def run_logged(
    argv: list[str],
    cwd: Path,
    env: dict[str, str],
    timeout: float | None,
    log_path: Path,
    pidfile: Path | None = None,
    started: Callable[[subprocess.Popen], None] | None = None,
) -> Exit:
    """Run argv (never through a shell) with its output in log_path; a missing program exits 127 like a shell's."""
    with open(log_path, "ab") as log:
        try:
            proc = subprocess.Popen(
                argv,
                cwd=cwd,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        except OSError as exc:
            log.write(f"revert-bisect: cannot run {argv[0]!r}: {exc.strerror}\n".encode())
            return Exit(127, None)
        if pidfile is not None:
            pidfile.write_text(str(proc.pid))
        if started is not None:
            started(proc)
        try:
            if not wait_unreaped(proc.pid, timeout):
                stop_group(proc)
                return Exit(None, f"timeout after {timeout:g}s")
            code = reap_group(proc)  # a server the test started in the background goes with it
        finally:
            if pidfile is not None:
                pidfile.unlink(missing_ok=True)
    if code < 0:
        return Exit(code, f"killed by signal {-code}")
    return Exit(code, None)


def stop_group(proc: subprocess.Popen, grace: float = STOP_GRACE_S) -> int:
    """SIGTERM the group first, so a probe can stop the server it launched; after `grace` seconds (or once the
    leader is gone), SIGKILL whatever is left of it; reap the leader."""
    if proc.returncode is not None:
        return proc.returncode
    kill_group(proc.pid, signal.SIGTERM)
    wait_unreaped(proc.pid, grace)
    return reap_group(proc)


def reap_group(proc: subprocess.Popen) -> int:
    """The leader has exited but is not reaped, so its pid -- the group's id -- cannot be reused yet: SIGKILL
    the rest of the group (background children), then reap the leader."""
    kill_group(proc.pid)
    return proc.wait()


def wait_unreaped(pid: int, timeout: float | None) -> bool:
    """Wait until the child `pid` has exited, leaving it unreaped; False when `timeout` ran out first."""
    if timeout is None:
        try:
            os.waitid(os.P_PID, pid, os.WEXITED | os.WNOWAIT)
        except ChildProcessError:
            pass
        return True
    deadline, delay = time.monotonic() + timeout, 0.001
    while not exited_unreaped(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(min(delay, max(0.0, deadline - time.monotonic())))
        delay = min(delay * 2, 0.05)
    return True


def exited_unreaped(pid: int) -> bool:
    try:
        return os.waitid(os.P_PID, pid, os.WEXITED | os.WNOHANG | os.WNOWAIT) is not None
    except ChildProcessError:
        return True


def kill_group(pgid: int, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(pgid, sig)
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
