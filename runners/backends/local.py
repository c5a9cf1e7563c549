"""The local pool: N workers on this machine, each in a git worktree of its own."""

from __future__ import annotations

import fcntl
import os
import queue
import signal
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

from bot.gitrepo import GitRepo
from runners.backends.base import StepResult, StepSpec
from runners.metric import compile_metric_regex, metric_from_file, metric_from_output

LOG_TAIL_CHARS = 4000
STOP_GRACE_S = 10.0


def _now() -> datetime:
    return datetime.now(timezone.utc)


class LocalPool:
    """Worktrees live under `root` (one root per repository) and outlive the pool, so the next
    bisection of the same repository starts without creating them; each is held with an
    exclusive lock while in use, so two pools on one repository never share a worktree."""

    def __init__(self, repo: GitRepo, workers: int, root: Path):
        self.repo = repo
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        (root / "logs").mkdir(exist_ok=True)
        (root / "results").mkdir(exist_ok=True)
        self._trees: queue.Queue[Path] = queue.Queue()
        self._locks = []
        slot = 0
        while len(self._locks) < workers:
            tree = root / f"wt-{slot}"
            slot += 1
            lock = open(tree.with_name(tree.name + ".lock"), "w")
            try:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                lock.close()
                continue
            _kill_orphan(tree)
            repo.add_worktree(tree)
            self._locks.append(lock)
            self._trees.put(tree)
        self._workers = workers
        self._pool = ThreadPoolExecutor(max_workers=workers, thread_name_prefix="revert-bisect-step")
        self._done: queue.Queue[StepResult] = queue.Queue()
        self._lock = threading.Lock()
        self._running: dict[int, subprocess.Popen | None] = {}
        self._cancelled: set[int] = set()

    @property
    def free(self) -> int:
        with self._lock:
            return self._workers - len(self._running)

    def submit(self, spec: StepSpec) -> None:
        with self._lock:
            self._running[spec.step_id] = None
        self._pool.submit(self._run_guarded, spec)

    def wait(self, timeout: float | None) -> list[StepResult]:
        out = []
        try:
            out.append(self._done.get(timeout=timeout))
        except queue.Empty:
            return out
        while True:
            try:
                out.append(self._done.get_nowait())
            except queue.Empty:
                return out

    def cancel(self, step_ids: list[int]) -> None:
        with self._lock:
            self._cancelled.update(step_ids)
            procs = [self._running.get(i) for i in step_ids]
        for proc in procs:
            if proc is not None and proc.poll() is None:
                _kill_group(proc)

    def close(self) -> None:
        self.cancel(list(self._running))
        self._pool.shutdown(wait=True, cancel_futures=True)
        for lock in self._locks:
            lock.close()
        self._locks.clear()

    # -- one step, on a worker thread --

    def _run_guarded(self, spec: StepSpec) -> None:
        tree = self._trees.get()
        started, t0 = _now(), time.monotonic()
        try:
            result = self._run(spec, tree, started, t0)
        except Exception as exc:  # a broken runner is an infra failure of this step, not of the bisection
            result = StepResult(spec.step_id, spec.sha, None, None, f"runner error: {exc}", tree.name, time.monotonic() - t0, "", started, _now())
        finally:
            self._trees.put(tree)
        with self._lock:
            self._running.pop(spec.step_id, None)
            cancelled = spec.step_id in self._cancelled
        if not cancelled:
            self._done.put(result)

    def _run(self, spec: StepSpec, tree: Path, started: datetime, t0: float) -> StepResult:
        GitRepo.checkout(tree, spec.sha)
        result_file = self.root / "results" / f"{spec.step_id}-{tree.name}.json"
        log_file = self.root / "logs" / f"{spec.step_id}-{tree.name}.log"
        result_file.unlink(missing_ok=True)
        env = {
            **os.environ,
            **spec.env,
            "REVERT_BISECT_SHA": spec.sha,
            "REVERT_BISECT_WORKTREE": str(tree),
            "REVERT_BISECT_RESULT": str(result_file),
            "REVERT_BISECT_STEP_ID": str(spec.step_id),
        }
        infra = None
        with open(log_file, "wb") as log:
            try:
                proc = subprocess.Popen(spec.command, cwd=tree, env=env, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
            except OSError as exc:  # the command is missing at this commit: what a shell reports, 127
                log.write(f"revert-bisect: cannot run {spec.command[0]!r}: {exc.strerror}\n".encode())
                exit_code = 127
            else:
                _pidfile(tree).write_text(str(proc.pid))
                with self._lock:
                    if spec.step_id in self._running:
                        self._running[spec.step_id] = proc
                    if spec.step_id in self._cancelled:
                        _kill_group(proc)
                try:
                    exit_code = proc.wait(timeout=spec.timeout_s)
                except subprocess.TimeoutExpired:
                    _stop_group(proc)
                    exit_code, infra = None, f"timeout after {spec.timeout_s:g}s"
                _pidfile(tree).unlink(missing_ok=True)
        output = log_file.read_text(errors="replace")
        metric = metric_from_file(result_file)
        if metric is None and spec.metric_regex:
            metric = metric_from_output(output, compile_metric_regex(spec.metric_regex))
        if exit_code is not None and exit_code < 0 and infra is None:
            infra = f"killed by signal {-exit_code}"
        return StepResult(spec.step_id, spec.sha, exit_code, metric, infra, f"local/{tree.name}", time.monotonic() - t0, output[-LOG_TAIL_CHARS:], started, _now())


def _stop_group(proc: subprocess.Popen) -> None:
    """SIGTERM first, so a probe can stop the server it launched; SIGKILL after a grace period."""
    try:
        os.killpg(proc.pid, signal.SIGTERM)
        proc.wait(timeout=STOP_GRACE_S)
    except (ProcessLookupError, PermissionError):
        proc.wait()
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.wait()


def _kill_group(proc: subprocess.Popen) -> None:
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _pidfile(tree: Path) -> Path:
    return tree.with_name(tree.name + ".pid")


def _kill_orphan(tree: Path) -> None:
    """A test left running by a killed driver still owns this worktree: stop its process group."""
    pidfile = _pidfile(tree)
    try:
        pgid = int(pidfile.read_text())
    except (OSError, ValueError):
        return
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    pidfile.unlink(missing_ok=True)
