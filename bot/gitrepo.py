"""The git edge: every git command the culprit finder needs, through GitPython."""

from __future__ import annotations

import shutil
from pathlib import Path

import git

from bot.errors import RepoError


class GitRepo:
    def __init__(self, path: str | Path):
        try:
            self.repo = git.Repo(path, search_parent_directories=False)
        except git.NoSuchPathError as exc:
            raise RepoError(f"--repo {path}: no such directory") from exc
        except git.InvalidGitRepositoryError as exc:
            raise RepoError(f"--repo {path}: not a git repository (run it on a clone, or `git init` first)") from exc
        if self.repo.bare:
            raise RepoError(f"--repo {path}: a bare repository has no working tree to test in; clone it first")
        self.path = Path(self.repo.working_tree_dir).resolve()

    def resolve(self, rev: str, what: str = "revision") -> str:
        try:
            return self.repo.git.rev_parse("--verify", "--quiet", f"{rev}^{{commit}}")
        except git.GitCommandError as exc:
            raise RepoError(f"{what} {rev!r} is not a commit in {self.path} (fetch it, or check the spelling)") from exc

    def default_branch(self) -> str:
        """origin's default branch if the clone knows it, else the checked-out branch (or HEAD)."""
        try:
            return self.repo.git.symbolic_ref("--short", "refs/remotes/origin/HEAD")
        except git.GitCommandError:
            return "HEAD"

    def is_ancestor(self, older: str, newer: str) -> bool:
        return self.repo.is_ancestor(older, newer)

    def range_graph(self, good: str, bad: str) -> dict[str, tuple[str, ...]]:
        """sha -> parents for every commit in good..bad."""
        out = self.repo.git.rev_list("--parents", f"{good}..{bad}")
        graph = {}
        for line in out.splitlines():
            sha, *parents = line.split()
            graph[sha] = tuple(parents)
        return graph

    def subjects(self, shas: list[str]) -> dict[str, str]:
        if not shas:
            return {}
        out = self.repo.git.show("-s", "--format=%H %s", *shas)
        return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())

    # -- worktrees --

    def add_worktree(self, path: Path) -> None:
        """A detached worktree at path, reusing one registered by an earlier run.

        It is created without a checkout: the first step's checkout fills it, on the worker.
        """
        if (path / ".git").is_file() and self._registered(path):
            return
        if path.exists():
            shutil.rmtree(path)
        self.repo.git.worktree("prune")
        path.parent.mkdir(parents=True, exist_ok=True)
        self.repo.git.worktree("add", "--detach", "--no-checkout", "--force", str(path), "HEAD")

    def _registered(self, path: Path) -> bool:
        listed = self.repo.git.worktree("list", "--porcelain").splitlines()
        return f"worktree {path.resolve()}" in listed

    @staticmethod
    def checkout(worktree: Path, sha: str) -> None:
        """Put worktree at sha, dropping edits and untracked files (ignored build caches stay)."""
        wt = git.Git(worktree)
        wt.checkout("--detach", "--force", "--quiet", sha)
        wt.clean("-ffdq")

