"""Reverting a culprit on top of a branch, in a scratch worktree: the user's checkout is never touched."""

from __future__ import annotations

import re
import shutil
import tempfile
from pathlib import Path

import git

from bot.adapters.git.already import find_revert
from bot.adapters.git.repo import GitRepo
from bot.domain.errors import RevertBisectError
from bot.ports import Revert, RevertFound
from runners import git as runner_git

BRANCH_PART = re.compile(r"[^A-Za-z0-9._]+")
BOT_IDENTITY = {
    "GIT_AUTHOR_NAME": "revert-bisect",
    "GIT_AUTHOR_EMAIL": "revert-bisect@users.noreply.github.com",
    "GIT_COMMITTER_NAME": "revert-bisect",
    "GIT_COMMITTER_EMAIL": "revert-bisect@users.noreply.github.com",
}


class RevertConflict(RevertBisectError):
    """The revert does not apply cleanly; nothing was changed."""

    def __init__(self, culprit: str, onto: str, files: list[str]):
        self.files = files
        listed = ", ".join(files) or "(git named no file)"
        super().__init__(
            f"reverting {culprit[:12]} on {onto[:12]} conflicts in {listed}; nothing was changed. "
            "Later commits built on it: revert those too, or fix forward by hand"
        )


class AlreadyReverted(RevertBisectError):
    """The culprit is reverted on ONTO already (`found` says by what); nothing was changed."""

    def __init__(self, found: RevertFound):
        self.found = found
        self.by = found.sha
        super().__init__(str(found))


def revert_message(subject: str, culprit: str, reason: str | None) -> str:
    """git's own wording, then why."""
    body = f'Revert "{subject}"\n\nThis reverts commit {culprit}.\n'
    return body + (f"\n{reason.strip()}\n" if reason else "")


def default_branch_name(culprit: str) -> str:
    return f"revert-bisect/revert-{culprit[:12]}"


def safe_branch(name: str) -> str:
    """A branch name built only from safe parts (no `..`, no leading dash, no shell-special characters)."""
    parts = [BRANCH_PART.sub("-", p).strip(".-") for p in name.split("/")]
    cleaned = "/".join(p for p in parts if p and p != "..")
    if not cleaned:
        raise RevertBisectError(f"branch name {name!r} has no usable characters")
    return cleaned


def revert_into(tree: Path, culprit: str, onto: str) -> None:
    """runners.git.revert_into, the one recipe the bot and a runner share; RevertConflict on a conflict."""
    try:
        runner_git.revert_into(tree, culprit, onto)
    except runner_git.RevertConflictError as exc:
        raise RevertConflict(culprit, onto, exc.files) from exc


def create_revert(
    repo: GitRepo, culprit: str, onto: str, branch: str | None = None, reason: str | None = None
) -> Revert:
    """The revert commit of `culprit` on top of `onto`, on a new branch; nothing else changes.

    A merge is reverted against its first parent (mainline 1). On conflict the scratch worktree
    is thrown away and RevertConflict names the files.
    """
    culprit = repo.resolve(culprit, "culprit")
    ref, onto = onto, repo.resolve(onto, "--onto")
    if found := find_revert(repo, culprit, onto, ref):
        raise AlreadyReverted(found)
    branch = safe_branch(branch or default_branch_name(culprit))
    if repo.repo.git.branch("--list", branch):
        existing = repo.resolve(f"refs/heads/{branch}")
        commit = repo.repo.commit(existing)
        if [p.hexsha for p in commit.parents] == [onto] and f"This reverts commit {culprit}." in commit.message:
            return _describe(
                repo, culprit, onto, existing, branch, commit.message
            )  # made by an earlier, interrupted run
        raise RevertBisectError(
            f"branch {branch} already exists and is not this revert; pass another --branch or delete it"
        )
    subject = repo.subjects([culprit])[culprit]
    scratch = Path(tempfile.mkdtemp(prefix="revert-bisect-revert-"))
    tree = scratch / "tree"
    repo.repo.git.worktree("add", "--detach", "--quiet", str(tree), onto)
    try:
        wt = git.Git(tree)
        wt.update_environment(**BOT_IDENTITY)
        revert_into(tree, culprit, onto)
        if not wt.diff("--cached", "--name-only"):  # its changes are gone from ONTO already: never an empty commit
            raise AlreadyReverted(RevertFound(culprit, None, None, ref, "empty"))
        message = revert_message(subject, culprit, reason)
        wt.commit("--quiet", "--no-verify", "-m", message)
        sha = wt.rev_parse("HEAD")
        repo.repo.git.branch(branch, sha)
        return _describe(repo, culprit, onto, sha, branch, message)
    finally:
        try:
            repo.repo.git.worktree("remove", "--force", str(tree))
        except git.GitCommandError:
            repo.repo.git.worktree("prune")
        shutil.rmtree(scratch, ignore_errors=True)


def _describe(repo: GitRepo, culprit: str, onto: str, sha: str, branch: str, message: str) -> Revert:
    g = repo.repo.git
    return Revert(
        culprit,
        onto,
        sha,
        branch,
        message,
        files=g.diff("--name-only", onto, sha).split(),
        diffstat=g.diff("--stat", onto, sha),
        diff=g.diff(onto, sha),
    )


CONFIRMED_REASON = "The revert-bisect culprit finder confirmed this commit as the first bad one."


def reverter_for(repo: GitRepo, reason: str | None = CONFIRMED_REASON):
    """The driver's Reverter: (culprit, onto) -> (revert sha, None) or (None, why not)."""

    def revert(culprit: str, onto: str) -> tuple[str | None, str | None]:
        try:
            return create_revert(repo, culprit, onto, reason=reason).sha, None
        except (RevertConflict, AlreadyReverted) as exc:
            return None, str(exc)

    return revert
