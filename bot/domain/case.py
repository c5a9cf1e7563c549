"""The case for a revert, point by point as a maintainer writes it (SGLang's #31622 is the model): the failing
assertion as the log printed it, since which scheduled run the test fails, whether every retry read the same, the
window, and why this commit -- what it changes that no other commit of the window touches. Pure: facts in, facts out;
the revert PR's template words them."""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from bot.domain.requests import CiReading

# the line a failing check prints: `AssertionError: avg_kl_div=0.006489 > threshold=0.002 for ...`, or a bare
# `<metric>=<v> > threshold=<t>` (SGLang's compare_kl_divergence), or a test runner's `FAIL:` line
ASSERTION = re.compile(r"^.*(?:AssertionError\b.*|\b\w+=\S+ [<>]=? ?threshold=\S+.*)$", re.M)
TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d+)?Z ")


def assertion_line(logs: Iterable[str | None], prefer: str | None = None) -> str | None:
    """The first failing check's line in the first log that has one, its timestamp taken off; of a log's lines, the
    first that says `prefer` (the reading the run reported: a file of several failing cases prints several)."""
    for log in logs:
        lines = [TIMESTAMP.sub("", m.group(0).strip()) for m in ASSERTION.finditer(log or "")]
        lines = [line for line in lines if line]
        if lines:
            return next((line for line in lines if prefer and prefer in line), lines[0])[:500]
    return None


@dataclass(frozen=True)
class Spread:
    """How a commit's failing runs read: `same` when every one read the same value (deterministic, not a flake)."""

    runs: int
    low: float | None
    high: float | None

    @property
    def same(self) -> bool:
        return self.runs > 1 and self.low is not None and f"{self.low:.6g}" == f"{self.high:.6g}"


def spread(values: Sequence[float | None]) -> Spread:
    known = [v for v in values if v is not None]
    return Spread(len(values), min(known) if known else None, max(known) if known else None)


def red_since(readings: Sequence[CiReading]) -> tuple[CiReading | None, list[CiReading]]:
    """CI's readings of the test, oldest first (as judged): the last run that passed and the runs that failed after
    it (the first of them: since when it fails)."""
    last_pass = max((i for i, r in enumerate(readings) if r.passed), default=-1)
    green = readings[last_pass] if last_pass >= 0 else None
    return green, [r for r in readings[last_pass + 1 :] if not r.passed]


@dataclass(frozen=True)
class Overlap:
    """What the culprit changes (file -> definitions) and which other commits of the window touch those files, with
    the definitions they share with it."""

    changed: Mapping[str, frozenset[str]]
    others: Mapping[str, Mapping[str, frozenset[str]]]  # sha -> file -> definitions it shares with the culprit

    @property
    def rivals(self) -> dict[str, dict[str, frozenset[str]]]:
        """The other commits that change a function the culprit changes: sha -> file -> those functions."""
        out = {sha: {f: d for f, d in files.items() if d} for sha, files in self.others.items()}
        return {sha: files for sha, files in out.items() if files}

    @property
    def alone_in_functions(self) -> bool:
        """No other commit of the window changes a function the culprit changes."""
        return not self.rivals

    @property
    def alone_in_files(self) -> bool:
        return not self.others


def overlap(
    culprit: str, changed: Mapping[str, frozenset[str]], window: Mapping[str, Mapping[str, frozenset[str]]]
) -> Overlap:
    """The culprit's changes against the window's other commits' (sha -> file -> definitions changed)."""
    others: dict[str, dict[str, frozenset[str]]] = {}
    for sha, files in window.items():
        if sha == culprit:
            continue
        shared = {f: frozenset(defs & changed[f]) for f, defs in files.items() if f in changed}
        if shared:
            others[sha] = shared
    return Overlap(dict(changed), others)
