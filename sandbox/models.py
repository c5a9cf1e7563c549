"""The sandbox's records (users, issues and pull requests, comments, reactions, repositories) and the
store protocol the lower layers (the renderer, the Actions engine) see `SandboxState` through -- so they
need not import sandbox/state.py, which owns an `Actions` engine."""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Protocol


def now_iso() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


@dataclass
class User:
    login: str
    id: int
    name: str | None = None
    email: str | None = None
    type: str = "User"


@dataclass
class Comment:
    id: int
    issue_number: int
    user: str
    body: str
    created_at: str
    updated_at: str


@dataclass
class Reaction:
    id: int
    user: str
    content: str
    created_at: str


@dataclass
class Issue:
    """An issue or, with `pull` set, a pull request (GitHub: every PR is also an issue)."""

    number: int
    id: int
    title: str
    body: str | None
    user: str
    state: str = "open"
    labels: list[str] = field(default_factory=list)
    created_at: str = field(default_factory=now_iso)
    updated_at: str = field(default_factory=now_iso)
    closed_at: str | None = None
    pull: PullInfo | None = None


@dataclass
class PullInfo:
    head: str  # branch name in this repository
    base: str
    merged: bool = False
    merge_commit_sha: str | None = None
    merged_at: str | None = None
    head_sha: str | None = None  # fixed for merged PRs whose branch is gone; else read from git
    base_sha: str | None = None
    draft: bool = False
    requested_reviewers: list[str] = field(default_factory=list)
    id: int = 0
    files: list[dict] | None = None  # recorded changed files (filename, status, additions, deletions, patch) of a PR
    # whose branch is not in the repository (a recorded incident); None: its diff is read from git


@dataclass
class Repo:
    owner: str
    name: str
    id: int
    path: Path
    default_branch: str = "main"
    description: str | None = None
    private: bool = False
    created_at: str = field(default_factory=now_iso)
    permissions: dict[str, str] = field(default_factory=dict)  # login -> admin|maintain|write|triage|read
    issues: dict[int, Issue] = field(default_factory=dict)
    labels: dict[str, dict] = field(default_factory=dict)  # name -> {id, color, description}
    statuses: list[dict] = field(default_factory=list)
    check_runs: dict[int, dict] = field(default_factory=dict)

    @property
    def full_name(self) -> str:
        return f"{self.owner}/{self.name}"

    def next_number(self) -> int:
        return max(self.issues, default=0) + 1


class SandboxStore(Protocol):
    """What SandboxState offers the renderer and the Actions engine."""

    root: Path
    lock: threading.RLock
    users: dict[str, User]
    tokens: dict[str, str]

    def new_id(self) -> int: ...
    def repo(self, full_name: str) -> Repo | None: ...
    def add_user(
        self,
        login: str,
        *,
        name: str | None = None,
        email: str | None = None,
        token: str | None = None,
        type: str = "User",
    ) -> User: ...
    def set_permission(self, full_name: str, login: str, permission: str) -> None: ...
    def user_by_email(self, email: str) -> User | None: ...
    def issues_of(self, repo: Repo) -> list[Issue]: ...
    def comments_of(self, repo: Repo, number: int) -> list[Comment]: ...
    def ensure_label(self, repo: Repo, name: str) -> dict: ...
