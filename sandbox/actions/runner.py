"""A run's job on this machine: a worktree of the head sha, the bound command in its own process group
(timeouts and cancellation kill the group), the log, the artifacts -- mixed into `Actions`."""

from __future__ import annotations

import glob
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
from . import workflow as wfspec
from .model import JOB_BOT, RUNNER_NAME, Artifact, Run, Workflow, _now


class RunnerMixin:
    """The process side of `Actions` (engine.py): it uses the engine's state, lock, log and notify."""

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
            self._line(run, f"##[error]No runner command is bound to {wf.path} (state.bind_workflow); nothing to run.")
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
        env = {
            **os.environ,
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
            "GITHUB_TOKEN": self._job_token(run, repo),
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
            found += (
                sorted(f for f in hit.rglob("*") if f.is_file()) if hit.is_dir() else [hit] if hit.is_file() else []
            )
    if not found:
        return {}
    root = os.path.commonpath([str(r) for r in roots])
    names = {os.path.relpath(f, root): f for f in found}
    return {
        n: f.read_bytes()
        for n, f in sorted(names.items())
        if hidden or not any(part.startswith(".") for part in Path(n).parts)
    }
