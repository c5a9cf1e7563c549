"""result.json, the one thing a step hands back: versioned, validated when written and when read.

    {"schema": 1, "step_id": 17, "sha": "...", "verdict": "good|bad|skip|infra", "exit_code": 1,
     "infra_reason": null, "metric": {"name": "avg_kl_div", "value": 0.0065, "threshold": 0.002},
     "duration_s": 412.3, "runner": "gpu-h100-07", "log_tail": "...", "env_key": "...",
     "env_reused": true, "started_at": "...", "finished_at": "...",
     "cases": [{"case": "TestX.test_y", "outcome": "good|bad|skip|infra", "metric": 0.0004, "why": null,
                "failure": "assertion|error|null"}]}

`cases` (optional): one entry per test case when the step ran the repository's own test (runners.testrun), each
with its own metric reading.

`verdict` is the runner's reading of the exit code alone (git bisect run's meanings); the bot
classifies again with the policy's metric rule and the calibrated boundary, which only it knows.
"""

from __future__ import annotations

import math
from datetime import datetime
from typing import Any

from runners.failure import ASSERTION, ERROR
from runners.spec import CaseResult, StepResult

SCHEMA = 1
FAILURES = (ASSERTION, ERROR)
LOG_TAIL_CHARS = 4000


def exit_verdict(exit_code: int | None) -> str:
    """An exit code read as `git bisect run` reads it: 0 good, 125 skip, 1-127 bad, anything else infra
    (the wire contract's meaning; the bot's engine reads codes the same way, a test holds them equal)."""
    if exit_code is None or not 0 <= exit_code < 128:
        return "infra"
    return "good" if exit_code == 0 else "skip" if exit_code == 125 else "bad"


class ResultError(ValueError):
    """A result.json that cannot be trusted: say what is wrong with it."""


def to_json(result: StepResult, metric_name: str | None = None, threshold: float | None = None) -> dict[str, Any]:
    verdict = "infra" if result.infra_reason is not None else exit_verdict(result.exit_code)
    data = {
        "schema": SCHEMA,
        "step_id": result.step_id,
        "sha": result.sha,
        "verdict": verdict,
        "exit_code": result.exit_code,
        "infra_reason": result.infra_reason,
        "metric": None
        if result.metric is None
        else {"name": metric_name or "metric", "value": result.metric, "threshold": threshold},
        "duration_s": round(result.duration_s, 3),
        "runner": result.runner,
        "log_tail": result.log_tail[-LOG_TAIL_CHARS:],
        "env_key": result.env_key,
        "env_reused": result.env_reused,
        "started_at": result.started_at.isoformat(),
        "finished_at": result.finished_at.isoformat(),
    }
    if result.cases:
        data["cases"] = [
            {"case": c.case, "outcome": c.outcome, "metric": c.metric, "why": c.why, "failure": c.failure}
            for c in result.cases
        ]
    return validate(data)


def from_json(data: Any, step_id: int | None = None, sha: str | None = None) -> StepResult:
    """A StepResult from a result.json; ResultError when it is malformed or answers another step."""
    data = validate(data)
    if step_id is not None and data["step_id"] != step_id:
        raise ResultError(f"result.json is for step {data['step_id']}, not step {step_id}")
    if sha is not None and data["sha"] != sha:
        raise ResultError(f"result.json is for commit {data['sha'][:12]}, not {sha[:12]}")
    metric = data["metric"]["value"] if data["metric"] else None
    cases = data.get("cases") or ()
    return StepResult(
        data["step_id"],
        data["sha"],
        data["exit_code"],
        metric,
        data["infra_reason"],
        data["runner"],
        data["duration_s"],
        data["log_tail"],
        _time(data["started_at"]),
        _time(data["finished_at"]),
        data["env_key"],
        data["env_reused"],
        tuple(CaseResult(c["case"], c["outcome"], c["metric"], c["why"], c.get("failure")) for c in cases),
    )


_FIELDS: dict[str, tuple[type, ...]] = {
    "schema": (int,),
    "step_id": (int,),
    "sha": (str,),
    "verdict": (str,),
    "exit_code": (int, type(None)),
    "infra_reason": (str, type(None)),
    "metric": (dict, type(None)),
    "duration_s": (int, float),
    "runner": (str,),
    "log_tail": (str,),
    "env_key": (str, type(None)),
    "env_reused": (bool,),
    "started_at": (str,),
    "finished_at": (str,),
}


def validate(data: Any) -> dict[str, Any]:
    if not isinstance(data, dict):
        raise ResultError("result.json is not a JSON object")
    if data.get("schema") != SCHEMA:
        raise ResultError(
            f"result.json schema {data.get('schema')!r} is not {SCHEMA}: the runner and the bot run different versions"
        )
    missing = sorted(set(_FIELDS) - set(data))
    if missing:
        raise ResultError(f"result.json lacks {', '.join(missing)}")
    for key, kinds in _FIELDS.items():
        value = data[key]
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ResultError(
                f"result.json: {key} is {type(value).__name__}, expected {'/'.join(k.__name__ for k in kinds)}"
            )
    if data["verdict"] not in ("good", "bad", "skip", "infra"):
        raise ResultError(f"result.json: verdict {data['verdict']!r} is not good, bad, skip or infra")
    if data["exit_code"] is None and data["infra_reason"] is None:
        raise ResultError("result.json: no exit code and no infra reason")
    metric = data["metric"]
    if metric is not None:
        value = metric.get("value")
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
            raise ResultError(f"result.json: metric value {value!r} is not a finite number")
    for key in ("started_at", "finished_at"):
        _time(data[key])
    _check_cases(data.get("cases"))
    return data


def _check_cases(cases: Any) -> None:
    if cases is None:
        return
    if not isinstance(cases, list):
        raise ResultError("result.json: cases is not a list")
    for case in cases:
        if not isinstance(case, dict) or not isinstance(case.get("case"), str):
            raise ResultError(f"result.json: a case without a name: {case!r}")
        name, value = case["case"], case.get("metric")
        if case.get("outcome") not in ("good", "bad", "skip", "infra"):
            raise ResultError(f"result.json: case {name}: outcome {case.get('outcome')!r} is not a verdict")
        number = isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)
        if value is not None and not number:
            raise ResultError(f"result.json: case {case['case']}: metric {value!r} is not a finite number")
        if not isinstance(case.get("why"), (str, type(None))):
            raise ResultError(f"result.json: case {case['case']}: why is not text")
        if case.get("failure") not in (None, *FAILURES):
            said = f"failure {case.get('failure')!r} is not {' or '.join(FAILURES)}"
            raise ResultError(f"result.json: case {name}: {said}")


def _time(text: str) -> datetime:
    try:
        return datetime.fromisoformat(text)
    except ValueError:
        raise ResultError(f"result.json: {text!r} is not an ISO 8601 time") from None
