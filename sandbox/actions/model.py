"""The Actions records: workflows, runs (each with its one job), artifacts and webhook subscriptions."""

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
    job_id: int = 0
    job_started_at: str | None = None
    job_completed_at: str | None = None
    log: list[str] = field(default_factory=list)
    artifacts: list[Artifact] = field(default_factory=list)
    pid: int | None = None
    cancel_requested: bool = False
    job_token: str | None = None
    labels: list[str] = field(default_factory=lambda: ["self-hosted"])  # the job's evaluated runs-on
    timeout: float | None = None  # seconds
    timeout_text: str = ""
    group: str | None = None  # concurrency group (lower case)
    runner_name: str | None = None
    job_queued: bool = False  # the job left `pending` (workflow_job `queued` sent)
    context: dict = field(default_factory=dict, repr=False)  # the expression context
    step_records: list[dict] = field(default_factory=list)  # the steps as they ran: name, status, conclusion
    masks: list[str] = field(default_factory=list, repr=False)  # values the log shows as *** (secrets, token)
    done: threading.Event = field(default_factory=threading.Event, repr=False)


@dataclass
class Hook:
    id: int
    url: str
    secret: str
    events: tuple[str, ...]
    repo: str | None = None  # None: every repository
