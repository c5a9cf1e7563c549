"""The clone's operations the service runs (bot.ports.Clones): open and sync a clone, revert on it, look for a
revert already there, push a branch of it. bot.wiring hands GIT_CLONES to the service; the CLI uses it too."""

from __future__ import annotations

from pathlib import Path

from bot.adapters.git.already import find_revert
from bot.adapters.git.repo import GitRepo, sync_clone
from bot.adapters.git.revert import create_revert, reverter_for
from bot.adapters.github.push import push_branch
from bot.ports import Git, Revert, Reverter, RevertFound


def _own(repo: Git) -> GitRepo:
    if not isinstance(repo, GitRepo):
        raise TypeError(f"GitClones works on the clones its open() gives back, not on {type(repo).__name__}")
    return repo


class GitClones:
    """Each method takes the GitRepo objects its own open() gave back."""

    def open(self, path: str | Path) -> GitRepo:
        return GitRepo(path)

    def sync(self, url: str, target: Path, token: str | None) -> None:
        sync_clone(url, target, token)

    def reverter(self, repo: Git) -> Reverter:
        return reverter_for(_own(repo))

    def create_revert(self, repo: Git, culprit: str, onto: str) -> Revert:
        return create_revert(_own(repo), culprit, onto)

    def find_revert(self, repo: Git, culprit: str, onto: str, ref: str | None = None) -> RevertFound | None:
        return find_revert(_own(repo), culprit, onto, ref)

    def push(self, repo_dir: Path, remote_url: str, branch: str, sha: str, token: str) -> None:
        push_branch(repo_dir, remote_url, branch, sha, token)


GIT_CLONES = GitClones()
