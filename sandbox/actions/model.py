"""The Actions records: workflows, runs, their attempts and jobs, artifacts and webhook subscriptions."""

from __future__ import annotations

import re
import threading
import time
from dataclasses import dataclass, field
from datetime import UTC, datetime

from . import workflow as wfspec

WORKFLOW_DIR = ".github/workflows/"
RUNNER_NAME = "sandbox-self-hosted"
JOB_BOT = "github-actions[bot]"
HOSTED_RUNNER_NAME = "GitHub Actions 1"
HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$", re.I)  # GitHub-hosted runner images
JOB_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def _stamp() -> str:
    """GitHub's log-line timestamp: 2026-01-22T22:44:54.1389777Z."""
    t = time.time()
    return datetime.fromtimestamp(t, UTC).strftime("%Y-%m-%dT%H:%M:%S.") + f"{int((t % 1) * 1e7):07d}Z"


@dataclass
class Workflow:
    id: int
    name: str
    path: str
    state: str = "active"
    triggers: tuple[str, ...] = ("workflow_dispatch", "schedule")
    run_name: str | None = None
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    argv: list[str] | None = None
    env: dict[str, str] = field(default_factory=dict)
    timeout: float | None = None
    runs: int = 0  # run_number counter
    spec: wfspec.WorkflowSpec | None = None  # the parsed file (None: bound by path only)


@dataclass
class Artifact:
    id: int
    name: str
    data: bytes
    created_at: str
    digest: str


@dataclass(frozen=True)
class Call:
    """The call of a reusable workflow a job was made by (`jobs.<caller>.uses`): what its jobs see instead of the
    caller's file -- the called workflow's `inputs` and `env:` (the `github` context stays the caller's)."""

    caller: str  # the calling job's id in the caller's file
    inputs: dict = field(default_factory=dict)
    env: dict = field(default_factory=dict)


@dataclass
class Job:
    """One execution of one of a run's jobs (a matrix entry is a job of its own): a re-run attempt makes new
    executions of the jobs it re-runs and keeps the others' (GitHub's "Re-running workflows and jobs")."""

    id: int
    run_id: int
    key: str  # the job's id in the file; `<caller>/<id>` for a job of a called workflow
    name: str  # as GitHub shows it: `name:` (evaluated), a matrix entry's values appended in parentheses; a
    # called workflow's job: `<caller's name> / <its name>`
    attempt: int  # the run_attempt it ran in
    spec: dict = field(default_factory=dict, repr=False)  # the job's mapping in the file
    matrix: dict = field(default_factory=dict)
    needs: tuple[str, ...] = ()
    status: str = "queued"
    conclusion: str | None = None
    created_at: str = field(default_factory=_now)
    started_at: str | None = None
    completed_at: str | None = None
    log: list[str] = field(default_factory=list)
    step_records: list[dict] = field(default_factory=list)  # the steps as they ran: name, status, conclusion
    labels: list[str] = field(default_factory=lambda: ["self-hosted"])  # the evaluated runs-on
    timeout: float | None = None  # seconds
    timeout_text: str = ""
    runner_name: str | None = None
    pid: int | None = None
    queued: bool = False  # the job left `pending` (workflow_job `queued` sent)
    passed_over: int = 0  # times a runner was looked for and none could take it (a queued job is still waited on)
    token: str | None = None  # its GITHUB_TOKEN, revoked when it completes
    masks: list[str] = field(default_factory=list, repr=False)  # values the log shows as *** (secrets, token)
    context: dict = field(default_factory=dict, repr=False)  # the expression context (matrix, needs)
    call: Call | None = None  # the call that made it, for a job of a reusable workflow
    outputs: dict[str, str] = field(default_factory=dict)  # its `outputs:`, evaluated when it ended

    @property
    def own_key(self) -> str:
        """Its id in its own file (what `github.job` and a sibling's `needs` say)."""
        return self.key.split("/", 1)[1] if self.call else self.key

    def answers_to(self, key: str) -> bool:
        """Is it (one of the jobs of) job `key` of the run's file, as `needs: key` means?"""
        return self.key == key or (self.call is not None and self.call.caller == key)

    @property
    def text(self) -> str:
        return "\n".join(self.log)


@dataclass
class Attempt:
    """An earlier attempt of a run, as GET .../runs/{id}/attempts/{n} shows it."""

    number: int
    status: str
    conclusion: str | None
    run_started_at: str | None
    updated_at: str
    triggering_actor: str


@dataclass
class Run:
    id: int
    repo: str  # state.repos key
    workflow_id: int
    run_number: int
    head_sha: str
    head_branch: str | None
    event: str
    actor: str
    display_title: str
    inputs: dict[str, str]
    status: str = "queued"
    conclusion: str | None = None
    created_at: str = field(default_factory=_now)
    updated_at: str = field(default_factory=_now)
    run_started_at: str | None = None
    attempt: int = 1  # run_attempt: 1, then one more per re-run
    triggering_actor: str | None = None  # who started the newest attempt (the actor, unless re-run by another)
    head_repository: str | None = None  # a fork's full name (a pull request from it); None: this repository
    jobs: list[Job] = field(default_factory=list)  # every execution of every job, all attempts
    attempts: list[Attempt] = field(default_factory=list)  # the earlier attempts
    artifacts: list[Artifact] = field(default_factory=list)
    annotations: list[str] = field(default_factory=list)  # errors of the run itself (an invalid workflow)
    cancel_requested: bool = False
    group: str | None = None  # concurrency group (lower case)
    context: dict = field(default_factory=dict, repr=False)  # the run's expression context
    # the reusable workflows its jobs call, by path, as read from its commit when it was planned
    called: dict[str, wfspec.WorkflowSpec] = field(default_factory=dict, repr=False)
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    def latest_jobs(self, attempt: int | None = None) -> list[Job]:
        """The newest execution of each job up to `attempt` (default: the newest), in the file's order."""
        newest: dict[str, Job] = {}
        for job in self.jobs:
            if job.attempt <= (attempt or self.attempt):
                newest[job.name] = job
        return list(newest.values())

    @property
    def log(self) -> list[str]:
        """The run's own errors, then every line the newest attempt's jobs wrote, job after job."""
        return [*self.annotations, *(line for job in self.latest_jobs() for line in job.log)]


@dataclass
class Hook:
    id: int
    url: str
    secret: str
    events: tuple[str, ...]
    repo: str | None = None  # None: every repository
