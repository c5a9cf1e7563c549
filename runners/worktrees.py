"""Worktree slots: reused checkouts of one repository, each held with an exclusive lock while in use.

Slots outlive the process that made them, so the next step (or the next bisection) of the same
repository only changes the checkout instead of cloning; the lock keeps two processes on one
machine out of each other's worktree, and a slot whose last user was killed has its test's process
group stopped before it is handed out again.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from runners import locks
from runners.git import add_worktree, prune_worktrees
from runners.proc import kill_orphan


@dataclass
class Slot:
    tree: Path
    lock: IO

    @property
    def pidfile(self) -> Path:
        return self.tree.with_name(self.tree.name + ".pid")

    def release(self) -> None:
        self.lock.close()


def acquire(repo: Path, root: Path, limit: int = 64) -> Slot:
    """The first free slot under root (created when new); RuntimeError when `limit` are all busy."""
    root.mkdir(parents=True, exist_ok=True)
    for n in range(limit):
        tree = root / f"wt-{n}"
        lock = locks.take(_lockfile(tree), wait=False)
        if lock is None:
            continue
        slot = Slot(tree, lock)
        try:
            kill_orphan(slot.pidfile)
            add_worktree(repo, tree)
        except BaseException:
            slot.release()
            raise
        return slot
    raise RuntimeError(f"all {limit} worktree slots under {root} are in use")


def remove(repo: Path, tree: Path) -> bool:
    """Take the worktree out of the repository (`git worktree list`) and off the disk, with its lock and
    pid files; False, leaving it alone, while another process holds it."""
    lock = locks.take(_lockfile(tree), wait=False)
    if lock is None:
        return False
    pidfile = Slot(tree, lock).pidfile
    try:
        kill_orphan(pidfile)
        shutil.rmtree(tree, ignore_errors=True)
        prune_worktrees(repo)  # drops the registration of every worktree whose directory is gone
        pidfile.unlink(missing_ok=True)
    finally:
        locks.release_and_remove(lock, _lockfile(tree))
    return True


def _lockfile(tree: Path) -> Path:
    return tree.with_name(tree.name + ".lock")
