"""GitHub Actions emulation for the sandbox: the sandbox acts as a self-hosted runner on this machine.

Workflows are discovered from `.github/workflows/*.yml` on a repository's default branch when it is
created, and their files parsed (sandbox/workflow.py); a workflow runs only what it is bound to
(`state.bind_workflow(repo, path, argv, env)`, never its `run:` lines): the argv runs in a fresh
`git worktree` of the run's head sha with

    GITHUB_SHA, GITHUB_RUN_ID, GITHUB_RUN_NUMBER, GITHUB_REPOSITORY, GITHUB_REF, GITHUB_EVENT_NAME,
    RUNNER_TEMP (a directory of its own, removed after the run),
    REVERT_BISECT_SHA, REVERT_BISECT_WORKTREE, REVERT_BISECT_RESULT,
    INPUT_<NAME> for each dispatch input

in its environment. From the file, as GitHub does: dispatch inputs (undeclared or missing required
ones: 422; defaults applied), `run-name`, the first job's `runs-on` (a job no runner has the labels
for -- `Actions.runner_labels` -- stays queued until cancelled), `timeout-minutes` (times
`Actions.minute_s`; an explicit bind timeout wins), `concurrency` (one run in progress per group, one
pending; a newer one cancels the pending one) and its `actions/upload-artifact` steps (the evaluated
`name`/`path` zipped after the command; `if-no-files-found`). A workflow without upload steps uploads
REVERT_BISECT_RESULT, when written, as artifact `result`.

A run has one job whose log is the command's stdout+stderr, timestamped like GitHub's; its conclusion
comes from the exit code (0 success, else failure; cancelled; timed_out). `workflow_run` webhooks
(requested, in_progress, completed) and `workflow_job` ones (queued, in_progress, completed) are
signed and delivered to every hook subscribed to them (`state.add_hook(url, secret, events)`), in
order, on a delivery thread; `state.hook_deliveries` records them.

Downloads (job logs, artifact zips) answer 302 like GitHub, to `/_sandbox/actions/...` URLs carrying
a signed, expiring query token (`expires`, `sig`), so a client may follow them without credentials;
with a valid token in the Authorization header they are served too.
"""

from __future__ import annotations

import atexit
import glob
import hashlib
import hmac
import io
import json
import os
import queue
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import threading
import time
import uuid
import weakref
import zipfile
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from fastapi import Request
from fastapi.responses import JSONResponse, Response

from runners.proc import kill_group

from . import gitstore
from . import workflow as wfspec
from .render import Renderer, node_id
from .schema import conform

if TYPE_CHECKING:
    from .state import Repo, SandboxState

WORKFLOW_DIR = ".github/workflows/"
RUNNER_NAME = "sandbox-self-hosted"
JOB_BOT = "github-actions[bot]"
HOSTED_RUNNER_NAME = "GitHub Actions 1"
HOSTED_LABEL = re.compile(r"^(ubuntu|windows|macos)-[\w.-]+$", re.I)  # GitHub-hosted runner images
JOB_STATUSES = ("queued", "in_progress", "completed", "waiting", "requested", "pending")
LINK_TTL = 600  # seconds a signed download URL stays valid


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
    done: threading.Event = field(default_factory=threading.Event, repr=False)


@dataclass
class Hook:
    id: int
    url: str
    secret: str
    events: tuple[str, ...]
    repo: str | None = None  # None: every repository


class Actions:
    """Workflows, runs, jobs, artifacts and webhook deliveries of every repository in `state`.

    Settable: `runner_labels` (the self-hosted runner's labels; a job whose `runs-on` is not a subset
    stays queued), `hosted_runners` (jobs on a GitHub-hosted image label such as `ubuntu-latest` run
    here too, as GitHub always has such runners), `minute_s` (seconds per `timeout-minutes` minute),
    `variables` (repository variables, the `vars` context), `concurrency` (runs in progress at once)."""

    def __init__(self, state: SandboxState, concurrency: int = 2) -> None:
        self.state = state
        self.lock = state.lock
        self.workflows: dict[str, dict[int, Workflow]] = {}  # repo key -> id -> workflow
        self.runs: dict[int, Run] = {}
        self.jobs: dict[int, int] = {}  # job id -> run id
        self.artifacts: dict[int, int] = {}  # artifact id -> run id
        self.hooks: list[Hook] = []
        self.deliveries: list[dict] = []
        self.base_url: str | None = None  # learned from requests; set it when runs start before any
        self.retry_delays = (0.5, 1.0, 2.0)
        self.runner_labels: list[str] = ["self-hosted", "linux", "x64"]
        self.hosted_runners = True
        self.minute_s = 60.0
        self.run_details = True  # False: dispatch answers 204 even when asked for run details (older GHES)
        self.variables: dict[str, str] = {}
        self.concurrency = concurrency
        self._busy = 0  # runs holding a runner slot
        self._groups: dict[tuple[str, str], int] = {}  # (repo key, concurrency group) -> run id holding it
        self._cond = threading.Condition(self.lock)
        self._git_lock = threading.Lock()
        self._key = secrets.token_bytes(32)
        self._outbox: queue.Queue = queue.Queue()
        self._sender: threading.Thread | None = None
        atexit.register(_shutdown_at_exit, weakref.ref(self))

    # -- workflows --

    def discover(self, repo: Repo) -> list[Workflow]:
        """Read `.github/workflows/*.y*ml` on the default branch (a repository without one: none)."""
        sha = gitstore.resolve(repo.path, f"refs/heads/{repo.default_branch}")
        found = []
        if sha is None:
            return found
        listing = gitstore.git(repo.path, "ls-tree", "--name-only", sha, WORKFLOW_DIR, check=False)
        for path in sorted(listing.splitlines()):
            if not path.endswith((".yml", ".yaml")):
                continue
            spec = wfspec.parse(gitstore.git(repo.path, "show", f"{sha}:{path}", check=False))
            found.append(self._add_workflow(repo, path, (spec and spec.name) or path, spec))
        return found

    def _add_workflow(self, repo: Repo, path: str, name: str, spec: wfspec.WorkflowSpec | None = None) -> Workflow:
        triggers = spec.triggers if spec else ("workflow_dispatch", "schedule")
        with self.lock:
            flows = self.workflows.setdefault(repo.full_name.lower(), {})
            existing = next((w for w in flows.values() if w.path == path), None)
            if existing is not None:
                existing.name, existing.triggers, existing.spec = name, triggers, spec
                existing.run_name = spec.run_name if spec else None
                return existing
            wf = Workflow(self.state.new_id(), name, path, triggers=triggers, spec=spec,
                          run_name=spec.run_name if spec else None)
            flows[wf.id] = wf
            return wf

    def workflows_of(self, repo: Repo) -> list[Workflow]:
        with self.lock:
            return sorted(self.workflows.get(repo.full_name.lower(), {}).values(), key=lambda w: w.id)

    def workflow(self, repo: Repo, ident: int | str) -> Workflow | None:
        """By numeric id, file name (`nightly-test.yml`) or path (`.github/workflows/nightly-test.yml`)."""
        ident = str(ident)
        for wf in self.workflows_of(repo):
            if ident in (str(wf.id), wf.path, wf.path.rsplit("/", 1)[-1]):
                return wf
        return None

    def bind(self, repo: Repo, path: str, argv: list[str], env: dict | None = None,
             timeout: float | None = None, name: str | None = None) -> Workflow:
        """Bind a workflow to a runner command; a path the repository lacks becomes a workflow too
        (without a file: any inputs, runs-on `self-hosted`). `timeout` (seconds) wins over the file's."""
        wf = self.workflow(repo, path)
        if wf is None:
            full = path if "/" in path else WORKFLOW_DIR + path
            wf = self._add_workflow(repo, full, name or full.rsplit("/", 1)[-1])
        with self.lock:
            wf.argv, wf.env, wf.timeout = [str(a) for a in argv], {k: str(v) for k, v in (env or {}).items()}, timeout
        return wf

    # -- runs --

    def start(self, repo: Repo, workflow: int | str | Workflow, ref: str, *, event: str = "workflow_dispatch",
              inputs: dict | None = None, actor: str | None = None, branch_of_sha: str | None = None) -> Run:
        """Queue a run. InputError (GitHub's 422s) for dispatch inputs the workflow does not accept."""
        wf = workflow if isinstance(workflow, Workflow) else self.workflow(repo, workflow)
        if wf is None:
            raise KeyError(f"no workflow {workflow!r} in {repo.full_name}")
        sha, branch = self._resolve(repo, ref)
        branch = branch or branch_of_sha  # a past run of a branch, replayed at the sha it had then
        inputs = {str(k): wfspec.as_string(v) for k, v in (inputs or {}).items()}
        if event == "workflow_dispatch":
            inputs = wfspec.dispatch_inputs(wf.spec, inputs)
        with self.lock:
            wf.runs += 1
            run = Run(self.state.new_id(), repo.full_name.lower(), wf.id, wf.runs, sha, branch, event,
                      actor or repo.owner, wf.name, inputs)
            run.job_id = self.state.new_id()
            error = self._plan(run, wf, repo)
            self.runs[run.id] = run
            self.jobs[run.job_id] = run.id
        self._notify(run, "requested")
        threading.Thread(target=self._execute, args=(run, wf, error), name=f"actions-run-{run.id}",
                         daemon=True).start()
        return run

    def _resolve(self, repo: Repo, ref: str) -> tuple[str, str | None]:
        """(sha, branch or None) of a branch name, `refs/heads/...` or a sha; LookupError for none."""
        sha = gitstore.resolve(repo.path, f"refs/heads/{ref}") if ref else None
        if sha is not None:
            return sha, ref
        if ref and ref.startswith("refs/heads/") and gitstore.resolve(repo.path, ref):
            return gitstore.resolve(repo.path, ref), ref[len("refs/heads/"):]
        sha = gitstore.resolve(repo.path, ref)
        if sha is None:
            raise LookupError(f"no commit for ref {ref!r} in {repo.full_name}")
        return sha, None

    def _context(self, run: Run, wf: Workflow, repo: Repo) -> dict:
        return {"inputs": wfspec.typed_inputs(wf.spec, run.inputs),
                "github": {"run_id": str(run.id), "run_number": str(run.run_number), "event_name": run.event,
                           "event": {"inputs": dict(run.inputs)}, "sha": run.head_sha,
                           "repository": repo.full_name, "workflow": wf.name,
                           "ref": f"refs/heads/{run.head_branch}" if run.head_branch else ""},
                "runner": {"temp": str(self._temp(run)), "os": "Linux", "arch": "X64"},
                "vars": dict(self.variables)}

    def _temp(self, run: Run) -> Path:
        return self.state.root / "_actions" / f"run-{run.id}-temp"

    def _plan(self, run: Run, wf: Workflow, repo: Repo) -> str | None:
        """Evaluate the run's title, labels, timeout and concurrency group (under the lock); join its
        group. The error that fails the run before it queues (a bad expression), or None."""
        spec, run.context = wf.spec, self._context(run, wf, repo)
        run.timeout = wf.timeout
        if spec is None:
            return None
        try:
            if spec.run_name:
                run.display_title = wfspec.as_string(wfspec.evaluate(spec.run_name, run.context)).strip() or wf.name
            run.labels = wfspec.labels(wfspec.evaluate(spec.job.get("runs-on"), run.context))
            if wf.timeout is None:
                minutes = wfspec.timeout_minutes(wfspec.evaluate(spec.job.get("timeout-minutes"), run.context))
                run.timeout, run.timeout_text = minutes * self.minute_s, f"{wfspec.as_string(minutes)} minutes"
            group, cancel_in_progress = wfspec.concurrency(spec.concurrency, run.context)
        except wfspec.ExpressionError as exc:
            return f"The workflow is not valid. {wf.path}: {exc}"
        if group:
            self._join_group(run, group.lower(), cancel_in_progress)
        return None

    def _join_group(self, run: Run, group: str, cancel_in_progress: bool) -> None:
        """GitHub's concurrency: a run queuing in a group cancels the group's pending run (and, with
        cancel-in-progress, the running one); it waits `pending` while another run holds the group."""
        run.group = group
        for other in list(self.runs.values()):
            if (other.repo, other.group) == (run.repo, group) and other.status != "completed" \
                    and not other.cancel_requested and (other.status == "pending" or cancel_in_progress):
                self.cancel(other)
        holder = self._groups.setdefault((run.repo, group), run.id)
        if holder != run.id:
            run.status = "pending"

    def run(self, run_id: int) -> Run | None:
        with self.lock:
            return self.runs.get(run_id)

    def runs_of(self, repo: Repo, workflow: Workflow | None = None) -> list[Run]:
        key = repo.full_name.lower()
        with self.lock:
            found = [r for r in self.runs.values() if r.repo == key and (workflow is None or r.workflow_id == workflow.id)]
        return sorted(found, key=lambda r: -r.id)

    def wait(self, run_id: int, timeout: float | None = None) -> Run:
        run = self.runs[run_id]
        if not run.done.wait(timeout):
            raise TimeoutError(f"run {run_id} did not complete within {timeout}s")
        return run

    def cancel(self, run: Run) -> bool:
        """False when the run has already completed."""
        with self._cond:
            if run.status == "completed":
                return False
            run.cancel_requested = True
            pid = run.pid
            self._cond.notify_all()
        if pid:
            kill_group(pid, signal.SIGTERM)
        return True

    def shutdown(self, wait: bool = True, timeout: float = 10.0) -> None:
        """Cancel every unfinished run (killing its processes)."""
        for run in list(self.runs.values()):
            self.cancel(run)
        if wait:
            deadline = time.monotonic() + timeout
            for run in list(self.runs.values()):
                run.done.wait(max(0.0, deadline - time.monotonic()))

    def _line(self, run: Run, text: str) -> None:
        with self.lock:
            run.log.append(f"{_stamp()} {text}")

    # -- a run's life: pending (group) -> queued (runner) -> in_progress -> completed --

    def _execute(self, run: Run, wf: Workflow, error: str | None) -> None:
        if error:
            self._line(run, f"##[error]{error}")
            self._finish(run, "failure")
            return
        admitted = False
        try:
            admitted = self._admit(run)
            conclusion = self._job(run, wf) if admitted else "cancelled"
        finally:
            self._release(run, admitted)
        self._finish(run, conclusion)

    def _admit(self, run: Run) -> bool:
        """Wait for the run's concurrency group, then for a runner with its labels and a free slot
        (a job no runner has the labels for waits, queued, until cancelled). False: cancelled first."""
        if not self._wait_for(run, self._take_group):
            return False
        with self.lock:
            run.job_queued = True
        self._notify(run, "queued", "workflow_job")
        return self._wait_for(run, self._take_runner)

    def _wait_for(self, run: Run, take) -> bool:
        with self._cond:
            while not run.cancel_requested:
                if take(run):
                    return True
                self._cond.wait(0.5)  # also re-reads runner_labels, which tests may change
        return False

    def _take_group(self, run: Run) -> bool:
        if run.group is None:
            return True
        if self._groups.setdefault((run.repo, run.group), run.id) != run.id:
            return False
        if run.status == "pending":
            run.status, run.updated_at = "queued", _now()
        return True

    def _take_runner(self, run: Run) -> bool:
        runner = self.runner_for(run.labels)
        if runner is None or self._busy >= self.concurrency:
            return False
        self._busy += 1
        run.runner_name = runner
        return True

    def runner_for(self, labels: list[str]) -> str | None:
        """The name of a runner that has every label (case-insensitive), or None."""
        wanted = {label.lower() for label in labels}
        if wanted <= {label.lower() for label in self.runner_labels}:
            return RUNNER_NAME
        if self.hosted_runners and len(wanted) == 1 and HOSTED_LABEL.match(labels[0]):
            return HOSTED_RUNNER_NAME
        return None

    def _release(self, run: Run, admitted: bool) -> None:
        with self._cond:
            if admitted:
                self._busy -= 1
            if run.group is not None and self._groups.get((run.repo, run.group)) == run.id:
                del self._groups[(run.repo, run.group)]
            self._cond.notify_all()

    def _job(self, run: Run, wf: Workflow) -> str:
        """Run the bound command in a fresh worktree; upload the artifacts; the job's conclusion."""
        repo = self.state.repo(run.repo)
        with self.lock:
            run.status, run.run_started_at = "in_progress", _now()
            run.job_started_at = run.updated_at = run.run_started_at
        self._notify(run, "in_progress")
        self._notify(run, "in_progress", "workflow_job")
        self._line(run, f"Current runner version: 'sandbox' -- runner name: '{run.runner_name}'")
        if not wf.argv:
            self._line(run, f"##[error]No runner command is bound to {wf.path} "
                            f"(state.bind_workflow); nothing to run.")
            return "failure"
        work, temp = self.state.root / "_actions" / f"run-{run.id}", self._temp(run)
        result = self.state.root / "_actions" / f"run-{run.id}-result.json"
        conclusion = "failure"
        try:
            temp.mkdir(parents=True, exist_ok=True)
            with self._git_lock:
                gitstore.git(repo.path, "worktree", "add", "-f", "--detach", str(work), run.head_sha)
            self._line(run, f"Checked out {run.head_sha} in {work}")
            env = self._env(run, wf, repo, work, temp, result)
            self._line(run, "##[group]Run " + shlex.join(wf.argv))
            self._line(run, "##[endgroup]")
            conclusion = self._conclude(run, self._spawn(run, wf.argv, work, env, run.timeout))
            if wf.spec is not None and wf.spec.uploads:
                conclusion = self._upload_steps(run, wf.spec, work, conclusion)
            elif result.is_file():
                self._attach(run, "result", {"result.json": result.read_bytes()})
        except Exception as exc:  # noqa: BLE001 -- the runner itself failed: say so in the log
            self._line(run, f"##[error]Runner error: {exc}")
            conclusion = "cancelled" if run.cancel_requested else "failure"
        finally:
            with self._git_lock:
                gitstore.git(repo.path, "worktree", "remove", "--force", str(work), check=False)
                gitstore.git(repo.path, "worktree", "prune", check=False)
            result.unlink(missing_ok=True)
            shutil.rmtree(temp, ignore_errors=True)
        return conclusion

    def _env(self, run: Run, wf: Workflow, repo: Repo, work: Path, temp: Path, result: Path) -> dict:
        env = {**os.environ, **wf.env, "CI": "true", "GITHUB_ACTIONS": "true",
               "GITHUB_SHA": run.head_sha, "GITHUB_RUN_ID": str(run.id),
               "GITHUB_RUN_NUMBER": str(run.run_number), "GITHUB_REPOSITORY": repo.full_name,
               "GITHUB_EVENT_NAME": run.event, "GITHUB_WORKSPACE": str(work),
               "GITHUB_REF": f"refs/heads/{run.head_branch}" if run.head_branch else run.head_sha,
               "GITHUB_WORKFLOW": wf.name, "RUNNER_NAME": run.runner_name or RUNNER_NAME,
               "RUNNER_TEMP": str(temp), "REVERT_BISECT_SHA": run.head_sha,
               "REVERT_BISECT_WORKTREE": str(work), "REVERT_BISECT_RESULT": str(result),
               "GITHUB_TOKEN": self._job_token(run, repo)}
        for name, value in run.inputs.items():
            env["INPUT_" + re.sub(r"\W", "_", name).upper()] = value
        return env

    def _job_token(self, run: Run, repo: Repo) -> str:
        """`github.token`: the job's own token (github-actions[bot], read access), revoked when the run completes."""
        token = f"ghs_job{run.id}_{secrets.token_hex(12)}"
        self.state.add_user(JOB_BOT, type="Bot", token=token)
        if repo.permissions.get(JOB_BOT) is None:
            self.state.set_permission(repo.full_name, JOB_BOT, "read")
        with self.lock:
            run.job_token = token
        return token

    def _conclude(self, run: Run, code: int | None) -> str:
        if run.cancel_requested:
            self._line(run, "##[error]The operation was canceled.")
            return "cancelled"
        if code is None:
            limit = run.timeout_text or f"{run.timeout}s"
            self._line(run, f"##[error]The job running on runner {run.runner_name} has exceeded the maximum "
                            f"execution time of {limit}.")
            return "timed_out"
        if code != 0:
            self._line(run, f"##[error]Process completed with exit code {code}.")
            return "failure"
        return "success"

    def _upload_steps(self, run: Run, spec: wfspec.WorkflowSpec, work: Path, conclusion: str) -> str:
        """Each `actions/upload-artifact` step (whose `if:` lets it run): zip its path(s) into an artifact."""
        for step in spec.uploads:
            if not wfspec.step_runs(step.get("if"), conclusion):
                continue
            self._line(run, f"##[group]Run {step.get('uses')}")
            ok = self._upload(run, wfspec.evaluate(step.get("with") or {}, run.context), work)
            self._line(run, "##[endgroup]")
            if not ok and conclusion == "success":
                conclusion = "failure"
        return conclusion

    def _upload(self, run: Run, args: dict, work: Path) -> bool:
        """One upload-artifact step with its evaluated `with:`; False when it fails the job."""
        name = wfspec.as_string(args.get("name")) or "artifact"
        path = wfspec.as_string(args.get("path"))
        hidden = wfspec.as_string(args.get("include-hidden-files")) == "true"
        files = _artifact_files([p.strip() for p in path.splitlines() if p.strip()], work, hidden)
        if files:
            self._attach(run, name, files)
            self._line(run, f"Artifact {name} has been successfully uploaded! ({len(files)} files)")
            return True
        mode = wfspec.as_string(args.get("if-no-files-found")) or "warn"
        message = f"No files were found with the provided path: {path}. No artifacts will be uploaded."
        if mode == "error":
            self._line(run, f"##[error]{message}")
            return False
        if mode != "ignore":
            self._line(run, f"##[warning]{message}")
        return True

    def _attach(self, run: Run, name: str, files: dict[str, bytes]) -> None:
        buf = io.BytesIO()
        with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
            for arcname, data in files.items():
                z.writestr(arcname, data)
        blob = buf.getvalue()
        art = Artifact(self.state.new_id(), name, blob, _now(), "sha256:" + hashlib.sha256(blob).hexdigest())
        with self.lock:
            run.artifacts.append(art)
            self.artifacts[art.id] = run.id

    def _spawn(self, run: Run, argv: list[str], cwd: Path, env: dict, timeout: float | None) -> int | None:
        """Run argv in its own process group, streaming its output into the log; None on timeout."""
        proc = subprocess.Popen(argv, cwd=cwd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                stdin=subprocess.DEVNULL, start_new_session=True)
        with self.lock:
            run.pid = proc.pid
        if run.cancel_requested:
            kill_group(proc.pid, signal.SIGTERM)
        timed_out = threading.Event()

        def watchdog() -> None:
            if _wait(proc, timeout) is None:
                timed_out.set()
                kill_group(proc.pid, signal.SIGTERM)

        def escalate() -> None:  # SIGKILL the group if SIGTERM did not end it
            while proc.poll() is None:
                if run.cancel_requested or timed_out.is_set():
                    try:
                        proc.wait(5)
                    except subprocess.TimeoutExpired:
                        kill_group(proc.pid, signal.SIGKILL)
                    return
                time.sleep(0.1)

        if timeout:
            threading.Thread(target=watchdog, daemon=True).start()
        threading.Thread(target=escalate, daemon=True).start()
        assert proc.stdout is not None
        for raw in proc.stdout:
            self._line(run, raw.decode(errors="replace").rstrip("\r\n"))
        code = proc.wait()
        kill_group(proc.pid, signal.SIGKILL)  # leftovers of the group (background children)
        return None if timed_out.is_set() else code


    def _finish(self, run: Run, conclusion: str) -> None:
        with self.lock:
            if run.job_token:
                self.state.tokens.pop(run.job_token, None)
            run.status, run.conclusion = "completed", conclusion
            run.job_completed_at = run.updated_at = _now()
            run.job_started_at = run.job_started_at or run.updated_at
            run.pid = None
        self._line(run, f"Cleaning up orphan processes; job conclusion: {conclusion}")
        self._notify(run, "completed")
        if run.job_queued:
            self._notify(run, "completed", "workflow_job")
        run.done.set()

    # -- webhooks --

    def add_hook(self, url: str, secret: str, events: tuple[str, ...] | list[str] = ("workflow_run",),
                 repo: str | None = None) -> Hook:
        """Deliver `events` (`workflow_run`, `workflow_job`) of `repo` (None: every repository) to `url`."""
        hook = Hook(self.state.new_id(), url, secret, tuple(events), repo.lower() if repo else None)
        with self.lock:
            self.hooks.append(hook)
        return hook

    def _notify(self, run: Run, action: str, event: str = "workflow_run") -> None:
        with self.lock:
            hooks = [h for h in self.hooks if event in h.events and h.repo in (None, run.repo)]
        if not hooks:
            return
        payload = self.event_payload(run, action) if event == "workflow_run" else self.job_payload(run, action)
        for hook in hooks:
            self._outbox.put((hook, event, payload))
        with self.lock:
            if self._sender is None or not self._sender.is_alive():
                self._sender = threading.Thread(target=self._send_loop, name="actions-hooks", daemon=True)
                self._sender.start()

    def event_payload(self, run: Run, action: str) -> dict:
        repo = self.state.repo(run.repo)
        rr = Renderer(self.state, self.base_url or "http://127.0.0.1")
        wf = self.workflows[run.repo][run.workflow_id]
        return {"action": action, "workflow_run": render_run(rr, self, repo, run),
                "workflow": render_workflow(rr, repo, wf), "repository": rr.repo(repo, schema="repository"),
                "sender": rr.user(run.actor)}

    def job_payload(self, run: Run, action: str) -> dict:
        """A `workflow_job` event (queued, in_progress, completed)."""
        repo = self.state.repo(run.repo)
        rr = Renderer(self.state, self.base_url or "http://127.0.0.1")
        return {"action": action, "workflow_job": render_job(rr, self, repo, run),
                "repository": rr.repo(repo, schema="repository"), "sender": rr.user(run.actor)}

    def _send_loop(self) -> None:
        import requests

        while True:
            try:
                hook, event, payload = self._outbox.get(timeout=30)
            except queue.Empty:
                with self.lock:
                    if self._outbox.empty():
                        self._sender = None
                        return
                continue

            body = json.dumps(payload).encode()
            delivery = {"guid": str(uuid.uuid4()), "hook_id": hook.id, "url": hook.url, "event": event,
                        "action": payload.get("action"), "run_id": (payload.get("workflow_run") or {}).get("id")
                        or (payload.get("workflow_job") or {}).get("run_id"),
                        "status": None, "attempts": 0, "error": None, "delivered_at": None, "payload": payload}
            headers = {"Content-Type": "application/json", "User-Agent": "GitHub-Hookshot/sandbox",
                       "X-GitHub-Event": event, "X-GitHub-Delivery": delivery["guid"],
                       "X-GitHub-Hook-ID": str(hook.id),
                       "X-GitHub-Hook-Installation-Target-Type": "repository",
                       "X-GitHub-Hook-Installation-Target-ID": str(payload["repository"]["id"]),
                       "X-Hub-Signature-256": signature(hook.secret.encode(), body)}
            delivery["headers"] = headers
            for attempt, delay in enumerate((*self.retry_delays, None), start=1):
                delivery["attempts"] = attempt
                try:
                    resp = requests.post(hook.url, data=body, headers=headers, timeout=10)
                    delivery["status"], delivery["error"] = resp.status_code, None
                    break
                except requests.RequestException as exc:
                    delivery["error"] = f"{type(exc).__name__}: {exc}"
                    if delay is None:
                        break
                    time.sleep(delay)
            delivery["delivered_at"] = _now()
            with self.lock:
                self.deliveries.append(delivery)

    # -- signed download links --

    def sign_link(self, kind: str, ident: int, ttl: int = LINK_TTL) -> str:
        expires = int(time.time()) + ttl
        sig = hmac.new(self._key, f"{kind}:{ident}:{expires}".encode(), hashlib.sha256).hexdigest()
        return f"expires={expires}&sig={sig}"

    def link_ok(self, kind: str, ident: int, expires: str | None, sig: str | None) -> bool:
        if not expires or not sig or not expires.isdigit() or int(expires) < time.time():
            return False
        good = hmac.new(self._key, f"{kind}:{ident}:{expires}".encode(), hashlib.sha256).hexdigest()
        return hmac.compare_digest(good, sig)

    def blob(self, kind: str, ident: int) -> tuple[bytes, str] | None:
        with self.lock:
            if kind == "logs":
                run = self.runs.get(self.jobs.get(ident, -1))
                return (("\n".join(run.log) + "\n").encode(), "text/plain; charset=utf-8") if run else None
            run = self.runs.get(self.artifacts.get(ident, -1))
            art = next((a for a in run.artifacts if a.id == ident), None) if run else None
            return (art.data, "application/zip") if art else None


def _shutdown_at_exit(ref: weakref.ref) -> None:
    """At interpreter exit, kill the process groups of runs still going (their threads are daemons)."""
    actions = ref()
    if actions is not None:
        actions.shutdown(wait=False)


def _wait(proc: subprocess.Popen, timeout: float | None) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None


def _artifact_files(paths: list[str], work: Path, hidden: bool = False) -> dict[str, bytes]:
    """The files actions/upload-artifact uploads for `paths` (files, directories, globs; relative to
    the workspace; `!` exclusions ignored), named relative to the paths' least common ancestor --
    a single directory's files relative to it. Hidden files only with `hidden`."""
    roots, found = [], []
    for path in (p for p in paths if not p.startswith("!")):
        full = Path(path) if os.path.isabs(path) else work / path
        parts = full.parts
        magic = next((i for i, part in enumerate(parts) if re.search(r"[*?\[]", part)), None)
        if magic is not None:
            roots.append(Path(*parts[:magic]))
            hits = [Path(h) for h in glob.glob(str(full), recursive=True)]
        else:
            roots.append(full if full.is_dir() else full.parent)
            hits = [full] if full.exists() else []
        for hit in hits:
            found += sorted(f for f in hit.rglob("*") if f.is_file()) if hit.is_dir() else [hit] if hit.is_file() else []
    if not found:
        return {}
    root = os.path.commonpath([str(r) for r in roots])
    names = {os.path.relpath(f, root): f for f in found}
    return {n: f.read_bytes() for n, f in sorted(names.items())
            if hidden or not any(part.startswith(".") for part in Path(n).parts)}


# -- JSON bodies --


def render_workflow(rr: Renderer, repo: Repo, wf: Workflow) -> dict:
    h = rr.html(repo)
    body = {"id": wf.id, "node_id": node_id("W", wf.id), "name": wf.name, "path": wf.path, "state": wf.state,
            "created_at": wf.created_at, "updated_at": wf.updated_at,
            "url": f"{rr.api(repo)}/actions/workflows/{wf.id}",
            "html_url": f"{h}/blob/{repo.default_branch}/{wf.path}",
            "badge_url": f"{h}/workflows/{wf.path.rsplit('/', 1)[-1]}/badge.svg"}
    return conform(body, "workflow", rr.base)


def _head_commit(repo: Repo, sha: str) -> dict | None:
    try:
        c = gitstore.commit(repo.path, sha)
    except gitstore.GitError:
        return None
    return {"id": c["sha"], "tree_id": c["tree"], "message": c["message"], "timestamp": c["committer"]["date"],
            "author": {"name": c["author"]["name"], "email": c["author"]["email"]},
            "committer": {"name": c["committer"]["name"], "email": c["committer"]["email"]}}


def render_run(rr: Renderer, actions: Actions, repo: Repo, run: Run) -> dict:
    a, h = rr.api(repo), rr.html(repo)
    wf = actions.workflows[run.repo][run.workflow_id]
    u = f"{a}/actions/runs/{run.id}"
    minimal = rr.repo(repo, schema="minimal-repository")
    body = {
        "id": run.id, "node_id": node_id("WFR", run.id), "name": wf.name, "display_title": run.display_title,
        "head_branch": run.head_branch, "head_sha": run.head_sha, "path": wf.path, "run_number": run.run_number,
        "run_attempt": 1, "event": run.event, "status": run.status, "conclusion": run.conclusion,
        "workflow_id": wf.id, "check_suite_id": run.id, "check_suite_node_id": node_id("CS", run.id),
        "url": u, "html_url": f"{h}/actions/runs/{run.id}", "jobs_url": f"{u}/jobs", "logs_url": f"{u}/logs",
        "check_suite_url": f"{a}/check-suites/{run.id}", "artifacts_url": f"{u}/artifacts",
        "cancel_url": f"{u}/cancel", "rerun_url": f"{u}/rerun", "previous_attempt_url": None,
        "workflow_url": f"{a}/actions/workflows/{wf.id}", "pull_requests": [], "referenced_workflows": [],
        "created_at": run.created_at, "updated_at": run.updated_at,
        "run_started_at": run.run_started_at or run.created_at,
        "actor": rr.user(run.actor), "triggering_actor": rr.user(run.actor),
        "head_commit": _head_commit(repo, run.head_sha), "repository": minimal, "head_repository": minimal,
        "head_repository_id": repo.id,
    }
    return conform(body, "workflow-run", rr.base)


def render_job(rr: Renderer, actions: Actions, repo: Repo, run: Run) -> dict:
    a = rr.api(repo)
    wf = actions.workflows[run.repo][run.workflow_id]
    done = run.status == "completed"
    status = run.status if run.status in JOB_STATUSES else "queued"
    step_status = "completed" if done else ("in_progress" if run.status == "in_progress" else "queued")
    steps = [{"name": "Set up job", "status": "completed" if run.job_started_at else "queued",
              "conclusion": "success" if run.job_started_at else None, "number": 1,
              "started_at": run.job_started_at, "completed_at": run.job_started_at},
             {"name": "Run " + (shlex.join(wf.argv) if wf.argv else wf.path), "status": step_status,
              "conclusion": run.conclusion, "number": 2, "started_at": run.job_started_at,
              "completed_at": run.job_completed_at},
             {"name": "Complete job", "status": "completed" if done else "queued",
              "conclusion": "success" if done else None, "number": 3, "started_at": run.job_completed_at,
              "completed_at": run.job_completed_at}]
    body = {
        "id": run.job_id, "node_id": node_id("J", run.job_id), "run_id": run.id,
        "run_url": f"{a}/actions/runs/{run.id}", "run_attempt": 1, "head_sha": run.head_sha,
        "head_branch": run.head_branch, "workflow_name": wf.name, "name": _job_name(wf),
        "url": f"{a}/actions/jobs/{run.job_id}", "html_url": f"{rr.html(repo)}/actions/runs/{run.id}/job/{run.job_id}",
        "check_run_url": f"{a}/check-runs/{run.job_id}",
        "status": status,
        "conclusion": run.conclusion, "created_at": run.created_at,
        "started_at": run.job_started_at or run.created_at, "completed_at": run.job_completed_at,
        "steps": steps, "labels": list(run.labels), "runner_id": 1 if run.runner_name else None,
        "runner_name": run.runner_name,
        "runner_group_id": 1 if run.runner_name else None,
        "runner_group_name": "Default" if run.runner_name else None,
    }
    return conform(body, "job", rr.base)


def _job_name(wf: Workflow) -> str:
    """The job's `name:`, else its id in the file, else the file's stem."""
    spec = wf.spec
    if spec is not None and spec.job_id is not None:
        return str(spec.job.get("name") or spec.job_id)
    return wf.path.rsplit("/", 1)[-1].split(".")[0]


def render_artifact(rr: Renderer, repo: Repo, run: Run, art: Artifact) -> dict:
    a = rr.api(repo)
    body = {"id": art.id, "node_id": node_id("AR", art.id), "name": art.name, "size_in_bytes": len(art.data),
            "url": f"{a}/actions/artifacts/{art.id}",
            "archive_download_url": f"{a}/actions/artifacts/{art.id}/zip", "expired": False,
            "created_at": art.created_at, "updated_at": art.created_at,
            "expires_at": datetime.fromtimestamp(time.time() + 90 * 86400, UTC).replace(microsecond=0)
            .isoformat().replace("+00:00", "Z"), "digest": art.digest,
            "workflow_run": {"id": run.id, "repository_id": repo.id, "head_repository_id": repo.id,
                             "head_branch": run.head_branch or "", "head_sha": run.head_sha}}
    return conform(body, "artifact", rr.base)


# -- routes --

BLOB_ROUTE = re.compile(r"^/_sandbox/actions/(logs|artifacts)/(\d+)(?:\.zip|\.txt)?$")


def register(app: Any, state: SandboxState, *, ctx, page, body_of, need_write) -> None:
    """Add the Actions operations to the sandbox's FastAPI app (called from `create_sandbox`)."""
    from .app import ApiError, invalid, not_found

    actions: Actions = state.actions

    @app.middleware("http")
    async def signed_downloads(request: Request, call_next):
        """Outermost: learn the base URL for webhooks; serve signed download links without credentials."""
        if actions.base_url is None:
            actions.base_url = str(request.base_url).rstrip("/")
        m = BLOB_ROUTE.match(request.url.path)
        if m and request.method == "GET" and "sig" in request.query_params:
            kind, ident = m.group(1), int(m.group(2))
            if not actions.link_ok(kind, ident, request.query_params.get("expires"), request.query_params.get("sig")):
                return Response("Signature expired or invalid.\n", status_code=403, media_type="text/plain")
            found = actions.blob(kind, ident)
            if found is None:
                return Response("Not found.\n", status_code=404, media_type="text/plain")
            return Response(found[0], media_type=found[1])
        return await call_next(request)

    @app.get("/_sandbox/actions/{kind}/{name}")
    def blob(request: Request, kind: str, name: str):
        """A download link followed with credentials instead of the signed token."""
        m = BLOB_ROUTE.match(f"/_sandbox/actions/{kind}/{name}")
        found = actions.blob(m.group(1), int(m.group(2))) if m else None
        if found is None:
            raise not_found()
        return Response(found[0], media_type=found[1])

    def flow_of(r: Repo, workflow_id: str) -> Workflow:
        wf = actions.workflow(r, workflow_id)
        if wf is None:
            raise not_found()
        return wf

    def run_of(r: Repo, run_id: int) -> Run:
        run = actions.run(run_id)
        if run is None or run.repo != r.full_name.lower():
            raise not_found()
        return run

    @app.get("/repos/{owner}/{repo}/actions/workflows")
    def list_workflows(request: Request, owner: str, repo: str):
        """actions/list-repo-workflows (beyond the subset; PyGithub's `get_workflows`)."""
        r, rr, _ = ctx(request, owner, repo)
        flows = actions.workflows_of(r)
        items, headers = page(request, flows)
        return JSONResponse({"total_count": len(flows), "workflows": [render_workflow(rr, r, w) for w in items]},
                            headers=headers)

    @app.get("/repos/{owner}/{repo}/actions/workflows/{workflow_id}")
    def get_workflow(request: Request, owner: str, repo: str, workflow_id: str):
        r, rr, _ = ctx(request, owner, repo)
        return render_workflow(rr, r, flow_of(r, workflow_id))

    @app.post("/repos/{owner}/{repo}/actions/workflows/{workflow_id}/dispatches")
    async def dispatch(request: Request, owner: str, repo: str, workflow_id: str):
        r, rr, login = ctx(request, owner, repo)
        wf = flow_of(r, workflow_id)
        need_write(r, login)
        body = await body_of(request)
        body = body if isinstance(body, dict) else {}
        ref, inputs = body.get("ref"), body.get("inputs") or {}
        if not isinstance(ref, str) or not ref:
            raise invalid([{"resource": "WorkflowDispatch", "field": "ref", "code": "missing_field"}],
                          "Invalid request.\n\n\"ref\" wasn't supplied.")
        if not isinstance(inputs, dict):
            raise invalid([{"resource": "WorkflowDispatch", "field": "inputs", "code": "invalid"}])
        if "workflow_dispatch" not in wf.triggers:
            raise invalid([], "Workflow does not have 'workflow_dispatch' trigger")
        try:
            run = actions.start(r, wf, ref, event="workflow_dispatch", inputs=inputs, actor=login)
        except LookupError:
            raise invalid([], f"No ref found for: {ref}")
        except wfspec.InputError as exc:
            raise invalid([], str(exc))
        if body.get("return_run_details") is True and actions.run_details:
            u = f"{rr.api(r)}/actions/runs/{run.id}"
            return JSONResponse({"workflow_run_id": run.id, "run_url": u,
                                 "html_url": f"{rr.html(r)}/actions/runs/{run.id}"})
        return Response(status_code=204)

    @app.get("/repos/{owner}/{repo}/actions/workflows/{workflow_id}/runs")
    def list_runs(request: Request, owner: str, repo: str, workflow_id: str, branch: str | None = None,
                  event: str | None = None, status: str | None = None, head_sha: str | None = None,
                  actor: str | None = None):
        r, rr, _ = ctx(request, owner, repo)
        wf = flow_of(r, workflow_id)
        runs = actions.runs_of(r, wf)
        if branch:
            runs = [x for x in runs if x.head_branch == branch]
        if event:
            runs = [x for x in runs if x.event == event]
        if status:
            runs = [x for x in runs if status in (x.status, x.conclusion)]
        if head_sha:
            runs = [x for x in runs if x.head_sha == head_sha]
        if actor:
            runs = [x for x in runs if x.actor == actor]
        items, headers = page(request, runs)
        return JSONResponse({"total_count": len(runs), "workflow_runs": [render_run(rr, actions, r, x) for x in items]},
                            headers=headers)

    @app.get("/repos/{owner}/{repo}/actions/runs/{run_id}")
    def get_run(request: Request, owner: str, repo: str, run_id: int):
        r, rr, _ = ctx(request, owner, repo)
        return render_run(rr, actions, r, run_of(r, run_id))

    @app.get("/repos/{owner}/{repo}/actions/runs/{run_id}/jobs")
    def list_jobs(request: Request, owner: str, repo: str, run_id: int):
        r, rr, _ = ctx(request, owner, repo)
        run = run_of(r, run_id)
        return {"total_count": 1, "jobs": [render_job(rr, actions, r, run)]}

    @app.get("/repos/{owner}/{repo}/actions/jobs/{job_id}/logs")
    def job_logs(request: Request, owner: str, repo: str, job_id: int):
        r, rr, _ = ctx(request, owner, repo)
        run_id = actions.jobs.get(job_id)
        if run_id is None:
            raise not_found()
        run_of(r, run_id)
        location = f"{rr.base}/_sandbox/actions/logs/{job_id}.txt?{actions.sign_link('logs', job_id)}"
        return Response(status_code=302, headers={"Location": location})

    @app.get("/repos/{owner}/{repo}/actions/runs/{run_id}/artifacts")
    def list_artifacts(request: Request, owner: str, repo: str, run_id: int, name: str | None = None):
        r, rr, _ = ctx(request, owner, repo)
        run = run_of(r, run_id)
        arts = [a for a in run.artifacts if name is None or a.name == name]
        items, headers = page(request, arts)
        return JSONResponse({"total_count": len(arts), "artifacts": [render_artifact(rr, r, run, a) for a in items]},
                            headers=headers)

    @app.get("/repos/{owner}/{repo}/actions/artifacts/{artifact_id}/{archive_format}")
    def download_artifact(request: Request, owner: str, repo: str, artifact_id: int, archive_format: str):
        r, rr, _ = ctx(request, owner, repo)
        run_id = actions.artifacts.get(artifact_id)
        if run_id is None or archive_format != "zip":
            raise not_found()
        run_of(r, run_id)
        location = f"{rr.base}/_sandbox/actions/artifacts/{artifact_id}.zip?{actions.sign_link('artifacts', artifact_id)}"
        return Response(status_code=302, headers={"Location": location})

    @app.post("/repos/{owner}/{repo}/actions/runs/{run_id}/cancel")
    def cancel_run(request: Request, owner: str, repo: str, run_id: int):
        r, _, login = ctx(request, owner, repo)
        run = run_of(r, run_id)
        need_write(r, login)
        if not actions.cancel(run):
            raise ApiError(409, "Cannot cancel a workflow run that is completed.")
        return JSONResponse({}, status_code=202)


def signature(secret: bytes, body: bytes) -> str:
    """GitHub's webhook signature header value: `sha256=` and the hex HMAC-SHA256 of the raw body, keyed by
    the hook's secret (GitHub docs, "Validating webhook deliveries")."""
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
