"""What the orchestrator needs from a place that runs bisect steps."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from runners.envs import EnvSpec


def new_ref() -> str:
    """A unique reference for one step's run (the Actions backend puts it in the run-name)."""
    return f"rb-{uuid.uuid4().hex[:12]}"


@dataclass(frozen=True)
class RevertOf:
    """How a runner without the bot's revert commit makes the same tree: `onto` with `culprit` reverted."""

    culprit: str
    onto: str


@dataclass(frozen=True)
class TestRun:
    """The repository's own test, as its CI runs it: `python <file> [args] <cases>` from `cwd` (unittest), or
    `python -m pytest <file>::<case> [args]` (pytest), in the commit's tree, with CI's environment.

    `cases` narrows the run to what failed on the red run (unittest `Class` / `Class.method`, pytest node ids
    below the file, `Class::method`); empty runs the whole file. `transplant_from`: a commit whose copy of the
    file replaces the tested commit's when that one lacks it or the cases (the policy's `missing: transplant`)."""

    __test__ = False  # not a pytest test class, whatever its name

    framework: str  # "unittest" | "pytest"
    file: str  # relative to cwd
    cwd: str = "."  # relative to the repository root
    python: str = "python3"
    args: tuple[str, ...] = ()
    env: tuple[tuple[str, str], ...] = ()
    cases: tuple[str, ...] = ()
    transplant_from: str | None = None
    build: tuple[str, ...] = ()  # run first, from the repository root: a failure makes the commit untestable (125)

    def to_json(self) -> dict:
        return {
            "build": list(self.build),
            "framework": self.framework,
            "file": self.file,
            "cwd": self.cwd,
            "python": self.python,
            "args": list(self.args),
            "env": dict(self.env),
            "cases": list(self.cases),
            "transplant_from": self.transplant_from,
        }

    @classmethod
    def from_json(cls, data: dict) -> TestRun:
        framework = data["framework"]
        if framework not in ("unittest", "pytest"):
            raise ValueError(f"test_run.framework {framework!r} is not unittest or pytest")
        env = data.get("env") or {}
        if not isinstance(env, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in env.items()):
            raise ValueError("test_run.env must map names to strings")
        return cls(
            framework,
            str(data["file"]),
            str(data.get("cwd") or "."),
            str(data.get("python") or "python3"),
            tuple(str(a) for a in data.get("args") or ()),
            tuple(sorted(env.items())),
            tuple(str(c) for c in data.get("cases") or ()),
            data.get("transplant_from"),
            tuple(str(a) for a in data.get("build") or ()),
        )


@dataclass(frozen=True)
class Needs:
    """What the runner must hold before the test may start: GPUs of its own (idle within a bounded wait), models
    in its Hugging Face cache, data files. A missing one is an infra result that names what to provision."""

    gpus: int = 0
    gpu_idle_timeout_s: float = 1800.0
    hf_models: tuple[str, ...] = ()
    files: tuple[str, ...] = ()
    hf_datasets: tuple[str, ...] = ()

    def to_json(self) -> dict:
        return {
            "gpus": self.gpus,
            "gpu_idle_timeout_s": self.gpu_idle_timeout_s,
            "hf_models": list(self.hf_models),
            "files": list(self.files),
            "hf_datasets": list(self.hf_datasets),
        }

    @classmethod
    def from_json(cls, data: dict) -> Needs:
        return cls(
            int(data.get("gpus") or 0),
            float(data.get("gpu_idle_timeout_s") or 1800.0),
            tuple(str(m) for m in data.get("hf_models") or ()),
            tuple(str(f) for f in data.get("files") or ()),
            tuple(str(d) for d in data.get("hf_datasets") or ()),
        )


@dataclass(frozen=True)
class CaseResult:
    """One test case of a step's run: `good`, `bad`, `skip` (did not run, with why) and its own metric reading; a
    bad one says how it failed when its report tells (`failure`: runners.failure's assertion or error)."""

    case: str
    outcome: str
    metric: float | None = None
    why: str | None = None
    failure: str | None = None


@dataclass(frozen=True)
class NamedRun:
    """One of several tests a step runs in turn (a group's), under the id its result is reported by."""

    id: str
    run: TestRun
    higher_is_worse: bool = True

    def to_json(self) -> dict:
        return {"id": self.id, "test_run": self.run.to_json(), "higher_is_worse": self.higher_is_worse}

    @classmethod
    def from_json(cls, data: dict) -> NamedRun:
        return cls(str(data["id"]), TestRun.from_json(data["test_run"]), bool(data.get("higher_is_worse", True)))


@dataclass(frozen=True)
class NamedMetric:
    """One of several metrics a step reads from its one run's output (a slowdown's, bot.domain.perf.step_metric): the
    last match of `regex` (its `value` group), reported as a case named `name`."""

    name: str
    regex: str

    def to_json(self) -> dict:
        return {"name": self.name, "regex": self.regex}

    @classmethod
    def from_json(cls, data: dict) -> NamedMetric:
        return cls(str(data["name"]), str(data["regex"]))


@dataclass(frozen=True)
class StepSpec:
    step_id: int
    sha: str
    command: tuple[str, ...]
    timeout_s: float | None = None
    metric_regex: str | None = None
    metric_file: bool = False  # the command writes {"metric": <number>} to $REVERT_BISECT_RESULT
    env: dict[str, str] = field(default_factory=dict)
    revert: RevertOf | None = None  # set for HEAD + revert (A/B): `sha` exists only where the bot made it
    env_spec: EnvSpec | None = None  # an environment keyed by the commit's pins, else the runner's own
    ref: str | None = None  # recorded before dispatch: how the backend finds this step's run again after a restart
    test: TestRun | None = None  # the repository's own test (then `command` is derived from it, see runners.testrun)
    needs: Needs | None = None
    higher_is_worse: bool = True  # which way a case's metric is worse, when the step reports the worst case's
    junit: str | None = None  # a JUnit XML report the command writes, relative to the worktree: a result per case
    tests: tuple[NamedRun, ...] = ()  # several of the repository's own tests, run in turn: a result per test id
    metrics: tuple[NamedMetric, ...] = ()  # several metrics of the one run's output: a result (case) per metric


@dataclass(frozen=True)
class StepResult:
    step_id: int
    sha: str
    exit_code: int | None
    metric: float | None
    infra_reason: str | None
    runner: str
    duration_s: float
    log_tail: str
    started_at: datetime
    finished_at: datetime
    env_key: str | None = None
    env_reused: bool = False
    cases: tuple[CaseResult, ...] = ()  # per test case, when the step ran the repository's own test


class Backend(Protocol):
    @property
    def free(self) -> int:
        """Runners able to take a step now."""

    def submit(self, spec: StepSpec) -> None:
        """Start a step; never blocks on the step itself."""

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        """Take over a step submitted (at `since`) by a process that is gone; False if its run cannot survive that."""

    def wait(self, timeout: float | None) -> list[StepResult]:
        """Block until at least one step finishes (or timeout); return every finished one."""

    def waiting(self) -> dict[int, str]:
        """Steps submitted but not started, with why (no free runner with the labels, ...)."""

    def cancel(self, step_ids: list[int]) -> None:
        """Stop steps whose result is no longer wanted; they report nothing."""

    def close(self) -> None: ...
