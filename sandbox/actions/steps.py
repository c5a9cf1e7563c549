"""A job's steps, run as GitHub's runner runs them: each `run:` through its shell with the step's `env:` and
`working-directory`; `actions/checkout` and `actions/upload-artifact` emulated; every `${{ }}` evaluated as
GitHub does (expressions.py) or refused, loudly.

Written from GitHub's documentation (workflow syntax: jobs.<id>.steps[*].run / shell / env /
working-directory / if / continue-on-error / timeout-minutes; "Store and share data with workflow
artifacts"; "Workflow commands": GITHUB_OUTPUT, GITHUB_ENV, GITHUB_PATH; "Variables": the default
environment variables) and the runner's log layout: a `run:` step opens with `##[group]Run <its first
line>`, then its script, `shell: ...` and `env:` lines, and `##[endgroup]`; its output follows; a non-zero
exit is `##[error]Process completed with exit code N.` Secrets and the job's token read `***` in the log.

A `run:` step's environment is the runner machine's (its process environment and `Actions.runner_env`,
as a self-hosted runner's `.env` gives), GitHub's default variables (GITHUB_*, RUNNER_*, CI) and the
workflow's, job's and step's `env:` -- nothing else: no INPUT_* (GitHub sets those only for actions'
`with:`), no GITHUB_TOKEN unless the workflow maps `${{ github.token }}` or `secrets.GITHUB_TOKEN` itself.
"""

from __future__ import annotations

import os
import shlex
import shutil
import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING

from .. import gitstore
from . import expressions as ex
from .files import artifact_files, key_values, remove
from .workflow import CHECKOUT, UPLOAD_ARTIFACT

if TYPE_CHECKING:
    from .model import Job

STEP_KEYS = {"id", "name", "if", "run", "uses", "with", "env", "shell", "working-directory", "continue-on-error"}
STEP_KEYS |= {"timeout-minutes"}
JOB_KEYS = {"name", "runs-on", "timeout-minutes", "steps", "env", "defaults", "concurrency", "permissions", "if"}
JOB_KEYS |= {"outputs", "continue-on-error", "environment", "needs", "strategy"}
CANCEL_TIMEOUT_MINUTES = 5  # jobs.<id>.cancel-timeout-minutes' default
UPLOAD_INPUTS = ("name", "path", "if-no-files-found", "retention-days", "compression-level", "overwrite")
UPLOAD_INPUTS += ("include-hidden-files",)
CHECKOUT_INPUTS = ("repository", "ref", "path", "fetch-depth", "token", "persist-credentials", "clean")
CHECKOUT_INPUTS += ("fetch-tags", "show-progress", "ssh-key", "ssh-strict", "lfs", "submodules", "filter")
CHECKOUT_INPUTS += ("sparse-checkout", "sparse-checkout-cone-mode", "set-safe-directory", "github-server-url")


def _now() -> str:
    return datetime.now(UTC).replace(microsecond=0).isoformat().replace("+00:00", "Z")


def step_name(step: dict) -> str:
    """The step's name as GitHub shows it: its `name:`, else `Run <first line of run:>` or `Run <uses>`."""
    if step.get("name"):
        return ex.as_string(step["name"])
    if step.get("uses"):
        return f"Run {ex.as_string(step['uses'])}"
    return "Run " + (ex.as_string(step.get("run")).strip().splitlines() or [""])[0]


class StepError(Exception):
    """What makes a step fail before (or instead of) running: its message goes to the log as ##[error]."""


def shell_argv(shell: str | None, script: Path) -> tuple[list[str], str]:
    """(argv, the `shell:` line the log shows) for a step's `shell` (GitHub's templates on Linux)."""
    bash = shutil.which("bash") or "/usr/bin/bash"
    if shell is None:
        template = f"{bash} -e {{0}}"
    elif shell == "bash":
        template = f"{bash} --noprofile --norc -eo pipefail {{0}}"
    elif shell == "sh":
        template = f"{shutil.which('sh') or '/usr/bin/sh'} -e {{0}}"
    elif shell == "python":
        template = f"{shutil.which('python') or shutil.which('python3') or 'python'} {{0}}"
    elif "{0}" in shell:
        template = shell
    else:
        raise StepError(
            f"The sandbox's runner does not provide the shell '{shell}' (bash, sh, python, or a template with {{0}})"
        )
    return [part.replace("{0}", str(script)) for part in shlex.split(template)], template


class JobSteps:
    """One job's steps on the sandbox's runner. `line` writes to the job's log; `spawn(argv, cwd, env,
    timeout)` runs a process and streams its output to the log (None on timeout); `attach(name, files)`
    uploads an artifact; `cancelled()` tells whether the run was cancelled; `remaining()` the job's time."""

    def __init__(
        self,
        record: Job,
        job: dict,
        workflow_env: dict,
        ctx: dict,
        base_env: dict,
        workspace: Path,
        temp: Path,
        *,
        line: Callable[[str], None],
        spawn: Callable[[list[str], Path, dict, float | None], int | None],
        attach: Callable[[str, dict[str, bytes]], bool],
        cancelled: Callable[[], bool],
        remaining: Callable[[], float | None],
        repo_path: Path,
        minute_s: float = 60.0,
    ) -> None:
        self.record, self.job, self.workflow_env = record, job, workflow_env
        self.ctx, self.base_env, self.workspace, self.temp = ctx, base_env, workspace, temp
        self.line, self.spawn, self.attach, self.cancelled, self.remaining = line, spawn, attach, cancelled, remaining
        self.repo_path, self.minute_s = repo_path, minute_s
        self.status = "success"  # the job's: success, failure, cancelled
        self.timed_out = False
        self.added_env: dict[str, str] = {}  # GITHUB_ENV of earlier steps
        self.added_path: list[str] = []  # GITHUB_PATH of earlier steps
        self.checkouts: list[Path] = []
        defaults = job.get("defaults") if isinstance(job.get("defaults"), dict) else {}
        self.defaults = defaults.get("run") if isinstance(defaults.get("run"), dict) else {}

    # -- the job --

    def conclusion(self) -> str:
        if self.status == "cancelled":
            return "cancelled"
        if self.timed_out:
            return "timed_out"
        return self.status

    def run_all(self, steps: list[dict]) -> str:
        """Run every step whose `if:` lets it; the job's conclusion."""
        unknown = sorted(set(self.job) - JOB_KEYS)
        if unknown:
            self.line(f"##[error]The sandbox's runner does not emulate the job key(s) {', '.join(unknown)}")
            return "failure"
        self.ctx["steps"] = {}
        for number, step in enumerate(steps, start=1):
            if self.cancelled() and self.status != "cancelled":
                self.status = "cancelled"
            self.ctx["job"] = {"status": self.status, "container": {}, "services": {}}
            shown = {"name": step_name(step), "status": "in_progress", "conclusion": None, "started_at": _now()}
            self.record.step_records.append(shown)
            try:
                self.ctx["env"] = self._env_context(step)
                if not ex.condition(step.get("if"), self.ctx):
                    self._record(step, "skipped", "skipped", {})
                    shown.update(status="completed", conclusion="skipped", completed_at=shown["started_at"])
                    continue
                outcome, outputs = self._step(step, number)
            except (StepError, ex.ExpressionError) as exc:
                self.line(f"##[error]{_expression_message(exc)}")
                outcome, outputs = "failure", {}
            keep_going = self._continue_on_error(step)
            conclusion = "success" if outcome == "failure" and keep_going else outcome
            self._record(step, outcome, conclusion, outputs)
            shown.update(status="completed", conclusion=conclusion, completed_at=_now())
            if outcome == "failure" and not keep_going and self.status == "success":
                self.status = "failure"
            if outcome == "cancelled":
                self.status = "cancelled"
        return self.conclusion()

    def outputs(self) -> dict[str, str]:
        """The job's `outputs:`, evaluated at its end with its steps' context (GitHub docs, "Passing information
        between jobs"): strings; one that fails to evaluate is left out with a warning, and so is one holding a
        secret ("Outputs containing secrets are redacted on the runner and not sent to GitHub Actions")."""
        declared = self.job.get("outputs")
        out: dict[str, str] = {}
        for name, raw in declared.items() if isinstance(declared, dict) else ():
            try:
                value = ex.as_string(ex.evaluate(raw, self.ctx))
            except (ex.ExpressionError, ex.Unsupported) as exc:
                self.line(f"##[warning]Output {name}: {_expression_message(exc)}")
                continue
            if any(secret and secret in value for secret in self.record.masks):
                self.line(f"##[warning]Skip output {name} since it may contain secret.")  # GitHub docs' words
                continue
            out[str(name)] = value
        return out

    def cleanup(self) -> None:
        for path in self.checkouts:
            gitstore.git(self.repo_path, "worktree", "remove", "--force", str(path), check=False)
        if self.checkouts:
            gitstore.git(self.repo_path, "worktree", "prune", check=False)

    def _record(self, step: dict, outcome: str, conclusion: str, outputs: dict) -> None:
        if step.get("id") is not None:
            self.ctx["steps"][str(step["id"])] = {"outcome": outcome, "conclusion": conclusion, "outputs": outputs}

    def _continue_on_error(self, step: dict) -> bool:
        value = step.get("continue-on-error", False)
        try:
            return ex.truthy(ex.evaluate(value, self.ctx))
        except ex.ExpressionError:
            return False

    def _env_context(self, step: dict) -> dict:
        """The `env` context of a step: the workflow's `env:`, the job's, what earlier steps wrote to
        GITHUB_ENV, then the step's `env:` -- each level evaluated with the levels before it."""
        env: dict[str, str] = {}
        for level in (self.workflow_env, self.job.get("env"), self.added_env, step.get("env")):
            if level is None:
                continue
            if not isinstance(level, dict):
                raise StepError(f"env must be a mapping, not {ex.as_string(level)!r}")
            self.ctx["env"] = dict(env)
            for key, value in level.items():
                env[str(key)] = value if level is self.added_env else ex.as_string(ex.evaluate(value, self.ctx))
        return env

    # -- one step --

    def _step(self, step: dict, number: int) -> tuple[str, dict]:
        unknown = sorted(set(step) - STEP_KEYS)
        if unknown:
            raise StepError(f"The sandbox's runner does not emulate the step key(s) {', '.join(unknown)}")
        if ("run" in step) == ("uses" in step):
            raise StepError(f"step {number} must have exactly one of `run` and `uses`")
        if "uses" in step:
            return self._uses(step), {}
        return self._run(step, number)

    def _run(self, step: dict, number: int) -> tuple[str, dict]:
        script = ex.as_string(ex.evaluate(step["run"], self.ctx))
        shell = step.get("shell", self.defaults.get("shell"))
        shell = None if shell is None else ex.as_string(ex.evaluate(shell, self.ctx))
        files = self.temp / "_runner_file_commands"
        files.mkdir(parents=True, exist_ok=True)
        suffix = ".py" if shell == "python" else ".sh"
        path = self.temp / f"{uuid.uuid4()}{suffix}"
        path.write_text(script)
        argv, template = shell_argv(shell, path)
        self.line("##[group]Run " + (script.splitlines() or [""])[0])
        for text in script.splitlines():
            self.line(text)
        self.line(f"shell: {template}")
        env_ctx = self.ctx["env"]
        if env_ctx:
            self.line("env:")
            for key, value in env_ctx.items():
                self.line(f"  {key}: {value}")
        self.line("##[endgroup]")
        directory = step.get("working-directory", self.defaults.get("working-directory"))
        cwd = self.workspace
        if directory is not None:
            cwd = self.workspace / ex.as_string(ex.evaluate(directory, self.ctx))
            if not cwd.is_dir():
                raise StepError(
                    f"An error occurred trying to start process '{argv[0]}' with working directory '{cwd}'. "
                    "No such file or directory"
                )
        commands = {name: files / f"{name.lower()}_{uuid.uuid4()}" for name in ("GITHUB_OUTPUT", "GITHUB_ENV")}
        commands["GITHUB_PATH"] = files / f"add_path_{uuid.uuid4()}"
        commands["GITHUB_STEP_SUMMARY"] = files / f"step_summary_{uuid.uuid4()}"
        for file in commands.values():
            file.touch()
        env = {**self.base_env, **{k: str(v) for k, v in commands.items()}, **env_ctx}
        env["GITHUB_ACTION"] = str(step.get("id") or f"__run_{number}")
        if self.added_path:
            env["PATH"] = os.pathsep.join([*reversed(self.added_path), env.get("PATH", "")])
        code = self.spawn(argv, cwd, env, self._timeout(step))
        outputs = key_values(commands["GITHUB_OUTPUT"])
        self.added_env.update(key_values(commands["GITHUB_ENV"]))
        self.added_path += [p for p in commands["GITHUB_PATH"].read_text().splitlines() if p.strip()]
        path.unlink(missing_ok=True)
        return self._outcome(code), outputs

    def _timeout(self, step: dict) -> float | None:
        """The step's time: what is left of the job's (once spent, as on a cancelled job, an `always()` step
        gets the runner's cancel timeout, 5 minutes) and at most its own `timeout-minutes`."""
        left = self.remaining()
        if left is not None and left <= 0:
            left = CANCEL_TIMEOUT_MINUTES * self.minute_s
        minutes = step.get("timeout-minutes")
        if minutes is not None:
            own = float(ex.evaluate(minutes, self.ctx)) * self.minute_s
            left = own if left is None else min(left, own)
        return left

    def _outcome(self, code: int | None) -> str:
        if self.cancelled():
            self.line("##[error]The operation was canceled.")
            return "cancelled"
        if code is None:
            self.timed_out = True
            limit = self.record.timeout_text or f"{self.record.timeout}s"
            self.line(
                f"##[error]The job running on runner {self.record.runner_name} has exceeded the maximum "
                f"execution time of {limit}."
            )
            return "failure"
        if code != 0:
            self.line(f"##[error]Process completed with exit code {code}.")
            return "failure"
        return "success"

    # -- actions --

    def _uses(self, step: dict) -> str:
        uses = ex.as_string(step["uses"])
        args = step.get("with") or {}
        if not isinstance(args, dict):
            raise StepError(f"`with` of {uses} must be a mapping")
        args = {str(k): ex.evaluate(v, self.ctx) for k, v in args.items()}
        if uses.startswith(UPLOAD_ARTIFACT):
            known, act = UPLOAD_INPUTS, self._upload
        elif uses.startswith(CHECKOUT):
            known, act = CHECKOUT_INPUTS, self._checkout
        else:
            raise StepError(
                f"The sandbox's runner does not run the action '{uses}' (it emulates actions/checkout and "
                "actions/upload-artifact); bind the workflow to a command (state.bind_workflow) instead"
            )
        self.line(f"##[group]Run {uses}")
        if args:
            self.line("with:")
            for key, value in args.items():
                self.line(f"  {key}: {ex.as_string(value)}")
        if self.ctx["env"]:
            self.line("env:")
            for key, value in self.ctx["env"].items():
                self.line(f"  {key}: {value}")
        self.line("##[endgroup]")
        unexpected = [k for k in args if k not in known]
        if unexpected:
            self.line(
                f"##[warning]Unexpected input(s) {', '.join(repr(k) for k in unexpected)}, "
                f"valid inputs are {list(known)!r}"
            )
        return "success" if act(args) else "failure"

    def _checkout(self, args: dict) -> bool:
        """actions/checkout: the run's commit (or `ref`) of this repository into the workspace (or `path`)."""
        own = ex.as_string(self.ctx["github"]["repository"])
        repository = ex.as_string(args.get("repository")) or own
        if repository.lower() != own.lower():
            raise StepError(f"The sandbox's actions/checkout fetches only this repository ({own}), not {repository}")
        ref = ex.as_string(args.get("ref")) or ex.as_string(self.ctx["github"]["sha"])
        sha = gitstore.resolve(self.repo_path, ref) or gitstore.resolve(self.repo_path, f"refs/heads/{ref}")
        if sha is None:
            self.line(f"##[error]A branch or tag with the name '{ref}' could not be found")
            return False
        target = self.workspace / ex.as_string(args.get("path")) if args.get("path") else self.workspace
        self.line(f"Syncing repository: {own}")
        if target.exists():
            shutil.rmtree(target) if target != self.workspace else [remove(p) for p in target.iterdir()]
        gitstore.git(self.repo_path, "worktree", "add", "-f", "--detach", str(target), sha)
        self.checkouts.append(target)
        self.line(f"HEAD is now at {sha[:7]}")
        return True

    def _upload(self, args: dict) -> bool:
        """actions/upload-artifact (v4): zip the path(s) into an artifact; False when that fails the step."""
        name = ex.as_string(args.get("name")) or "artifact"
        path = ex.as_string(args.get("path"))
        hidden = ex.as_string(args.get("include-hidden-files")) == "true"
        files = artifact_files([p.strip() for p in path.splitlines() if p.strip()], self.workspace, hidden)
        if files:
            if not self.attach(name, files):
                self.line(
                    "##[error]Failed to CreateArtifact: Received non-retryable error: Failed request: (409) "
                    "Conflict: an artifact with this name already exists on the workflow run"
                )
                return False
            self.line(f"With the provided path, there will be {len(files)} file(s) uploaded")
            size = sum(map(len, files.values()))
            self.line(f"Artifact {name} has been successfully uploaded! Final size is {size} bytes.")
            return True
        mode = ex.as_string(args.get("if-no-files-found")) or "warn"
        message = f"No files were found with the provided path: {path}. No artifacts will be uploaded."
        if mode == "error":
            self.line(f"##[error]{message}")
            return False
        if mode != "ignore":
            self.line(f"##[warning]{message}")
        return True


def _expression_message(exc: Exception) -> str:
    if isinstance(exc, ex.Unsupported):
        return f"The sandbox does not evaluate {exc}, so it refuses the step (never reading it as '')"
    return str(exc)
