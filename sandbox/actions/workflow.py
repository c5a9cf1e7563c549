"""A workflow file as the sandbox's Actions emulation reads it: triggers, dispatch inputs, its jobs
(runs-on, timeout-minutes, concurrency, env, defaults, steps, needs, if, strategy.matrix, or `uses:` a reusable
workflow of the same commit, with `with:` its `workflow_call` inputs). Pure: no I/O, no state. Its `${{ }}`
expressions are evaluated by expressions.py (what the sandbox does not evaluate is refused, loudly).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import yaml

from .expressions import ExpressionError, Unsupported, as_string, condition, evaluate, expression, number

__all__ = ["ExpressionError", "Unsupported", "as_string", "condition", "evaluate", "expression"]

MAX_INPUTS = 25
MAX_MATRIX_JOBS = 256  # "A matrix will generate a maximum of 256 jobs per workflow run" (GitHub docs)
DEFAULT_TIMEOUT_MINUTES = 360
UPLOAD_ARTIFACT = "actions/upload-artifact@"
WORKFLOW_CALL = "workflow_call"
LOCAL_WORKFLOWS = "./.github/workflows/"
CHECKOUT = "actions/checkout@"


class InputError(ValueError):
    """Dispatch inputs GitHub answers 422 for; the message is GitHub's."""


@dataclass(frozen=True)
class Input:
    name: str
    required: bool = False
    default: str | None = None
    type: str = "string"
    options: tuple[str, ...] = ()


@dataclass
class WorkflowSpec:
    name: str | None
    run_name: str | None
    triggers: tuple[str, ...]
    inputs: dict[str, Input] = field(default_factory=dict)  # of workflow_dispatch
    call_inputs: dict[str, Input] = field(default_factory=dict)  # of workflow_call (a reusable workflow)
    call_outputs: bool = False  # it declares on.workflow_call.outputs (not emulated)
    job_id: str | None = None  # the first job
    job: dict = field(default_factory=dict)
    jobs: dict[str, dict] = field(default_factory=dict)  # every job, in the file's order
    concurrency: Any = None  # the workflow's, else the first job's
    uploads: list[dict] = field(default_factory=list)  # the first job's actions/upload-artifact steps
    steps: list[dict] = field(default_factory=list)  # the first job's steps, as written
    env: dict = field(default_factory=dict)  # the workflow's `env:`


# -- parsing --


def parse(text: str) -> WorkflowSpec | None:
    """The parts of a workflow file the emulation honours; None when it is not a YAML mapping."""
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return None
    if not isinstance(doc, dict):
        return None
    on = doc.get("on", doc.get(True))  # YAML 1.1 reads a bare `on:` key as True
    triggers = (on,) if isinstance(on, str) else tuple(str(t) for t in on) if isinstance(on, (list, dict)) else ()
    dispatch = on.get("workflow_dispatch") if isinstance(on, dict) else None
    call = on.get(WORKFLOW_CALL) if isinstance(on, dict) else None
    jobs = doc.get("jobs") if isinstance(doc.get("jobs"), dict) else {}
    job_id = next(iter(jobs), None)
    job = jobs[job_id] if job_id is not None and isinstance(jobs[job_id], dict) else {}
    steps = job.get("steps") if isinstance(job.get("steps"), list) else []
    name, run_name = doc.get("name"), doc.get("run-name")
    return WorkflowSpec(
        name=str(name) if name is not None else None,
        run_name=str(run_name) if run_name else None,
        triggers=triggers,
        inputs=_inputs(dispatch),
        call_inputs=_inputs(call),
        call_outputs=isinstance(call, dict) and bool(call.get("outputs")),
        job_id=None if job_id is None else str(job_id),
        job=job,
        jobs={str(k): (v if isinstance(v, dict) else {}) for k, v in jobs.items()},
        concurrency=doc.get("concurrency", job.get("concurrency")),
        uploads=[s for s in steps if isinstance(s, dict) and str(s.get("uses", "")).startswith(UPLOAD_ARTIFACT)],
        steps=[s if isinstance(s, dict) else {"run": None, "invalid": s} for s in steps],
        env=doc.get("env") if isinstance(doc.get("env"), dict) else {},
    )


def _inputs(dispatch: Any) -> dict[str, Input]:
    declared = dispatch.get("inputs") if isinstance(dispatch, dict) else None
    out = {}
    for name, decl in (declared or {}).items():
        decl = decl if isinstance(decl, dict) else {}
        default = decl.get("default")
        out[str(name)] = Input(
            str(name),
            bool(decl.get("required", False)),
            None if default is None else as_string(default),
            str(decl.get("type", "string")),
            tuple(as_string(o) for o in decl.get("options") or ()),
        )
    return out


# -- dispatch inputs --


def dispatch_inputs(spec: WorkflowSpec | None, given: dict[str, str]) -> dict[str, str]:
    """The inputs of a dispatch, declared defaults applied; InputError where GitHub answers 422.
    A workflow without a file (`spec` None: bound by path only) accepts any inputs."""
    if len(given) > MAX_INPUTS:
        raise InputError(f"you may only define up to {MAX_INPUTS} `inputs` for a `workflow_dispatch` event")
    if spec is None:
        return dict(given)
    unexpected = [k for k in given if k not in spec.inputs]
    if unexpected:
        raise InputError(f"Unexpected inputs provided: {json.dumps(unexpected)}")
    out = dict(given)
    for decl in spec.inputs.values():
        if decl.name not in out and decl.default is not None:
            out[decl.name] = decl.default
        if decl.required and decl.name not in out:
            raise InputError(f"Required input '{decl.name}' not provided")
        if decl.type == "choice" and decl.name in out and decl.options and out[decl.name] not in decl.options:
            raise InputError(
                f"Provided value '{out[decl.name]}' for input '{decl.name}' not in the list of allowed values"
            )
    return out


def typed_inputs(spec: WorkflowSpec | None, inputs: dict[str, str]) -> dict[str, Any]:
    """The `inputs` context: booleans and numbers typed as declared (`github.event.inputs` keeps strings)."""
    out: dict[str, Any] = dict(inputs)
    for name, decl in (spec.inputs if spec else {}).items():
        if decl.type in ("boolean", "number") and (value := _from_text(decl, inputs.get(name))) is not None:
            out[name] = value
    return out


def _from_text(decl: Input, text: str | None) -> Any:
    """An input's text (given to a dispatch, or a declared default) as its declared type: a boolean is whether it
    is "true"; a number's text that is not one stays text."""
    if decl.type == "boolean":
        return text == "true"
    if decl.type == "number" and text is not None:
        try:
            return number(float(text))
        except ValueError:
            return text
    return text


# -- a run's plan, evaluated --


def labels(runs_on: Any) -> list[str]:
    """An evaluated `runs-on` as a label list (a string, a list, or a mapping with `labels`)."""
    if isinstance(runs_on, dict):
        runs_on = runs_on.get("labels", [])
    if isinstance(runs_on, list):
        return [as_string(x) for x in runs_on if as_string(x)]
    return [as_string(runs_on)] if as_string(runs_on) else []


def timeout_minutes(value: Any) -> float:
    """An evaluated `timeout-minutes` (GitHub's default when absent); ExpressionError when not a number."""
    if value is None or value == "":
        return DEFAULT_TIMEOUT_MINUTES
    try:
        return float(value)
    except (TypeError, ValueError):
        raise ExpressionError(f"Unexpected value '{as_string(value)}' for timeout-minutes") from None


def concurrency(raw: Any, ctx: dict) -> tuple[str | None, bool]:
    """(group, cancel-in-progress) of a `concurrency` value (a group name or a mapping)."""
    if raw is None:
        return None, False
    if not isinstance(raw, dict):
        return as_string(evaluate(raw, ctx)) or None, False
    cancel = evaluate(raw.get("cancel-in-progress", False), ctx)
    return as_string(evaluate(raw.get("group"), ctx)) or None, cancel is True or as_string(cancel) == "true"


def step_runs(if_: Any, conclusion: str) -> bool:
    """Whether a step with `if: if_` runs when the job so far is `conclusion` (success, failure,
    cancelled; a timeout reads as a failure), as expressions.condition decides."""
    status = {"timed_out": "failure"}.get(conclusion, conclusion)
    return condition(if_, {"job": {"status": status}})


# -- jobs: needs, matrix, names --


def needs(job: dict) -> tuple[str, ...]:
    """A job's `needs:` (a job id or a list of them)."""
    raw = job.get("needs")
    if raw is None:
        return ()
    return (str(raw),) if not isinstance(raw, list) else tuple(str(x) for x in raw)


def matrix_entries(job: dict, ctx: dict) -> list[dict]:
    """The combinations of a job's `strategy.matrix`, or one empty entry without a matrix (GitHub docs, "Running
    variations of jobs in a workflow"): the product of its vectors in the file's order; then `exclude` drops every
    combination an entry matches (a partial match is enough); then each `include` entry is added to every
    combination whose original values it does not overwrite (values an earlier `include` added may be), or, when
    it fits none, becomes a combination of its own. At most MAX_MATRIX_JOBS. A matrix that is an expression as a
    whole is refused (Unsupported)."""
    strategy = job.get("strategy")
    matrix = strategy.get("matrix") if isinstance(strategy, dict) else None
    if matrix is None:
        return [{}]
    if not isinstance(matrix, dict):
        raise Unsupported("a strategy.matrix from an expression")
    vectors = {str(k): v for k, v in matrix.items() if k not in ("include", "exclude")}
    originals: list[dict] = [{}] if vectors else []
    for key, values in vectors.items():
        values = evaluate(values, ctx)
        if not isinstance(values, list) or not values:
            raise ExpressionError(f"Matrix vector '{key}' does not contain any values")
        originals = [{**e, key: v} for e in originals for v in values]
    excluded, included = (_matrix_list(matrix, name, ctx) for name in ("exclude", "include"))
    originals = [e for e in originals if not any(all(e.get(k, _ABSENT) == v for k, v in x.items()) for x in excluded)]
    entries, extra = [dict(e) for e in originals], []
    for add in included:
        fits = [e for e, o in zip(entries, originals) if all(o.get(k, v) == v for k, v in add.items())]
        for entry in fits:
            entry.update(add)
        if not fits:
            extra.append(dict(add))
    entries += extra
    if not entries:
        raise ExpressionError(
            "Matrix must define at least one vector"
            if not vectors and not included
            else "The matrix has no combination left after exclude"
        )
    if len(entries) > MAX_MATRIX_JOBS:
        raise ExpressionError(f"Strategy produced more than {MAX_MATRIX_JOBS} jobs ({len(entries)})")
    return entries


_ABSENT = object()


def _matrix_list(matrix: dict, name: str, ctx: dict) -> list[dict]:
    raw = evaluate(matrix.get(name, []), ctx)
    if not isinstance(raw, list) or not all(isinstance(x, dict) for x in raw):
        raise ExpressionError(f"strategy.matrix.{name} must be a list of mappings")
    return [{str(k): v for k, v in x.items()} for x in raw]


def fail_fast(job: dict) -> bool:
    """`strategy.fail-fast` (default true: a failed matrix entry cancels the entries still queued or running)."""
    strategy = job.get("strategy")
    return not (isinstance(strategy, dict) and strategy.get("fail-fast") in (False, "false"))


def job_name(key: str, job: dict, matrix: dict, ctx: dict) -> str:
    """GitHub's name for a job: its `name:` evaluated (with the `matrix` context), else its id; a matrix entry's
    values are appended in parentheses when the name does not use the matrix itself."""
    raw = job.get("name")
    name = as_string(evaluate(raw, {**ctx, "matrix": matrix})).strip() if raw is not None else key
    if matrix and not (isinstance(raw, str) and "matrix." in raw):
        name += " (" + ", ".join(as_string(v) for v in matrix.values()) + ")"
    return name or key


# -- reusable workflows (GitHub docs, "Reusing workflows") --


def uses(job: dict) -> str | None:
    """A job's `uses:` (it calls a reusable workflow instead of running steps), or None."""
    raw = job.get("uses")
    return None if raw is None else str(raw)


def called_path(uses: str) -> str:
    """The file `./.github/workflows/<file>` names: a reusable workflow of the caller's own commit. Another
    repository's (`owner/repo/.github/workflows/<file>@ref`) is refused (Unsupported)."""
    if uses.startswith(LOCAL_WORKFLOWS) and "@" not in uses and uses.endswith((".yml", ".yaml")):
        return uses[2:]
    raise Unsupported(f"a reusable workflow other than one of this commit's .github/workflows ({uses})")


def check_call(path: str, called: WorkflowSpec | None, job: dict) -> WorkflowSpec:
    """What makes a call invalid before the run starts (ExpressionError; Unsupported for what the sandbox does not
    emulate): a file that is not a reusable workflow (no `on: workflow_call`), `with:` keys it does not declare,
    a matrix of calls, a reusable workflow that calls another or declares outputs. The called workflow, when valid."""
    if called is None:
        raise ExpressionError(f"{path} is not a reusable workflow: the run's commit has no such file (or not YAML)")
    if WORKFLOW_CALL not in called.triggers:
        raise ExpressionError(f"{path} is not a reusable workflow: it has no `on: workflow_call`")
    given = job.get("with") or {}
    if not isinstance(given, dict):
        raise ExpressionError(f"`with:` of the call to {path} is not a mapping")
    for name in given:
        if str(name) not in called.call_inputs:
            raise ExpressionError(f"Invalid input, {name} is not defined in the referenced workflow.")
    if job.get("strategy") is not None:
        raise Unsupported("a strategy.matrix of reusable workflow calls")
    if any(uses(decl) is not None for decl in called.jobs.values()):
        raise Unsupported(f"a reusable workflow that calls another ({path})")
    if called.call_outputs:
        raise Unsupported(f"the outputs of a reusable workflow (on.workflow_call.outputs of {path})")
    return called


def call_inputs(called: WorkflowSpec, given: dict) -> dict[str, Any]:
    """The called workflow's `inputs` context: the evaluated `with:` values, typed as declared (boolean, number,
    string), defaults applied; ExpressionError for a required input not given or a value of the wrong type."""
    out: dict[str, Any] = {}
    for decl in called.call_inputs.values():
        if decl.name in given:
            value = given[decl.name]
        elif decl.default is not None:
            value = _from_text(decl, decl.default)
        elif decl.required:
            raise ExpressionError(f"Input {decl.name} is required, but not provided while calling.")
        else:
            value = {"boolean": False, "number": 0}.get(decl.type, "")
        out[decl.name] = _typed(decl, value)
    return out


def _typed(decl: Input, value: Any) -> Any:
    if decl.type == "boolean" and not isinstance(value, bool):
        raise ExpressionError(f"Unexpected type of value '{as_string(value)}', expected type: Boolean.")
    if decl.type == "number" and (isinstance(value, bool) or not isinstance(value, (int, float))):
        raise ExpressionError(f"Unexpected type of value '{as_string(value)}', expected type: Number.")
    return value if decl.type in ("boolean", "number") else as_string(value)
