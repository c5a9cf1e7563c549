"""What the service asks of the code host, the clone and the store, and the plain values it gets back.

Only the methods `bot.service` (and the edges over it, `bot.ingress` and `bot.web`) call are here, so a fake in a
test (or another forge, another database) implements a page, not PyGithub or SQLAlchemy; no PyGithub object and no
ORM class crosses this line. This module: the forge in two parts, each consumer asking for the one it uses (`Forge`:
the repository's people and PRs, and every write; `CiReads`: its CI's runs, jobs, logs and artifacts, and the step
workflow's runs; `bot.adapters.github.forge.GitHubForge` is both), the clone (`bot.adapters.git.repo.GitRepo`) and
its operations (`bot.adapters.git.clones.GitClones`, with what reverting and looking for a revert give back), the
backend a test's steps run on (`bot.wiring.backends_over`); `bot.ports.store`: the store (`bot.adapters.store`).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Protocol

from bot.domain.policy import Test
from bot.domain.scope import RunInfo
from bot.domain.signals import JobInfo
from bot.domain.subjects import pr_number
from runners.spec import Backend

FULL_SHA = re.compile(r"[0-9a-f]{40}")


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


@dataclass(frozen=True)
class PassedOver:
    """A candidate the follow-up finder found near the culprit and did not link: its number, the reason's code
    (bot.domain.followup.Passed) and what it shares with the culprit (files, qualified definitions)."""

    number: int
    reason: str
    files: tuple[str, ...] = ()
    definitions: tuple[str, ...] = ()

    def as_json(self) -> dict:
        return {
            "number": self.number,
            "reason": self.reason,
            "files": list(self.files),
            "definitions": list(self.definitions),
        }


@dataclass(frozen=True)
class Followups:
    """Where the proper fix of a culprit is being worked on, as the forge found it: the follow-up (None: nothing
    fits, a tracking issue is opened), what it shares with the culprit, what was searched (said in the status
    comment), and the candidates passed over (shown on the dashboard only: the bot names nothing else)."""

    best: int | None
    why: str = ""
    searched: str = ""
    passed_over: tuple[PassedOver, ...] = ()


class StepRunState(Protocol):
    """A dispatched step run as it is now (bot.adapters.github.actions.RunState)."""

    @property
    def status(self) -> str:
        """queued, pending, waiting, in_progress, completed, ..."""

    @property
    def conclusion(self) -> str | None: ...

    @property
    def html_url(self) -> str: ...

    @property
    def runner(self) -> str | None:
        """The runner it ran on, when GitHub said."""


class StepWorkflow(Protocol):
    """The step workflow's runs, as the dispatch backend drives them (bot.adapters.github.actions.GitHubActions)."""

    def dispatch(self, ref: str, inputs: dict[str, str]) -> int | None: ...

    def find_runs(self, marker: str, since: datetime) -> list[int]: ...

    def state(self, run_id: int) -> StepRunState: ...

    def artifact_file(self, run_id: int, artifact: str, member: str) -> bytes | None:
        """One file of a run's artifact (bot.adapters.dispatch.actions.ArtifactUnreadable: it could not be read)."""

    def cancel(self, run_id: int) -> bool: ...


class CiReads(Protocol):
    """What the forge's CI says: a workflow's runs, their attempts, jobs, logs and artifacts, and the step workflow's
    runs (bot.adapters.github.forge.GitHubForge)."""

    def workflow_runs(self, workflow: int | str, branch: str, events: list[str], limit: int) -> list[RunInfo]:
        """Completed runs of a workflow (id, file name or path) on a branch for those events, newest first."""

    def run(self, run_id: int) -> RunInfo:
        """The run as it is now: its newest attempt's number, status and conclusion."""

    def run_attempt(self, run_id: int, attempt: int) -> RunInfo:
        """One attempt of a run."""

    def run_jobs(self, run_id: int, attempt: int | None = None) -> list[JobInfo]:
        """The jobs of the run's newest attempt, or of attempt `attempt`."""

    def job_log(self, job_id: int) -> str | None:
        """One job's log as GitHub wrote it; None when GitHub no longer has it (past its retention)."""

    def run_artifact(self, run_id: int, name: str) -> dict[str, bytes]:
        """The files of a run's artifact called `name` ({} when the run has none)."""

    def actions(self, workflow: str) -> StepWorkflow:
        """The step workflow's runs, for the dispatch backend (bot.adapters.dispatch.actions)."""


class Forge(Protocol):
    """The repository's people and pull requests, and the bot's writes: comments, issues, PRs, labels, review
    requests, reactions; the kill switch and the follow-up issues (bot.adapters.github.forge.GitHubForge)."""

    @property
    def site(self) -> str:
        """The repository's web page (https://github.com/o/r), for links in comments."""

    @property
    def slug(self) -> str:
        """owner/name."""

    def culprit_facts(self, sha: str, subject_pr: int | None) -> CulpritFacts: ...

    def role(self, user: str) -> str | None:
        """admin | maintain | write | triage | read (or a custom role's name); None for a stranger."""

    def kill_switch(self, label: str, allowed_roles: list[str], allowed_users: list[str]) -> int | None: ...

    def reverts_opened_since(self, since: datetime) -> int: ...

    def followup_for(self, culprit_pr: int) -> Followups:
        """The issue or PR where the culprit's proper fix is worked on: the open PRs that change what it changed, the
        issues and PRs that cite it, a search (bot.domain.followup), within a request budget
        (bot.adapters.github.followups)."""

    def open_revert_of(self, culprit_pr: int, ours: str | None = None) -> int | None: ...

    def comment_once(self, number: int, key: str, body: str) -> tuple[int, bool]: ...

    def ensure_issue(self, key: str, title: str, body: str) -> tuple[int, bool]: ...

    def react(self, number: int, comment_id: int, content: str) -> None: ...

    def open_pr(self, title: str, body: str, head: str, base: str, draft: bool = False) -> PullRef: ...

    def add_labels(self, number: int, labels: list[str]) -> None: ...

    def request_review(self, number: int, reviewers: list[str]) -> list[Skipped]:
        """The reviewers GitHub refused (skipped, not an error): publishing goes on without them."""


class BackendFor(Protocol):
    """Where a policy's test runs its steps (bot.wiring.backends_over: the local pool here, or the step workflow on
    the repository's self-hosted runners), as the dispatch backend the driver submits to."""

    def __call__(
        self, test: Test, workers: int, repo: Git, repo_slug: str, clone_url: str, branch: str, bisection_id: int
    ) -> Backend: ...


class Git(Protocol):
    """The clone's history, as the service reads it (bot.adapters.git.repo.GitRepo is the implementation)."""

    path: Path

    def resolve(self, rev: str, what: str = "revision") -> str: ...

    def is_ancestor(self, older: str, newer: str) -> bool: ...

    def count(self, good: str, bad: str, first_parent: bool) -> int: ...

    def committed_at(self, sha: str) -> datetime: ...

    def range_graph(self, good: str, bad: str) -> dict[str, tuple[str, ...]]: ...

    def first_parent_log(self, good: str, bad: str) -> list[list[str]]: ...

    def subjects(self, shas: list[str]) -> dict[str, str]: ...

    def parents(self, sha: str) -> list[str]: ...

    def branches_at(self, sha: str) -> list[str]: ...

    def file_changes(self, good: str, bad: str, paths: list[str] | None = None) -> dict[str, dict[str, str]]:
        """Each commit of good..bad that changes one of `paths` (any file: None): file -> its diff's hunks."""


# -- what the clone's operations give back (bot.adapters.git.revert, bot.adapters.git.already) -----------------------


@dataclass(frozen=True)
class Revert:
    culprit: str
    onto: str
    sha: str
    branch: str
    message: str
    files: list[str]
    diffstat: str
    diff: str


@dataclass(frozen=True)
class RevertFound:
    """The culprit is reverted on `ref` by commit `sha`; `sha` is None when no one commit does it but the culprit's
    files are back as they were before it (reverting again would change nothing). `how`: what gave it away."""

    culprit: str
    sha: str | None
    subject: str | None
    ref: str
    how: str  # "message" | "subject" | "patch" | "tree" | "empty"

    @property
    def pr(self) -> int | None:
        """The revert's PR, from a squash merge's trailing `(#N)`."""
        return pr_number(self.subject) if self.subject else None

    def __str__(self) -> str:
        ref = self.ref[:12] if FULL_SHA.fullmatch(self.ref) else self.ref
        if self.how == "empty":
            return (
                f"reverting {self.culprit[:12]} on {ref} changes nothing: "
                "its changes are already gone there; nothing to do"
            )
        if self.sha is None:
            return (
                f"{self.culprit[:12]} is already reverted on {ref}: "
                "its changes are gone there (no one commit reverts it); nothing to do"
            )
        pr = f" (#{self.pr})" if self.pr else ""
        return f"{self.culprit[:12]} is already reverted by {self.sha[:12]}{pr} on {ref}: nothing to do"

    def as_json(self) -> dict:
        return dict(sha=self.sha, pr=self.pr, subject=self.subject, ref=self.ref, how=self.how)


# (culprit, onto) -> (the revert's sha, None) or (None, why not): what the driver proves a culprit's revert with
Reverter = Callable[[str, str], "tuple[str | None, str | None]"]


class Clones(Protocol):
    """The clone's operations the service runs (bot.adapters.git.clones.GitClones): each takes a Git that its own
    open() or sync() gave back."""

    def open(self, path: str | Path) -> Git: ...

    def sync(self, url: str, target: Path, token: str | None) -> None:
        """A `--no-checkout` clone of url at target, or its branches fetched again (origin/*); RepoError names what
        git said, with the token removed. open(target) reads it."""

    def reverter(self, repo: Git) -> Reverter: ...

    def create_revert(self, repo: Git, culprit: str, onto: str) -> Revert:
        """The revert of `culprit` on top of `onto`, on a new branch (RevertConflict, AlreadyReverted: none)."""

    def find_revert(self, repo: Git, culprit: str, onto: str, ref: str | None = None) -> RevertFound | None:
        """The culprit's revert on `onto`, however it was reverted; None when it is not reverted there."""

    def push(self, repo_dir: Path, remote_url: str, branch: str, sha: str, token: str) -> None:
        """`sha` pushed to `branch` (bot.domain.errors.WorkflowPushRefused: GitHub refused a workflow file)."""


# -- whether reverted culprits came back (the dashboard's trust report; bot.adapters.git.relanded) ---------------


@dataclass(frozen=True)
class BranchRevert:
    """A commit on the default branch that reverts `reverted` (a commit of a bisected range), whoever made it."""

    sha: str
    subject: str
    pr: int | None  # the revert's PR, from a squash merge's `(#N)`
    reverted: str
    reverted_subject: str


# (repository, culprit) -> re-landed unchanged since its revert? None: cannot tell (no clone, not fetched yet)
Relanded = Callable[[str, str], "bool | None"]
# the revert bases ((repository, culprit) -> the head the revert was made on) -> who answers for them
RelandedReader = Callable[[dict[tuple[str, str], str]], Relanded]


class CloneReads(Protocol):
    """What the trust page reads of the bot's clones (bot.adapters.git.relanded.RelandedInClones): whether reverted
    culprits came back (a RelandedReader), and the reverts on each default branch of the commits of bisected ranges."""

    def __call__(self, bases: dict[tuple[str, str], str]) -> Relanded: ...

    def reverts(self, ranges: dict[str, list[tuple[str, str]]]) -> dict[str, list[BranchRevert]] | None:
        """repository -> the reverts on its default branch of commits in its ranges ((good, bad) pairs); a repository
        without a clone is left out; None when no clone could be read."""


# -- a webhook about a workflow run (the router hands it to the dispatch backend: bot.adapters.dispatch.actions) --


@dataclass(frozen=True)
class RunEvent:
    """What a `workflow_run` or `workflow_job` delivery says about the run it concerns."""

    run_id: int | None
    title: str = ""  # workflow_run.display_title: a dispatched step's run-name, carrying its correlation id


# a webhook about a run arrived: the backends waiting on it poll it now, not at their next interval; how many woke
WakeRuns = Callable[[RunEvent], int]
