"""The git edge: every git command the culprit finder needs, through GitPython."""

from __future__ import annotations

import subprocess
import tempfile
from datetime import datetime
from pathlib import Path

import git

from bot.domain.errors import RepoError
from runners import git as runner_git
from runners.git import git_auth  # noqa: F401  (re-exported: the bot's pushes use the same header)


def sync_clone(url: str, target: Path, token: str | None) -> None:
    """A `--no-checkout` clone of url at target, or its branches fetched again (origin/*); RepoError names
    what git said, with the token removed."""
    try:
        runner_git.sync_clone(url, target, token)
    except runner_git.GitError as exc:
        raise RepoError(str(exc)) from None


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

    def count(self, good: str, bad: str, first_parent: bool) -> int:
        """Commits in good..bad (only the first-parent chain with `first_parent`)."""
        return int(self.repo.git.rev_list("--count", *(["--first-parent"] if first_parent else []), f"{good}..{bad}"))

    def committed_at(self, sha: str) -> datetime:
        return self.repo.commit(sha).committed_datetime

    def range_graph(self, good: str, bad: str) -> dict[str, tuple[str, ...]]:
        """sha -> parents for every commit in good..bad."""
        out = self.repo.git.rev_list("--parents", f"{good}..{bad}")
        graph = {}
        for line in out.splitlines():
            sha, *parents = line.split()
            graph[sha] = tuple(parents)
        return graph

    def first_parent_log(self, good: str, bad: str) -> list[list[str]]:
        """[sha, author, subject] of each first-parent commit of good..bad, oldest first."""
        out = self.repo.git.log("--first-parent", "--reverse", "--format=%H%x00%an%x00%s", f"{good}..{bad}")
        return [line.split("\x00", 2) for line in out.splitlines() if line]

    def parents(self, sha: str) -> list[str]:
        return [parent.hexsha for parent in self.repo.commit(sha).parents]

    def branches_at(self, sha: str) -> list[str]:
        """Local branches whose tip is `sha`."""
        return self.repo.git.branch("--points-at", sha, "--format=%(refname:short)").split()

    def subjects(self, shas: list[str]) -> dict[str, str]:
        if not shas:
            return {}
        out = self.repo.git.show("-s", "--format=%H %s", *shas)
        return dict(line.split(" ", 1) if " " in line else (line, "") for line in out.splitlines())

    def file_changes(self, good: str, bad: str, paths: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Each commit of good..bad that changes a file (of `paths`, when given): file -> its diff's hunks, with hunk
        headers naming the enclosing Python `def`/`class` (git's python driver, as GitHub shows them)."""
        with tempfile.NamedTemporaryFile("w", suffix=".gitattributes") as attributes:
            attributes.write("*.py diff=python\n")
            attributes.flush()
            out = self.repo.git.execute(
                [
                    "git",
                    "-c",
                    f"core.attributesFile={attributes.name}",
                    "log",
                    "--patch",
                    *self._PATCH_OPTS,
                    "--format=commit %H",
                    f"{good}..{bad}",
                    "--",
                    *(paths or []),
                ],
                stdout_as_string=True,
            )
        changes: dict[str, dict[str, str]] = {}
        sha, name, lines = None, None, []  # type: ignore[var-annotated]

        def flush() -> None:
            if sha and name is not None:
                changes.setdefault(sha, {})[name] = "\n".join(lines)

        for line in str(out).splitlines():
            if line.startswith("commit ") and len(line) == 47:
                flush()
                sha, name, lines = line[7:], None, []
            elif line.startswith("diff --git "):
                flush()
                name, lines = line.split(" b/", 1)[-1], []
            elif name is not None and (lines or line.startswith("@@")):
                lines.append(line)
        flush()
        return changes

    # -- re-lands --

    # Options shared by both sides of a patch-id comparison, so user configuration (external diff
    # drivers, colour, rename detection, diff.noprefix) cannot make the same change hash differently.
    _PATCH_OPTS = ("--no-color", "--no-ext-diff", "--no-renames", "--src-prefix=a/", "--dst-prefix=b/")
    _PATCH_LOG = ("log", "--patch", "--first-parent", *_PATCH_OPTS, "--format=commit %H")

    def patch_ids(self, *log_args: str, command: tuple[str, ...] = _PATCH_LOG) -> dict[str, str]:
        """`git log -p ... | git patch-id --stable`: commit -> patch-id (commits with an empty diff have none).
        `command` replaces `git log -p`, e.g. a `git diff` (whose one patch-id is keyed by forty zeros)."""
        log_cmd = ["git", "-C", str(self.path), *command, *log_args]
        patch_id = ["git", "-C", str(self.path), "patch-id", "--stable"]
        with subprocess.Popen(log_cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as log:
            ids = subprocess.run(patch_id, stdin=log.stdout, capture_output=True, text=True, check=False)
            log.stdout.close()
            err = log.stderr.read().decode("utf-8", "replace").strip()
            log.wait()
        if log.returncode != 0:
            raise RepoError(
                f"git {command[0]} {' '.join(log_args)} failed in {self.path}: "
                f"{err.splitlines()[-1] if err else 'git failed'}"
            )
        if ids.returncode != 0:
            raise RepoError(f"git patch-id failed in {self.path}: {ids.stderr.strip() or 'git failed'}")
        out = {}
        for line in ids.stdout.splitlines():
            pid, _, commit = line.partition(" ")
            out[commit] = pid
        return out

    def inverse_patch_id(self, sha: str) -> str | None:
        """The patch-id of what a clean revert of `sha` commits (`git diff sha sha^1`: a merge against its first
        parent); None for a root commit or an empty change."""
        if not self.repo.commit(sha).parents:
            return None
        return next(iter(self.patch_ids(sha, f"{sha}^1", command=("diff", *self._PATCH_OPTS)).values()), None)

    def relanded(self, culprit: str, since: str, branch_ref: str) -> bool:
        """Whether the culprit's change landed again, unchanged, on branch_ref after `since` (where its revert was
        made): a first-parent commit in since..branch_ref with the same `git patch-id --stable` as the culprit.

        A merge commit is compared by its diff against its first parent (the whole PR it brings in). A culprit
        with an empty diff has no patch-id and is never re-landed; the culprit is not its own re-land.
        """
        culprit = self.resolve(culprit, "culprit")
        since = self.resolve(since, "revert base")
        branch_ref = self.resolve(branch_ref, "branch")
        wanted = self.patch_ids("-1", culprit).get(culprit)
        if wanted is None:
            return False
        return any(
            pid == wanted and commit != culprit for commit, pid in self.patch_ids(f"{since}..{branch_ref}").items()
        )

    # -- worktrees --

    def add_worktree(self, path: Path) -> None:
        """A detached worktree at path, reusing one registered by an earlier run (see runners.git)."""
        runner_git.add_worktree(self.path, path)

    @staticmethod
    def checkout(worktree: Path, sha: str) -> None:
        """Put worktree at sha, dropping edits and untracked files (ignored build caches stay)."""
        runner_git.checkout(worktree, sha)
