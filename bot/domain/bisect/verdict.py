"""What one test run says about one commit: `git bisect run` exit codes, or a metric."""

from __future__ import annotations

import enum
import math
import statistics
from dataclasses import dataclass

SKIP_EXIT = 125
INFRA_EXIT_MIN = 128


class Verdict(str, enum.Enum):
    GOOD = "good"
    BAD = "bad"
    SKIP = "skip"
    INFRA = "infra"

    # GOOD or BAD: a plain attribute (set below), not a property, as a simulation asks it millions of times
    is_evidence: bool


for _verdict in Verdict:
    _verdict.is_evidence = _verdict in (Verdict.GOOD, Verdict.BAD)


@dataclass(frozen=True)
class RawResult:
    """The facts a runner reports, before any interpretation."""

    exit_code: int | None
    metric: float | None = None
    infra_reason: str | None = None  # timeout, lost runner, ... (never evidence)


def verdict_from_exit(exit_code: int | None) -> Verdict:
    """Map an exit code exactly as `git bisect run` does; None means no exit code at all."""
    if exit_code is None or exit_code < 0 or exit_code >= INFRA_EXIT_MIN:
        return Verdict.INFRA
    if exit_code == 0:
        return Verdict.GOOD
    if exit_code == SKIP_EXIT:
        return Verdict.SKIP
    return Verdict.BAD


@dataclass(frozen=True)
class MetricRule:
    """How a metric decides a verdict: a CI threshold and which way is worse."""

    threshold: float | None = None
    higher_is_worse: bool = True

    def worse(self, value: float, than: float) -> bool:
        return value > than if self.higher_is_worse else value < than

    def _oriented(self, values: list[float]) -> list[float]:
        return [v if self.higher_is_worse else -v for v in values]

    def boundary(self, good: list[float], bad: list[float]) -> float | None:
        """The value separating the calibrated GOOD and BAD readings, or None if BAD is not worse.

        When the endpoint readings separate, the middle of the gap is used rather than the CI
        threshold, so a commit is classed with the endpoint it resembles; otherwise the CI
        threshold, otherwise the midpoint of the means. For positive readings the middle is the
        geometric one, between GOOD's and BAD's readings nearest each other: metrics such as a KL
        divergence vary by factors, and the cut is then the same factor from both sides (the plain
        midpoint of 0.0004 and 0.0078 is 0.0041, 10 times GOOD's reading but about half BAD's, so
        a broken commit reading 0.004 -- inside the real incident's range -- would pass for good;
        the geometric one is 0.0018).
        """
        if not good or not bad:
            return self.threshold
        sign = 1.0 if self.higher_is_worse else -1.0
        g, b = self._oriented(good), self._oriented(bad)
        if max(g) < min(b):
            near_good, near_bad = (max(good), min(bad)) if self.higher_is_worse else (min(good), max(bad))
            if near_good > 0 and near_bad > 0:
                return math.sqrt(near_good * near_bad)
            return sign * (max(g) + min(b)) / 2
        if self.threshold is not None:
            return self.threshold
        if statistics.fmean(b) > statistics.fmean(g):
            return sign * (statistics.fmean(g) + statistics.fmean(b)) / 2
        return None


def classify(raw: RawResult, rule: MetricRule | None, boundary: float | None) -> Verdict:
    """The verdict of one run; with a metric rule the metric decides, not the exit code.

    Skip (125) and infra (>= 128, timeout, lost runner) keep their meaning in metric mode. A
    run that exits 0 without reporting the metric cannot be judged and counts as a skip; one
    that exits 1..127 without a metric crashed and counts as bad.
    """
    if raw.infra_reason is not None:
        return Verdict.INFRA
    by_exit = verdict_from_exit(raw.exit_code)
    if rule is None or by_exit in (Verdict.SKIP, Verdict.INFRA):
        return by_exit
    if raw.metric is None:
        return Verdict.SKIP if by_exit is Verdict.GOOD else by_exit
    cut = boundary if boundary is not None else rule.threshold
    if cut is None:
        return by_exit
    return Verdict.BAD if rule.worse(raw.metric, cut) else Verdict.GOOD
