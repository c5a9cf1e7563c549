"""The local pool: N workers on this machine, each in a git worktree of its own."""

from __future__ import annotations

import hashlib
import queue
import subprocess
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime
from pathlib import Path

from platformdirs import user_cache_dir

from bot.adapters.git.repo import GitRepo
from runners.envs import EnvCache
from runners.proc import kill_group
from runners.spec import StepResult, StepSpec
from runners.step import run_in_tree
from runners.worktrees import Slot, acquire, remove


def worktree_root(repo: Path, base: Path | None = None) -> Path:
    """One cache of worktrees per repository, reused by every bisection of it, under `base` (default:
    the user cache directory); one directory per repository, so two never share step logs or slots."""
    tag = hashlib.sha1(str(repo).encode()).hexdigest()[:12]
    return (base or Path(user_cache_dir("revert-bisect", appauthor=False)) / "worktrees") / f"{repo.name}-{tag}"


def step_dir(root: Path, step_id: int, tree: str) -> Path:
    """Where a step run by the local pool keeps its files (test.log, probe.json), by its id and its worktree."""
    return root / "steps" / f"{step_id}-{tree}"


def step_log(root: Path, step_id: int, runner: str | None) -> Path | None:
    """The whole log of a step the local pool ran (its `runner` is `local/<worktree>`), if it is still there."""
    if not runner or not runner.startswith("local/"):
        return None
    path = step_dir(root, step_id, runner.removeprefix("local/")) / "test.log"
    return path if path.is_file() else None


def _now() -> datetime:
    return datetime.now(UTC)


class LocalPool:
    """Worktrees live under `root` (one root per repository) and outlive the pool, so a resumed or
    the next bisection of the same repository starts without creating them, until
    `remove_worktrees` (the CLI's, when a bisection ends: a user's clone keeps no stray worktrees);
    each is held with an exclusive lock while in use, so two pools on one repository never share one.
    Environments (for steps that ask for one) are kept under `root/envs`, keyed by pins."""

    name = "local"  # the steps' `backend` column

    def __init__(self, repo: GitRepo, workers: int, root: Path):
        self.repo = repo
        self.root = root
        root.mkdir(parents=True, exist_ok=True)
        self._slots: queue.Queue[Slot] = queue.Queue()
        self._held: list[Slot] = []
        for _ in range(workers):
            slot = acquire(repo.path, root, limit=workers + 64)
            self._held.append(slot)
            self._slots.put(slot)
        self._trees = [slot.tree for slot in self._held]
        self.envs = EnvCache(root / "envs")
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

    def waiting(self) -> dict[int, str]:
        return {}  # a step is only submitted when a worker is free

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        return False  # its process died with the driver (and is killed as an orphan)

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
                kill_group(proc.pid)

    def close(self) -> None:
        self.cancel(list(self._running))
        self._pool.shutdown(wait=True, cancel_futures=True)
        for slot in self._held:
            slot.release()
        self._held.clear()

    def log_of(self, step_id: int, runner: str | None) -> Path | None:
        """The whole log of a step this pool (or an earlier one on the same root) ran, if it is still there."""
        return step_log(self.root, step_id, runner)

    def remove_worktrees(self) -> None:
        """Close, and take this pool's worktrees out of the repository's `git worktree list` (its work is
        over: nothing to resume); one another pool took meanwhile is left to it. Environments and step
        logs under root stay."""
        self.close()
        for tree in self._trees:
            remove(self.repo.path, tree)

    # -- one step, on a worker thread --

    def _run_guarded(self, spec: StepSpec) -> None:
        slot = self._slots.get()
        started, t0 = _now(), time.monotonic()
        try:
            out = step_dir(self.root, spec.step_id, slot.tree.name)
            result = run_in_tree(
                spec,
                slot.tree,
                out,
                self.envs,
                f"local/{slot.tree.name}",
                slot.pidfile,
                lambda proc: self._started(spec.step_id, proc),
            )
        except Exception as exc:  # a broken runner is an infra failure of this step, not of the bisection
            result = StepResult(
                spec.step_id,
                spec.sha,
                None,
                None,
                f"runner error: {exc}",
                f"local/{slot.tree.name}",
                time.monotonic() - t0,
                "",
                started,
                _now(),
            )
        finally:
            self._slots.put(slot)
        with self._lock:
            self._running.pop(spec.step_id, None)
            cancelled = spec.step_id in self._cancelled
        if not cancelled:
            self._done.put(result)

    def _started(self, step_id: int, proc: subprocess.Popen) -> None:
        with self._lock:
            if step_id in self._running:
                self._running[step_id] = proc
            if step_id in self._cancelled:
                kill_group(proc.pid)
