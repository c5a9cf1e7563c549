"""A run's jobs on this machine: the file's steps, or a worktree of the head sha and the bound command in its own
process group (timeouts and cancellation kill the group), each job's log, the run's artifacts -- mixed into
`Actions`."""

from __future__ import annotations

import hashlib
import io
import os
import re
import secrets
import shlex
import shutil
import signal
import subprocess
import threading
import time
import zipfile
from pathlib import Path

from runners.proc import kill_group

from .. import gitstore
from ..models import Repo
from . import steps as stepmod
from . import workflow as wfspec
from .model import JOB_BOT, RUNNER_NAME, Artifact, Job, Run, Workflow, _now


class RunnerMixin:
    """The process side of `Actions` (engine.py): it uses the engine's state, lock, log and notify."""

    def _job(self, run: Run, job: Job, wf: Workflow) -> str:
        """Run one job: the workflow file's own steps (steps.py), or, for a workflow bound to a command
        (state.bind_workflow: a stand-in for steps this machine cannot run), that command in a worktree of
        the head sha and then the file's upload-artifact steps. The job's conclusion."""
        repo = self.state.repo(run.repo)
        with self.lock:
            job.status, job.started_at = "in_progress", _now()
            first = run.status != "in_progress"
            if first:
                run.status = "in_progress"
                run.run_started_at = run.run_started_at or job.started_at
            run.updated_at = job.started_at
        if first:
            self._notify(run, "in_progress")
        self._notify(run, "in_progress", "workflow_job", job)
        self._line(job, "Current runner version: '2.329.0'")
        self._line(job, f"Runner name: '{job.runner_name}'")
        self._line(job, "Runner group name: 'Default'")
        self._line(job, "Secret source: Actions")
        token = self._job_token(job, repo)
        job.context["github"]["token"] = token
        job.context["runner"]["name"] = job.runner_name or RUNNER_NAME
        job.context["secrets"] = {**self.secrets, "GITHUB_TOKEN": token}
        with self.lock:
            job.masks = [token, *(v for v in self.secrets.values() if v)]
        if wf.argv:
            return self._bound_job(run, job, wf, repo)
        if not job.spec.get("steps"):
            self._line(job, f"##[error]{wf.path} has no steps to run, and no runner command is bound to it.")
            return "failure"
        return self._file_job(run, job, wf, repo)

    def _file_job(self, run: Run, job: Job, wf: Workflow, repo: Repo) -> str:
        """A job's steps as written, in an empty workspace (actions/checkout fills it)."""
        assert wf.spec is not None
        workspace, temp = self.state.root / "_actions" / f"job-{job.id}", self._temp(job)
        self._line(job, f"Complete job name: {job.name}")
        started = time.monotonic()

        def remaining() -> float | None:
            return None if job.timeout is None else max(0.0, job.timeout - (time.monotonic() - started))

        def attach(name: str, files: dict[str, bytes]) -> bool:
            if any(a.name == name for a in run.artifacts):
                return False
            self._attach(run, name, files)
            return True

        steps = None
        raw = job.spec.get("steps")
        try:
            workspace.mkdir(parents=True, exist_ok=True)
            temp.mkdir(parents=True, exist_ok=True)
            job.context["github"]["workspace"] = str(workspace)
            steps = stepmod.JobSteps(
                job,
                job.spec,
                job.call.env if job.call else wf.spec.env,  # a called workflow's own: the caller's is not passed on
                job.context,
                self._default_env(run, job, wf, repo, workspace, temp),
                workspace,
                temp,
                line=lambda text: self._line(job, text),
                spawn=lambda argv, cwd, env, timeout: self._spawn(run, job, argv, cwd, env, timeout),
                attach=attach,
                cancelled=lambda: run.cancel_requested,
                remaining=remaining,
                repo_path=repo.path,
                minute_s=self.minute_s,
            )
            conclusion = steps.run_all([s if isinstance(s, dict) else {"run": None, "invalid": s} for s in raw])
            job.outputs = steps.outputs()
        except Exception as exc:  # noqa: BLE001 -- the runner itself failed: say so in the log
            self._line(job, f"##[error]Runner error: {exc}")
            conclusion = "cancelled" if run.cancel_requested else "failure"
        finally:
            with self._git_lock:
                if steps is not None:
                    steps.cleanup()
            shutil.rmtree(workspace, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
        return conclusion

    def _default_env(self, run: Run, job: Job, wf: Workflow, repo: Repo, workspace: Path, temp: Path) -> dict:
        """The runner machine's environment and GitHub's default variables (docs: "Variables reference")."""
        api = self.base_url.rstrip("/") if self.base_url else ""
        env = {
            **os.environ,
            **self.runner_env,
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_SHA": run.head_sha,
            "GITHUB_RUN_ID": str(run.id),
            "GITHUB_RUN_NUMBER": str(run.run_number),
            "GITHUB_RUN_ATTEMPT": str(job.attempt),
            "GITHUB_REPOSITORY": repo.full_name,
            "GITHUB_REPOSITORY_OWNER": repo.full_name.split("/")[0],
            "GITHUB_EVENT_NAME": run.event,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_REF": f"refs/heads/{run.head_branch}" if run.head_branch else run.head_sha,
            "GITHUB_REF_NAME": run.head_branch or run.head_sha,
            "GITHUB_WORKFLOW": wf.name,
            "GITHUB_JOB": job.own_key,
            "GITHUB_ACTOR": run.actor,
            "GITHUB_TRIGGERING_ACTOR": run.triggering_actor or run.actor,
            "RUNNER_NAME": job.runner_name or RUNNER_NAME,
            "RUNNER_OS": "Linux",
            "RUNNER_ARCH": "X64",
            "RUNNER_TEMP": str(temp),
        }
        if api:
            env["GITHUB_API_URL"] = api
            env["GITHUB_SERVER_URL"] = api
        for name in [k for k in env if k.startswith("INPUT_")] + ["GITHUB_TOKEN"]:
            env.pop(name, None)  # GitHub sets neither for a `run:` step
        return env

    def _bound_job(self, run: Run, job: Job, wf: Workflow, repo: Repo) -> str:
        """The bound command in a fresh worktree of the head sha, then the file's upload-artifact steps."""
        assert wf.argv
        work, temp = self.state.root / "_actions" / f"job-{job.id}", self._temp(job)
        result = self.state.root / "_actions" / f"job-{job.id}-result.json"
        conclusion = "failure"
        try:
            temp.mkdir(parents=True, exist_ok=True)
            with self._git_lock:
                gitstore.git(repo.path, "worktree", "add", "-f", "--detach", str(work), run.head_sha)
            self._line(job, f"Checked out {run.head_sha} in {work}")
            env = self._env(run, job, wf, repo, work, temp, result)
            self._line(job, "##[group]Run " + shlex.join(wf.argv))
            self._line(job, shlex.join(wf.argv))
            self._line(job, "##[endgroup]")
            conclusion = self._conclude(run, job, self._spawn(run, job, wf.argv, work, env, job.timeout))
            if wf.spec is not None and wf.spec.uploads:
                conclusion = self._upload_steps(run, job, wf.spec, work, conclusion)
            elif result.is_file():
                self._attach(run, "result", {"result.json": result.read_bytes()})
        except Exception as exc:  # noqa: BLE001 -- the runner itself failed: say so in the log
            self._line(job, f"##[error]Runner error: {exc}")
            conclusion = "cancelled" if run.cancel_requested else "failure"
        finally:
            with self._git_lock:
                gitstore.git(repo.path, "worktree", "remove", "--force", str(work), check=False)
                gitstore.git(repo.path, "worktree", "prune", check=False)
            result.unlink(missing_ok=True)
            shutil.rmtree(temp, ignore_errors=True)
        return conclusion

    def _env(self, run: Run, job: Job, wf: Workflow, repo: Repo, work: Path, temp: Path, result: Path) -> dict:
        """A bound command's environment: not GitHub's (a stand-in for steps): the inputs as INPUT_<NAME>,
        the worktree and a result path as REVERT_BISECT_*, the job token as GITHUB_TOKEN."""
        env = {
            **os.environ,
            **self.runner_env,
            **wf.env,
            "CI": "true",
            "GITHUB_ACTIONS": "true",
            "GITHUB_SHA": run.head_sha,
            "GITHUB_RUN_ID": str(run.id),
            "GITHUB_RUN_NUMBER": str(run.run_number),
            "GITHUB_REPOSITORY": repo.full_name,
            "GITHUB_EVENT_NAME": run.event,
            "GITHUB_WORKSPACE": str(work),
            "GITHUB_REF": f"refs/heads/{run.head_branch}" if run.head_branch else run.head_sha,
            "GITHUB_WORKFLOW": wf.name,
            "GITHUB_RUN_ATTEMPT": str(job.attempt),
            "RUNNER_NAME": job.runner_name or RUNNER_NAME,
            "RUNNER_TEMP": str(temp),
            "REVERT_BISECT_SHA": run.head_sha,
            "REVERT_BISECT_WORKTREE": str(work),
            "REVERT_BISECT_RESULT": str(result),
            "GITHUB_TOKEN": job.token or "",
        }
        for name, value in run.inputs.items():
            env["INPUT_" + re.sub(r"\W", "_", name).upper()] = value
        return env

    def _job_token(self, job: Job, repo: Repo) -> str:
        """`github.token`: the job's own token (github-actions[bot], read access), revoked when the job completes."""
        token = f"ghs_job{job.id}_{secrets.token_hex(12)}"
        self.state.add_user(JOB_BOT, type="Bot", token=token)
        if repo.permissions.get(JOB_BOT) is None:
            self.state.set_permission(repo.full_name, JOB_BOT, "read")
        with self.lock:
            job.token = token
        return token

    def _conclude(self, run: Run, job: Job, code: int | None) -> str:
        if run.cancel_requested:
            self._line(job, "##[error]The operation was canceled.")
            return "cancelled"
        if code is None:
            limit = job.timeout_text or f"{job.timeout}s"
            self._line(
                job,
                f"##[error]The job running on runner {job.runner_name} has exceeded the maximum "
                f"execution time of {limit}.",
            )
            return "timed_out"
        if code != 0:
            self._line(job, f"##[error]Process completed with exit code {code}.")
            return "failure"
        return "success"

    def _upload_steps(self, run: Run, job: Job, spec: wfspec.WorkflowSpec, work: Path, conclusion: str) -> str:
        """After a bound command: each `actions/upload-artifact` step whose `if:` lets it run."""
        for step in spec.uploads:
            if not wfspec.step_runs(step.get("if"), conclusion):
                continue
            steps = stepmod.JobSteps(
                job,
                {},
                {},
                {**job.context, "env": {}, "job": {"status": conclusion}},
                {},
                work,
                self._temp(job),
                line=lambda text: self._line(job, text),
                spawn=lambda *a: None,
                attach=lambda name, files: self._attach(run, name, files) or True,
                cancelled=lambda: run.cancel_requested,
                remaining=lambda: None,
                repo_path=Path(work),
            )
            try:
                ok = steps._uses(step) == "success"
            except (stepmod.StepError, wfspec.ExpressionError) as exc:
                self._line(job, f"##[error]{exc}")
                ok = False
            if not ok and conclusion == "success":
                conclusion = "failure"
        return conclusion

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

    def _spawn(self, run: Run, job: Job, argv: list[str], cwd: Path, env: dict, timeout: float | None) -> int | None:
        """Run argv in its own process group, streaming its output into the log; None on timeout."""
        proc = subprocess.Popen(
            argv,
            cwd=cwd,
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        with self.lock:
            job.pid = proc.pid
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
            self._line(job, raw.decode(errors="replace").rstrip("\r\n"))
        code = proc.wait()
        kill_group(proc.pid, signal.SIGKILL)  # leftovers of the group (background children)
        return None if timed_out.is_set() else code

    def _job_done(self, run: Run, job: Job, conclusion: str) -> None:
        with self.lock:
            if job.token:
                self.state.tokens.pop(job.token, None)
            job.status, job.conclusion = "completed", conclusion
            job.completed_at = run.updated_at = _now()
            job.started_at = job.started_at or job.completed_at
            job.pid = None
        self._line(job, f"Cleaning up orphan processes; job conclusion: {conclusion}")
        if job.queued:
            self._notify(run, "completed", "workflow_job", job)

    def _finish(self, run: Run, conclusion: str) -> None:
        with self.lock:
            run.status, run.conclusion = "completed", conclusion
            run.updated_at = _now()
        self._notify(run, "completed")
        run.done.set()


def _wait(proc: subprocess.Popen, timeout: float | None) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None
