"""The Actions engine: workflows discovered and bound, runs queued, admitted (concurrency groups, runner
slots), executed on threads (runner.py), concluded and announced (outbox.py)."""

from __future__ import annotations

import atexit
import queue
import signal
import threading
import time
import weakref
from pathlib import Path

from runners.proc import kill_group

from .. import gitstore
from ..models import Repo, SandboxStore
from . import workflow as wfspec
from .model import (
    HOSTED_LABEL,
    HOSTED_RUNNER_NAME,
    RUNNER_NAME,
    WORKFLOW_DIR,
    Hook,
    Run,
    Workflow,
    _now,
    _stamp,
)
from .outbox import OutboxMixin
from .runner import RunnerMixin


class Actions(RunnerMixin, OutboxMixin):
    """Workflows, runs, jobs, artifacts and webhook deliveries of every repository in `state`.

    Settable: `runner_labels` (the self-hosted runner's labels; a job whose `runs-on` is not a subset
    stays queued), `hosted_runners` (jobs on a GitHub-hosted image label such as `ubuntu-latest` run
    here too, as GitHub always has such runners), `minute_s` (seconds per `timeout-minutes` minute),
    `variables` (repository variables, the `vars` context), `secrets` (the `secrets` context; masked in
    logs), `runner_env` (the runner machine's environment), `concurrency` (runs in progress at once)."""

    def __init__(self, state: SandboxStore, concurrency: int = 2) -> None:
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
        self.secrets: dict[str, str] = {}  # repository secrets (the `secrets` context), masked in logs
        self.runner_env: dict[str, str] = {}  # the runner machine's environment (a self-hosted runner's .env)
        self.concurrency = concurrency
        self._busy = 0  # runs holding a runner slot
        self._groups: dict[tuple[str, str], int] = {}  # (repo key, concurrency group) -> run id holding it
        self._cond = threading.Condition(self.lock)
        self._git_lock = threading.Lock()
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
            wf = Workflow(
                self.state.new_id(), name, path, triggers=triggers, spec=spec, run_name=spec.run_name if spec else None
            )
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

    def bind(
        self,
        repo: Repo,
        path: str,
        argv: list[str],
        env: dict | None = None,
        timeout: float | None = None,
        name: str | None = None,
    ) -> Workflow:
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

    def start(
        self,
        repo: Repo,
        workflow: int | str | Workflow,
        ref: str,
        *,
        event: str = "workflow_dispatch",
        inputs: dict | None = None,
        actor: str | None = None,
        branch_of_sha: str | None = None,
    ) -> Run:
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
            run = Run(
                self.state.new_id(),
                repo.full_name.lower(),
                wf.id,
                wf.runs,
                sha,
                branch,
                event,
                actor or repo.owner,
                wf.name,
                inputs,
            )
            run.job_id = self.state.new_id()
            error = self._plan(run, wf, repo)
            self.runs[run.id] = run
            self.jobs[run.job_id] = run.id
        self._notify(run, "requested")
        threading.Thread(target=self._execute, args=(run, wf, error), name=f"actions-run-{run.id}", daemon=True).start()
        return run

    def _resolve(self, repo: Repo, ref: str) -> tuple[str, str | None]:
        """(sha, branch or None) of a branch name, `refs/heads/...` or a sha; LookupError for none."""
        sha = gitstore.resolve(repo.path, f"refs/heads/{ref}") if ref else None
        if sha is not None:
            return sha, ref
        if ref and ref.startswith("refs/heads/") and gitstore.resolve(repo.path, ref):
            return gitstore.resolve(repo.path, ref), ref[len("refs/heads/") :]
        sha = gitstore.resolve(repo.path, ref)
        if sha is None:
            raise LookupError(f"no commit for ref {ref!r} in {repo.full_name}")
        return sha, None

    def _context(self, run: Run, wf: Workflow, repo: Repo) -> dict:
        return {
            "inputs": wfspec.typed_inputs(wf.spec, run.inputs),
            "github": {
                "run_id": str(run.id),
                "run_number": str(run.run_number),
                "run_attempt": "1",
                "event_name": run.event,
                "event": {"inputs": dict(run.inputs)},
                "sha": run.head_sha,
                "repository": repo.full_name,
                "repository_owner": repo.full_name.split("/")[0],
                "workflow": wf.name,
                "ref": f"refs/heads/{run.head_branch}" if run.head_branch else "",
                "ref_name": run.head_branch or "",
                "actor": run.actor,
                "triggering_actor": run.actor,
                "server_url": (self.base_url or "").rstrip("/"),
                "api_url": (self.base_url or "").rstrip("/"),
                "token": None,  # the job's token, minted when the job starts
            },
            "runner": {
                "name": RUNNER_NAME,
                "temp": str(self._temp(run)),
                "os": "Linux",
                "arch": "X64",
                "environment": "self-hosted",
            },
            "vars": dict(self.variables),
            "secrets": {},  # filled when the job starts
            "env": {},
            "steps": {},
            "job": {"status": "success"},
        }

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
        except wfspec.Unsupported as exc:
            return f"The workflow is not valid. {wf.path}: the sandbox does not evaluate {exc}, so it refuses the run"
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
            if (
                (other.repo, other.group) == (run.repo, group)
                and other.status != "completed"
                and not other.cancel_requested
                and (other.status == "pending" or cancel_in_progress)
            ):
                self.cancel(other)
        holder = self._groups.setdefault((run.repo, group), run.id)
        if holder != run.id:
            run.status = "pending"

    def run(self, run_id: int) -> Run | None:
        with self.lock:
            return self.runs.get(run_id)

    def workflow_of(self, run: Run) -> Workflow:
        return self.workflows[run.repo][run.workflow_id]

    def runs_of(self, repo: Repo, workflow: Workflow | None = None) -> list[Run]:
        key = repo.full_name.lower()
        with self.lock:
            found = [
                r for r in self.runs.values() if r.repo == key and (workflow is None or r.workflow_id == workflow.id)
            ]
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
        """One log line as GitHub's runner writes it: the UTC time (7 fractional digits), a space, the text,
        with every secret and the job's token masked as ***."""
        with self.lock:
            for secret in run.masks:
                if secret:
                    text = text.replace(secret, "***")
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


def _shutdown_at_exit(ref: weakref.ref) -> None:
    """At interpreter exit, kill the process groups of runs still going (their threads are daemons)."""
    actions = ref()
    if actions is not None:
        actions.shutdown(wait=False)
