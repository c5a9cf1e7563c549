"""Reading a metric a test reported: a regex over its output, or the result file it wrote."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Sequence
from pathlib import Path

from runners.spec import CaseResult, NamedMetric

NO_METRIC = "no metric: "  # the step log's line naming why a run that exited 0 reported none


class MetricError(ValueError):
    pass


def compile_metric_regex(pattern: str) -> re.Pattern[str]:
    """Compile --metric-regex; the value is the group named `value`, else the first group, else the match."""
    try:
        return re.compile(pattern)
    except re.error as exc:
        raise MetricError(f"--metric-regex {pattern!r} is not a valid regular expression: {exc}") from exc


def metric_from_output(text: str, regex: re.Pattern[str]) -> float | None:
    """The last value the regex matches in the output, or None."""
    value = None
    for match in regex.finditer(text):
        if "value" in regex.groupindex:
            raw = match.group("value")
        elif regex.groups:
            raw = match.group(1)
        else:
            raw = match.group(0)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
    return value if value is None or math.isfinite(value) else None


def metric_from_file(path: Path) -> float | None:
    """{"metric": <float>} written by the test at REVERT_BISECT_RESULT, or None when absent or malformed."""
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return None
    value = data.get("metric") if isinstance(data, dict) else None
    if isinstance(value, dict):  # the runner's result.json shape: {"metric": {"value": ...}}
        value = value.get("value")
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        return None
    return float(value)


def _last_line(text: str) -> str:
    lines = [line for line in text.splitlines() if line.strip()]
    return repr(lines[-1][-160:]) if lines else "nothing"


def why_no_metric(text: str, regex: re.Pattern[str] | None, path: Path) -> str:
    """Why a run that exited 0 reported no metric: what was expected and what came (an infra result, never a
    verdict: a benchmark that printed nothing says nothing about the commit)."""
    if regex is None:
        try:
            raw = path.read_text(errors="replace").strip()
        except OSError:
            return f'the test exited 0 without writing {{"metric": <number>}} to $REVERT_BISECT_RESULT ({path})'
        return f'$REVERT_BISECT_RESULT holds {raw[:160]!r}, not {{"metric": <number>}}'
    found = [m.group(0) for m in regex.finditer(text)]
    if found:
        return f"--metric-regex {regex.pattern!r} matched {found[-1][:160]!r}, whose value is not a finite number"
    return f"--metric-regex {regex.pattern!r} matched nothing in the output; its last line: {_last_line(text)}"


def metric_cases(
    metrics: Sequence[NamedMetric], output: str, code: int | None, infra: str | None
) -> tuple[CaseResult, ...]:
    """A case per metric of one run (its name, its last reading in `output`), each as the run alone read for that
    metric would be judged: `good` when the run exited 0, `bad` when it failed (1..124: a crash reads no metric either,
    and counts as bad as a whole step's would), a `skip` naming why when a run that exited 0 printed no reading of it.
    No case for a run that said nothing of any (infrastructure, exit 125 or >= 128): its exit code speaks for every
    metric, as for a step whose report was not read."""
    if infra is not None or code is None or code < 0 or code == 125 or code >= 128:
        return ()
    cases = []
    for m in metrics:
        regex = compile_metric_regex(m.regex)
        value = metric_from_output(output, regex)
        if value is None and code == 0:
            cases.append(CaseResult(m.name, "skip", None, f"{NO_METRIC}{why_no_metric(output, regex, Path())}"))
        else:
            cases.append(CaseResult(m.name, "good" if code == 0 else "bad", value))
    return tuple(cases)
