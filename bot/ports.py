"""What the service asks of the code host, and the plain values it gets back.

Only the methods `bot.service` calls are here, so a fake in a test (or another forge) implements a page, not
PyGithub; no PyGithub object crosses this line. `bot.adapters.github.forge.GitHubForge` is the implementation.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Protocol


@dataclass(frozen=True)
class PullRef:
    number: int
    url: str
    head: str
    created: bool


@dataclass(frozen=True)
class Skipped:
    """A reviewer GitHub would not request a review from (422: not a collaborator), with GitHub's reason."""

    login: str
    why: str


@dataclass(frozen=True)
class CulpritFacts:
    """What the forge knows of a culprit commit: its PR (GitHub's link, else the one its subject names), and the
    PR's title, author and labels (None and () when it has no PR) -- what the guards and the revert PR read."""

    pr: int | None
    title: str | None
    author: str | None
    labels: tuple[str, ...]


class Forge(Protocol):
    @property
    def site(self) -> str:
        """The repository's web page (https://github.com/o/r), for links in comments."""

    @property
    def slug(self) -> str:
        """owner/name."""

    def culprit_facts(self, sha: str, subject_pr: int | None) -> CulpritFacts: ...

    def kill_switch(self, label: str, allowed_roles: list[str], allowed_users: list[str]) -> int | None: ...

    def reverts_opened_since(self, since: datetime) -> int: ...

    def followup_for(self, culprit_pr: int) -> int | None: ...

    def open_revert_of(self, culprit_pr: int, ours: str | None = None) -> int | None: ...

    def comment_once(self, number: int, key: str, body: str) -> tuple[int, bool]: ...

    def ensure_issue(self, key: str, title: str, body: str) -> tuple[int, bool]: ...

    def react(self, number: int, comment_id: int, content: str) -> None: ...

    def open_pr(self, title: str, body: str, head: str, base: str, draft: bool = False) -> PullRef: ...

    def add_labels(self, number: int, labels: list[str]) -> None: ...

    def request_review(self, number: int, reviewers: list[str]) -> list[Skipped]:
        """The reviewers GitHub refused (skipped, not an error): publishing goes on without them."""

    def actions(self, workflow: str) -> Any:
        """The step workflow's runs (bot.adapters.dispatch.actions.Actions): the service only hands it to the
        dispatch backend, which declares what it calls."""
