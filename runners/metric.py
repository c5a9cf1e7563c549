"""Reading a metric a test reported: a regex over its output, or the result file it wrote."""

from __future__ import annotations

import json
import math
import re
from pathlib import Path


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
