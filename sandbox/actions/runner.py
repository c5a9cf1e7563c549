"""A run's job on this machine: a worktree of the head sha, the bound command in its own process group
(timeouts and cancellation kill the group), the log, the artifacts -- mixed into `Actions`."""

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
from .model import JOB_BOT, RUNNER_NAME, Artifact, Run, Workflow, _now


class RunnerMixin:
    """The process side of `Actions` (engine.py): it uses the engine's state, lock, log and notify."""

    def _job(self, run: Run, wf: Workflow) -> str:
        """Run the job: the workflow file's own steps (steps.py), or, for a workflow bound to a command
        (state.bind_workflow: a stand-in for steps this machine cannot run), that command in a worktree of
        the head sha and then the file's upload-artifact steps. The job's conclusion."""
        repo = self.state.repo(run.repo)
        with self.lock:
            run.status, run.run_started_at = "in_progress", _now()
            run.job_started_at = run.updated_at = run.run_started_at
        self._notify(run, "in_progress")
        self._notify(run, "in_progress", "workflow_job")
        self._line(run, "Current runner version: '2.329.0'")
        self._line(run, f"Runner name: '{run.runner_name}'")
        self._line(run, "Runner group name: 'Default'")
        self._line(run, "Secret source: Actions")
        token = self._job_token(run, repo)
        run.context["github"]["token"] = token
        run.context["runner"]["name"] = run.runner_name or RUNNER_NAME
        run.context["secrets"] = {**self.secrets, "GITHUB_TOKEN": token}
        with self.lock:
            run.masks = [token, *(v for v in self.secrets.values() if v)]
        if wf.argv:
            return self._bound_job(run, wf, repo)
        if wf.spec is None or not wf.spec.steps:
            self._line(run, f"##[error]{wf.path} has no steps to run, and no runner command is bound to it.")
            return "failure"
        return self._file_job(run, wf, repo)

    def _file_job(self, run: Run, wf: Workflow, repo: Repo) -> str:
        """The workflow's first job, its steps as written, in an empty workspace (actions/checkout fills it)."""
        assert wf.spec is not None
        workspace, temp = self.state.root / "_actions" / f"run-{run.id}", self._temp(run)
        job_name = str(wf.spec.job.get("name") or wf.spec.job_id)
        self._line(run, f"Complete job name: {job_name}")
        started = time.monotonic()

        def remaining() -> float | None:
            return None if run.timeout is None else max(0.0, run.timeout - (time.monotonic() - started))

        def attach(name: str, files: dict[str, bytes]) -> bool:
            if any(a.name == name for a in run.artifacts):
                return False
            self._attach(run, name, files)
            return True

        steps = None
        try:
            workspace.mkdir(parents=True, exist_ok=True)
            temp.mkdir(parents=True, exist_ok=True)
            run.context["github"]["workspace"] = str(workspace)
            run.context["github"]["job"] = str(wf.spec.job_id)
            steps = stepmod.JobSteps(
                run,
                wf.spec.job,
                wf.spec.env,
                run.context,
                self._default_env(run, wf, repo, workspace, temp),
                workspace,
                temp,
                line=lambda text: self._line(run, text),
                spawn=lambda argv, cwd, env, timeout: self._spawn(run, argv, cwd, env, timeout),
                attach=attach,
                cancelled=lambda: run.cancel_requested,
                remaining=remaining,
                repo_path=repo.path,
                minute_s=self.minute_s,
            )
            conclusion = steps.run_all(wf.spec.steps)
        except Exception as exc:  # noqa: BLE001 -- the runner itself failed: say so in the log
            self._line(run, f"##[error]Runner error: {exc}")
            conclusion = "cancelled" if run.cancel_requested else "failure"
        finally:
            with self._git_lock:
                if steps is not None:
                    steps.cleanup()
            shutil.rmtree(workspace, ignore_errors=True)
            shutil.rmtree(temp, ignore_errors=True)
        return conclusion

    def _default_env(self, run: Run, wf: Workflow, repo: Repo, workspace: Path, temp: Path) -> dict:
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
            "GITHUB_RUN_ATTEMPT": "1",
            "GITHUB_REPOSITORY": repo.full_name,
            "GITHUB_REPOSITORY_OWNER": repo.full_name.split("/")[0],
            "GITHUB_EVENT_NAME": run.event,
            "GITHUB_WORKSPACE": str(workspace),
            "GITHUB_REF": f"refs/heads/{run.head_branch}" if run.head_branch else run.head_sha,
            "GITHUB_REF_NAME": run.head_branch or run.head_sha,
            "GITHUB_WORKFLOW": wf.name,
            "GITHUB_JOB": str(wf.spec.job_id if wf.spec else ""),
            "GITHUB_ACTOR": run.actor,
            "RUNNER_NAME": run.runner_name or RUNNER_NAME,
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

    def _bound_job(self, run: Run, wf: Workflow, repo: Repo) -> str:
        """The bound command in a fresh worktree of the head sha, then the file's upload-artifact steps."""
        assert wf.argv
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
            self._line(run, shlex.join(wf.argv))
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
            "RUNNER_NAME": run.runner_name or RUNNER_NAME,
            "RUNNER_TEMP": str(temp),
            "REVERT_BISECT_SHA": run.head_sha,
            "REVERT_BISECT_WORKTREE": str(work),
            "REVERT_BISECT_RESULT": str(result),
            "GITHUB_TOKEN": run.job_token or "",
        }
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
            self._line(
                run,
                f"##[error]The job running on runner {run.runner_name} has exceeded the maximum "
                f"execution time of {limit}.",
            )
            return "timed_out"
        if code != 0:
            self._line(run, f"##[error]Process completed with exit code {code}.")
            return "failure"
        return "success"

    def _upload_steps(self, run: Run, spec: wfspec.WorkflowSpec, work: Path, conclusion: str) -> str:
        """After a bound command: each `actions/upload-artifact` step whose `if:` lets it run."""
        for step in spec.uploads:
            if not wfspec.step_runs(step.get("if"), conclusion):
                continue
            job = stepmod.JobSteps(
                run,
                {},
                {},
                {**run.context, "env": {}, "job": {"status": conclusion}},
                {},
                work,
                self._temp(run),
                line=lambda text: self._line(run, text),
                spawn=lambda *a: None,
                attach=lambda name, files: self._attach(run, name, files) or True,
                cancelled=lambda: run.cancel_requested,
                remaining=lambda: None,
                repo_path=Path(work),
            )
            try:
                ok = job._uses(step) == "success"
            except (stepmod.StepError, wfspec.ExpressionError) as exc:
                self._line(run, f"##[error]{exc}")
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

    def _spawn(self, run: Run, argv: list[str], cwd: Path, env: dict, timeout: float | None) -> int | None:
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


def _wait(proc: subprocess.Popen, timeout: float | None) -> int | None:
    try:
        return proc.wait(timeout)
    except subprocess.TimeoutExpired:
        return None
