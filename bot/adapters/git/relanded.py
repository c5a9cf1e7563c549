"""Whether a reverted culprit was re-landed unchanged (bot.ports.RelandedReader), answered from the bot's clones.

The clone of `owner/repo` is where bot.service.workspace keeps it: <workspace>/<owner>__<repo>. Since = the head
the revert was made on (bot.domain.trust.revert_bases), ref = the clone's default branch.
"""

from __future__ import annotations

import re
from pathlib import Path

from git import GitCommandError

from bot.adapters.git.repo import GitRepo
from bot.adapters.git.reverts import reverts_of_range
from bot.domain.errors import RepoError
from bot.ports import BranchRevert, Relanded

SLUG = re.compile(r"^[A-Za-z0-9_.-]+/[A-Za-z0-9_.-]+$")


def clone_of(workspace: Path, repo: str) -> Path | None:
    """The bot's clone of `owner/repo`, if there is one."""
    if not SLUG.match(repo) or any(part in (".", "..") for part in repo.split("/")):
        return None
    path = workspace / repo.replace("/", "__")
    return path if (path / ".git").is_dir() else None


class RelandedInClones:
    """A RelandedReader over the clones under `workspace`. Answers are kept across calls, keyed by the branch's
    sha: git runs again only once the branch moved. None when there is no clone or git cannot tell."""

    def __init__(self, workspace: Path):
        self.workspace = workspace
        self.known: dict[tuple, bool] = {}
        self.found: dict[tuple, list[BranchRevert]] = {}  # a range's reverts, keyed by the branch's sha

    def __call__(self, bases: dict[tuple[str, str], str]) -> Relanded:
        branches: dict[str, tuple[GitRepo, str] | None] = {}

        def branch_of(repo: str) -> tuple[GitRepo, str] | None:
            if repo not in branches:
                path = clone_of(self.workspace, repo)
                try:
                    clone = GitRepo(path) if path else None
                    branches[repo] = (clone, clone.resolve(clone.default_branch())) if clone else None
                except RepoError:
                    branches[repo] = None
            return branches[repo]

        def relanded(repo: str, culprit: str) -> bool | None:
            since = bases.get((repo, culprit))
            found = branch_of(repo) if since is not None else None
            if found is None:
                return None
            clone, head = found
            key = (str(clone.path), culprit, since, head)
            if key not in self.known:
                try:
                    self.known[key] = clone.relanded(culprit, since, head)
                except (RepoError, OSError):  # the culprit or the head is not in the clone (yet): ask again later
                    return None
            return self.known[key]

        return relanded

    def reverts(self, ranges: dict[str, list[tuple[str, str]]]) -> dict[str, list[BranchRevert]] | None:
        """repository -> the reverts on its clone's default branch of commits of its ranges (each revert once);
        a repository without a clone, or whose range is not in it yet, is left out. None when no clone was read."""
        out: dict[str, list[BranchRevert]] = {}
        for repo, pairs in ranges.items():
            path = clone_of(self.workspace, repo)
            if path is None:
                continue
            try:
                clone = GitRepo(path)
                head = clone.resolve(clone.default_branch())
                seen: dict[str, BranchRevert] = {}
                for good, bad in pairs:
                    key = (str(path), "reverts", good, bad, head)
                    if key not in self.found:
                        self.found[key] = reverts_of_range(clone, good, bad, head)
                    for r in self.found[key]:
                        seen.setdefault(r.sha, r)
            except (RepoError, OSError, GitCommandError):  # a range not fetched into the clone yet: unknown
                continue
            out[repo] = list(seen.values())
        return out if out or not ranges else None
