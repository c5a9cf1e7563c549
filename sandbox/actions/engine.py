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
from .jobs import JobsMixin
from .model import (
    RUNNER_NAME,
    WORKFLOW_DIR,
    Attempt,
    Call,
    Hook,
    Job,
    Run,
    Workflow,
    _now,
    _stamp,
)
from .outbox import OutboxMixin
from .runner import RunnerMixin

MAX_RERUNS = 50  # "A workflow run can be re-run a maximum of 50 times" (GitHub docs, Re-running workflows and jobs)


class RerunError(Exception):
    """A re-run GitHub refuses (403)."""


class Actions(JobsMixin, RunnerMixin, OutboxMixin):
    """Workflows, runs, jobs, artifacts and webhook deliveries of every repository in `state`.

    Settable: `runner_labels` (the self-hosted runner's labels; a job whose `runs-on` is not a subset
    stays queued), `hosted_runners` (jobs on a GitHub-hosted image label such as `ubuntu-latest` run
    here too, as GitHub always has such runners), `minute_s` (seconds per `timeout-minutes` minute),
    `variables` (repository variables, the `vars` context), `secrets` (the `secrets` context; masked in
    logs), `runner_env` (the runner machine's environment), `concurrency` (jobs in progress at once),
    `rerun_webhooks` (deliver `workflow_run` events of re-run attempts; off: REALITY.md says they may not come)."""

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
        self.rerun_webhooks = False  # True: a re-run attempt's workflow_run events are delivered too
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
        head_repository: str | None = None,
    ) -> Run:
        """Queue a run. InputError (GitHub's 422s) for dispatch inputs the workflow does not accept.
        `head_repository`: the fork a pull request's run comes from (its full name; default this repository)."""
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
                head_repository=head_repository,
            )
            error = self._plan(run, wf, repo)
            self.runs[run.id] = run
        self._notify(run, "requested")
        jobs = [j for j in run.jobs if j.attempt == run.attempt]
        threading.Thread(
            target=self._execute, args=(run, wf, error, jobs), name=f"actions-run-{run.id}", daemon=True
        ).start()
        return run

    def rerun(self, run: Run, *, failed_only: bool, actor: str) -> Run:
        """A new attempt of a completed run (POST .../rerun, .../rerun-failed-jobs): every job, or the failed,
        timed-out and cancelled ones and the jobs that need them; the others keep their executions. RerunError
        (GitHub answers 403) while the run is not completed, after 50 re-runs, or with no failed job to re-run."""
        wf = self.workflow_of(run)
        repo = self.state.repo(run.repo)
        with self.lock:
            if run.status != "completed":
                raise RerunError("This workflow run is not completed yet; it cannot be re-run.")
            if run.attempt > MAX_RERUNS:
                raise RerunError(f"This workflow run has been re-run {MAX_RERUNS} times, the most allowed.")
            latest = run.latest_jobs()
            if failed_only:  # each matrix entry is a job of its own: only the failed entries, and what needs them
                names = {j.name for j in latest if j.conclusion in ("failure", "timed_out", "cancelled")}
                grew = True
                while grew:  # however deep
                    keys = {k for j in latest if j.name in names for k in (j.key, j.call and j.call.caller) if k}
                    more = {j.name for j in latest if set(j.needs) & keys} - names
                    names |= more
                    grew = bool(more)
                if not names:
                    raise RerunError("This workflow run has no failed jobs to re-run.")
            else:
                names = {j.name for j in latest}
            run.attempts.append(
                Attempt(
                    run.attempt,
                    run.status,
                    run.conclusion,
                    run.run_started_at,
                    run.updated_at,
                    run.triggering_actor or run.actor,
                )
            )
            run.attempt += 1
            run.status, run.conclusion, run.cancel_requested = "queued", None, False
            run.updated_at = run.run_started_at = _now()
            run.triggering_actor = actor
            run.done.clear()
            run.context = self._context(run, wf, repo)
            again = []
            for old in (j for j in latest if j.name in names):
                job = self._execution(run, old.key, old.name, old.spec, old.matrix, old.needs, old.call)
                job.labels, job.timeout, job.timeout_text = list(old.labels), old.timeout, old.timeout_text
                again.append(job)
            if run.group is not None:
                self._join_group(run, run.group, False)
        self._notify(run, "requested")
        threading.Thread(
            target=self._execute, args=(run, wf, None, again), name=f"actions-rerun-{run.id}", daemon=True
        ).start()
        return run

    def _execution(
        self,
        run: Run,
        key: str,
        name: str,
        spec: dict,
        matrix: dict,
        needs: tuple[str, ...],
        call: Call | None = None,
        before: Job | None = None,
    ) -> Job:
        """A new execution of a job in the run's newest attempt (under the lock), listed last or `before` a job."""
        job = Job(self.state.new_id(), run.id, key, name, run.attempt, spec, dict(matrix), needs, call=call)
        run.jobs.insert(run.jobs.index(before) if before is not None else len(run.jobs), job)
        self.jobs[job.id] = run.id
        return job

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
                "run_attempt": str(run.attempt),
                "event_name": run.event,
                "event": {"inputs": dict(run.inputs)},
                "sha": run.head_sha,
                "repository": repo.full_name,
                "repository_owner": repo.full_name.split("/")[0],
                "workflow": wf.name,
                "ref": f"refs/heads/{run.head_branch}" if run.head_branch else "",
                "ref_name": run.head_branch or "",
                "actor": run.actor,
                "triggering_actor": run.triggering_actor or run.actor,
                "server_url": (self.base_url or "").rstrip("/"),
                "api_url": (self.base_url or "").rstrip("/"),
                "token": None,  # the job's token, minted when the job starts
            },
            "runner": {
                "name": RUNNER_NAME,
                "temp": "",  # the job's (_one_job)
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

    def _temp(self, job: Job) -> Path:
        return self.state.root / "_actions" / f"job-{job.id}-temp"

    def _plan(self, run: Run, wf: Workflow, repo: Repo) -> str | None:
        """Evaluate the run's title and concurrency group and its jobs (matrix entries, names, labels, timeouts),
        under the lock; join its group. The error that fails the run before it queues (a bad expression: GitHub
        fails such a run with no jobs), or None."""
        spec, run.context = wf.spec, self._context(run, wf, repo)
        if spec is None or wf.argv:  # a command bound to the workflow: one job runs it
            job = self._execution(run, _job_key(wf), _job_name(wf), spec.job if spec else {}, {}, ())
            job.timeout = wf.timeout
        try:
            if spec is not None and spec.run_name:
                run.display_title = wfspec.as_string(wfspec.evaluate(spec.run_name, run.context)).strip() or wf.name
            if spec is not None and not wf.argv:
                for key, decl in spec.jobs.items():
                    if (uses := wfspec.uses(decl)) is not None:  # its jobs are made when it starts (jobs.py)
                        path = wfspec.called_path(uses)
                        called = run.called.get(path) or self._read_called(repo, run, path)  # read once a run
                        run.called[path] = wfspec.check_call(path, called, decl)
                        name = wfspec.job_name(key, decl, {}, run.context)
                        self._execution(run, key, name, decl, {}, wfspec.needs(decl))
                        continue
                    for matrix in wfspec.matrix_entries(decl, run.context):
                        name = wfspec.job_name(key, decl, matrix, run.context)
                        self._execution(run, key, name, decl, matrix, wfspec.needs(decl))
            for job in run.jobs if spec is not None else ():
                self._shape(job, run.context)
            group, cancel_in_progress = wfspec.concurrency(spec.concurrency, run.context) if spec else (None, False)
        except wfspec.Unsupported as exc:
            return self._invalid(run, f"{wf.path}: the sandbox does not evaluate {exc}, so it refuses the run")
        except wfspec.ExpressionError as exc:
            return self._invalid(run, f"{wf.path}: {exc}")
        if group:
            self._join_group(run, group.lower(), cancel_in_progress)
        return None

    def _shape(self, job: Job, ctx: dict) -> None:
        """A job's runner labels (runs-on) and timeout, evaluated with its matrix entry."""
        ctx = {**ctx, "matrix": job.matrix}
        job.labels = wfspec.labels(wfspec.evaluate(job.spec.get("runs-on"), ctx))
        if job.timeout is None:
            minutes = wfspec.timeout_minutes(wfspec.evaluate(job.spec.get("timeout-minutes"), ctx))
            job.timeout, job.timeout_text = minutes * self.minute_s, f"{wfspec.as_string(minutes)} minutes"

    def _read_called(self, repo: Repo, run: Run, path: str) -> wfspec.WorkflowSpec | None:
        """The reusable workflow `path` as it is at the run's commit (None: no such file, or not YAML)."""
        text = gitstore.git(repo.path, "show", f"{run.head_sha}:{path}", check=False)
        return wfspec.parse(text) if text else None

    def _invalid(self, run: Run, why: str) -> str:
        for job in run.jobs:
            self.jobs.pop(job.id, None)
        run.jobs.clear()
        return f"The workflow is not valid. {why}"

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
            pids = [j.pid for j in run.jobs if j.pid]
            self._cond.notify_all()
        for pid in pids:
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

    def _line(self, job: Job, text: str) -> None:
        """One log line as GitHub's runner writes it: the UTC time (7 fractional digits), a space, the text,
        with every secret and the job's token masked as ***."""
        with self.lock:
            for secret in job.masks:
                if secret:
                    text = text.replace(secret, "***")
            job.log.append(f"{_stamp()} {text}")


def _job_key(wf: Workflow) -> str:
    spec = wf.spec
    if spec is not None and spec.job_id is not None:
        return str(spec.job_id)
    return wf.path.rsplit("/", 1)[-1].split(".")[0]


def _job_name(wf: Workflow) -> str:
    """A bound workflow's one job: the first job's `name:`, else its id in the file, else the file's stem."""
    spec = wf.spec
    if spec is not None and spec.job_id is not None:
        return str(spec.job.get("name") or spec.job_id)
    return _job_key(wf)


def _shutdown_at_exit(ref: weakref.ref) -> None:
    """At interpreter exit, kill the process groups of runs still going (their threads are daemons)."""
    actions = ref()
    if actions is not None:
        actions.shutdown(wait=False)
