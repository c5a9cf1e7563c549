"""Reading a metric a test reported: a regex over its output, or the result file it wrote."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path

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
