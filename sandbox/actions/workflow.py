"""A workflow file as the sandbox's Actions emulation reads it, and the subset of GitHub's `${{ }}`
expressions it evaluates. Pure: no I/O, no state.

Expressions: string literals ('it''s'), numbers, true/false/null, context paths (`inputs.x`,
`github.event.inputs.x`, `github.run_id`, `runner.temp`, `vars.X`; `a.b`, `a['b']`, `a[0]`) and
`fromJSON(...)` followed by any path. Context keys are case-insensitive, as on GitHub. Anything else
(operators, other functions) evaluates to an empty string. A value that is exactly one expression
keeps the expression's type (a list from fromJSON, a number); else every expression is interpolated
as a string.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

import yaml

MAX_INPUTS = 25
DEFAULT_TIMEOUT_MINUTES = 360
UPLOAD_ARTIFACT = "actions/upload-artifact@"
EXPR = re.compile(r"\$\{\{((?:[^}]|\}(?!\}))*)\}\}")
TOKEN = re.compile(
    r"\s*(?:(?P<str>'(?:[^']|'')*')|(?P<num>-?\d+(?:\.\d+)?)|(?P<name>[A-Za-z_][\w-]*)"
    r"|(?P<op>[().\[\],])|(?P<bad>\S))"
)


class ExpressionError(ValueError):
    """An expression GitHub would reject when evaluating it (fromJSON of text that is not JSON)."""


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
    job_id: str | None = None  # the first job
    job: dict = field(default_factory=dict)
    concurrency: Any = None  # the workflow's, else the first job's
    uploads: list[dict] = field(default_factory=list)  # the first job's actions/upload-artifact steps


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
        job_id=None if job_id is None else str(job_id),
        job=job,
        concurrency=doc.get("concurrency", job.get("concurrency")),
        uploads=[s for s in steps if isinstance(s, dict) and str(s.get("uses", "")).startswith(UPLOAD_ARTIFACT)],
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
        value = inputs.get(name)
        if decl.type == "boolean":
            out[name] = value == "true"
        elif decl.type == "number" and value is not None:
            try:
                out[name] = _number(float(value))
            except ValueError:
                pass
    return out


# -- expressions --


def as_string(value: Any) -> str:
    """GitHub's conversion of a value to a string."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return str(_number(value))
    if isinstance(value, list):
        return "Array"
    if isinstance(value, dict):
        return "Object"
    return str(value)


def _number(value: float) -> int | float:
    return int(value) if float(value).is_integer() else value


def evaluate(value: Any, ctx: dict) -> Any:
    """A workflow value with its `${{ }}` expressions evaluated (lists and mappings: each item)."""
    if isinstance(value, list):
        return [evaluate(v, ctx) for v in value]
    if isinstance(value, dict):
        return {k: evaluate(v, ctx) for k, v in value.items()}
    if not isinstance(value, str):
        return value
    whole = EXPR.fullmatch(value.strip())
    if whole:
        return expression(whole.group(1), ctx)
    return EXPR.sub(lambda m: as_string(expression(m.group(1), ctx)), value)


def expression(text: str, ctx: dict) -> Any:
    """One expression's value; "" for what the subset does not know. ExpressionError from fromJSON."""
    tokens = [(m.lastgroup, m.group(m.lastgroup)) for m in TOKEN.finditer(text) if m.lastgroup]
    parser = _Parser(tokens, ctx)
    try:
        value = parser.value()
    except _Unsupported:
        return ""
    if parser.pos != len(tokens):
        return ""
    return "" if value is None else value


class _Unsupported(Exception):
    pass


class _Parser:
    def __init__(self, tokens: list[tuple[str, str]], ctx: dict) -> None:
        self.tokens, self.ctx, self.pos = tokens, ctx, 0

    def peek(self) -> tuple[str, str] | None:
        return self.tokens[self.pos] if self.pos < len(self.tokens) else None

    def take(self, kind: str, text: str | None = None) -> str:
        tok = self.peek()
        if tok is None or tok[0] != kind or (text is not None and tok[1] != text):
            raise _Unsupported
        self.pos += 1
        return tok[1]

    def value(self) -> Any:
        return self.path(self.primary())

    def primary(self) -> Any:
        tok = self.peek()
        if tok is None:
            raise _Unsupported
        kind, text = tok
        self.pos += 1
        if kind == "str":
            return text[1:-1].replace("''", "'")
        if kind == "num":
            return _number(float(text))
        if kind != "name":
            raise _Unsupported
        lowered = text.lower()
        if lowered in ("true", "false", "null"):
            return {"true": True, "false": False, "null": None}[lowered]
        if self.peek() == ("op", "("):
            return self.call(lowered)
        return _index(self.ctx, text)

    def call(self, function: str) -> Any:
        self.take("op", "(")
        arg = self.value()
        self.take("op", ")")
        if function != "fromjson":
            raise _Unsupported
        try:
            return json.loads(as_string(arg))
        except ValueError:
            raise ExpressionError(f"Error reading JToken from JsonReader: fromJSON({as_string(arg)!r})") from None

    def path(self, value: Any) -> Any:
        while self.peek() in (("op", "."), ("op", "[")):
            if self.take("op") == ".":
                value = _index(value, self.take("name"))
            else:
                key = self.value()
                self.take("op", "]")
                value = _index(value, key)
        return value


def _index(value: Any, key: Any) -> Any:
    if isinstance(value, dict):
        wanted = as_string(key).lower()
        return next((v for k, v in value.items() if str(k).lower() == wanted), None)
    if isinstance(value, list) and isinstance(key, (int, float)) and not isinstance(key, bool):
        return value[int(key)] if 0 <= int(key) < len(value) else None
    return None


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


def step_runs(condition: Any, conclusion: str) -> bool:
    """Whether a step with `if: condition` runs after the job's command concluded `conclusion`
    (the status functions only: always(), success() -- the default --, failure(), cancelled())."""
    text = as_string(condition) or "success()"
    if "always()" in text:
        return True
    if "failure()" in text:
        return conclusion in ("failure", "timed_out")
    if "cancelled()" in text:
        return conclusion == "cancelled"
    return conclusion == "success"
