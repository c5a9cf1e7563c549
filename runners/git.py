"""The git a runner needs: a clone kept fresh, worktrees, a checkout, the revert recipe -- plain `git`.

The bot's git adapter builds on these, so the bot and a runner make the same trees (HEAD + revert
above all) without the runner importing the bot.
"""

from __future__ import annotations

import base64
import shutil
import subprocess
from pathlib import Path


class GitError(RuntimeError):
    """A git command failed; the message names what git said (never a token)."""


class RevertConflictError(GitError):
    """The revert does not apply cleanly on `onto`; `files` are the conflicting paths."""

    def __init__(self, culprit: str, onto: str, files: list[str]):
        self.culprit, self.onto, self.files = culprit, onto, files
        super().__init__(
            f"reverting {culprit[:12]} on {onto[:12]} conflicts in {', '.join(files) or '(git named no file)'}"
        )


def git_auth(token: str | None) -> list[str]:
    """`git -c` options carrying a GitHub token for one command, as actions/checkout sends it (basic auth as
    x-access-token, which installation tokens and personal tokens both accept): never in .git/config."""
    if not token:
        return []
    basic = base64.b64encode(f"x-access-token:{token}".encode()).decode()
    return ["-c", f"http.extraHeader=Authorization: basic {basic}"]


def run(tree: Path, *args: str, auth: list[str] | None = None, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(
        ["git", *(auth or []), "-C", str(tree), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL
    )
    if check and proc.returncode != 0:
        raise GitError(f"git {args[0]} failed: {proc.stderr.strip()[-300:]}")
    return proc


def sync_clone(url: str, target: Path, token: str | None) -> None:
    """A `--no-checkout` clone of url at target, or, when it exists, its branches fetched again (origin/*)."""
    if (target / ".git").is_dir():
        verb, args = (
            "fetch",
            ["-C", str(target), "fetch", "--quiet", "--prune", url, "+refs/heads/*:refs/remotes/origin/*"],
        )
    else:
        target.parent.mkdir(parents=True, exist_ok=True)
        verb, args = "clone", ["clone", "--quiet", "--no-checkout", url, str(target)]
    result = subprocess.run(["git", *git_auth(token), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if result.returncode != 0:
        lines = (result.stderr.replace(token, "***") if token else result.stderr).strip().splitlines()
        raise GitError(f"cannot {verb} {url}: {lines[-1] if lines else 'git failed'}")


def has_commit(tree: Path, sha: str) -> bool:
    return run(tree, "cat-file", "-e", f"{sha}^{{commit}}", check=False).returncode == 0


def checkout(worktree: Path, sha: str) -> None:
    """Put worktree at sha, dropping edits and untracked files (ignored build caches stay)."""
    run(worktree, "checkout", "--detach", "--force", "--quiet", sha)
    run(worktree, "clean", "-ffdq")


def add_worktree(repo: Path, path: Path) -> None:
    """A detached worktree of repo at path, reusing one registered by an earlier run; created without a
    checkout (the first step's checkout fills it, on the worker)."""
    if (path / ".git").is_file() and f"worktree {path.resolve()}" in run(
        repo, "worktree", "list", "--porcelain"
    ).stdout.splitlines():
        return
    if path.exists():
        shutil.rmtree(path)
    prune_worktrees(repo)
    path.parent.mkdir(parents=True, exist_ok=True)
    run(repo, "worktree", "add", "--detach", "--no-checkout", "--force", str(path), "HEAD")


def prune_worktrees(repo: Path) -> None:
    """Drop the registration of every worktree of repo whose directory is gone."""
    run(repo, "worktree", "prune")


def revert_into(tree: Path, culprit: str, onto: str) -> None:
    """Apply the revert of `culprit` to the worktree (checked out at `onto`), uncommitted; a merge is reverted
    against its first parent. The one recipe both the bot (which then commits it) and a runner (which tests
    HEAD + revert without the bot's commit) use, so both get the same tree."""
    mainline = ["-m", "1"] if len(run(tree, "rev-list", "--parents", "-n", "1", culprit).stdout.split()) > 2 else []
    if run(tree, "revert", "--no-edit", "--no-commit", *mainline, culprit, check=False).returncode != 0:
        files = run(tree, "diff", "--name-only", "--diff-filter=U").stdout.split()
        raise RevertConflictError(culprit, onto, files)
