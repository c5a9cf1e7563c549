"""The two sides of a change point, as the series' page draws them: each side's readings (those the change's effect
was measured on: bot.domain.perf.changes), their mean and its interval (Student's t at the stated confidence). Pure.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from bot.domain.bisect.stats import t_quantile  # scipy.special's, not scipy.stats' (0.5 s to import)
from bot.domain.perf.changes import Change


@dataclass(frozen=True)
class Side:
    """Runs `first`..`last` (positions in the caller's series, both included), the `runs` readings among them, their
    mean and its two-sided interval."""

    first: int
    last: int
    runs: int
    mean: float
    low: float
    high: float


def _valid(value: float | None) -> bool:
    return value is not None and math.isfinite(value)


def side(values: Sequence[float | None], positions: Sequence[int], confidence: float) -> Side:
    readings = np.array([values[i] for i in positions], dtype=np.float64)
    mean = float(np.mean(readings))
    if len(readings) < 2:
        return Side(positions[0], positions[-1], len(readings), mean, mean, mean)
    half = t_quantile(0.5 + confidence / 2, len(readings) - 1) * float(
        np.std(readings, ddof=1) / math.sqrt(len(readings))
    )
    return Side(positions[0], positions[-1], len(readings), mean, mean - half, mean + half)


def sides(values: Sequence[float | None], change: Change, confidence: float = 0.95) -> tuple[Side, Side]:
    """The change's side before (its `runs_before` readings up to run `change.before`) and after (its `runs_after`
    readings from run `change.index`), in the series `values` it was found in (None: no reading)."""
    runs = [i for i, v in enumerate(values) if _valid(v)]
    at = runs.index(change.index)
    before = runs[at - change.runs_before : at]
    after = runs[at : at + change.runs_after]
    return side(values, before, confidence), side(values, after, confidence)
