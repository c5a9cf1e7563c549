"""Pushing the revert's branch with the installation's token, and GitHub's refusal of a push that touches a
workflow file without the `workflows` permission."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from bot.adapters.git.repo import git_auth
from bot.domain.errors import ForgeError, WorkflowPushRefused

# GitHub's refusal of a push that creates or changes a workflow file, for an App without the `workflows` permission
# ("a GitHub App ... without `workflows` permission") and a token without the `workflow` scope ("a Personal Access
# Token" / "an OAuth App" ... "without `workflow` scope").
WORKFLOW_REFUSAL = re.compile(r"refusing to allow an? (?P<who>[^\n]*?) to create or update workflow `(?P<path>[^`]+)`")


def workflow_refusal(stderr: str) -> tuple[str, str] | None:
    """GitHub's reason and the workflow file it names, from `git push`'s stderr: in the ref's `[remote rejected]
    (...)` as GitHub writes it, or on a `remote:` line."""
    found = WORKFLOW_REFUSAL.search(stderr)
    if found is None:
        return None
    return stderr[found.start() :].splitlines()[0].strip().removesuffix(")"), found["path"]


def push_branch(repo_dir: Path, remote_url: str, branch: str, sha: str, token: str) -> None:
    """Push `sha` to `branch` with the token in an HTTP header for this one command: never in .git/config."""
    result = subprocess.run(
        ["git", *git_auth(token), "-C", str(repo_dir), "push", "--quiet", remote_url, f"{sha}:refs/heads/{branch}"],
        capture_output=True,
        text=True,
    )
    if result.returncode != 0:
        stderr = result.stderr.replace(token, "***")
        if refused := workflow_refusal(stderr):
            raise WorkflowPushRefused(branch, *refused)
        message = stderr.strip().splitlines()
        raise ForgeError(f"push of {branch} to {remote_url} failed: {message[-1] if message else 'no message'}")
