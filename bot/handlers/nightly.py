"""Scoping a red scheduled run: which watched tests failed, with which metric, over which commit range.

Pure: the caller fetches the run, its log (or results) and the workflow's earlier runs; this
module decides. A failure it cannot scope says why, so it is reported instead of dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.policy.schema import Policy, Test, Watch


@dataclass(frozen=True)
class RunInfo:
    id: int
    workflow_name: str
    workflow_path: str
    head_branch: str
    head_sha: str
    event: str
    conclusion: str | None


@dataclass(frozen=True)
class FailedTest:
    test: Test
    name: str  # as the log spells it
    metric: float | None = None
    threshold: float | None = None


@dataclass(frozen=True)
class Scoped:
    test: FailedTest
    good: str
    bad: str
    good_run: int
    bad_run: int


@dataclass(frozen=True)
class Unscoped:
    reason: str


def watched(policy: Policy, run: RunInfo) -> Watch | None:
    """The policy's watch entry for this run, if the run is one the policy cares about."""
    for watch in policy.watch:
        same = watch.workflow in (run.workflow_name, run.workflow_path) or run.workflow_path.endswith("/" + watch.workflow)
        if same and run.head_branch == watch.branch and run.event in watch.events:
            return watch
    return None


def failed_tests(policy: Policy, log: str) -> list[FailedTest]:
    """Watched tests named as failed in the log, each with the metric reading near it if any."""
    patterns = policy.results.log
    names = [m.group("test") for m in re.finditer(patterns.failed, log)] if patterns.failed else []
    readings = [m.groupdict() for m in re.finditer(patterns.metric, log)] if patterns.metric else []
    out = []
    for name in dict.fromkeys(names):
        for test in policy.tests:
            if re.search(test.match, name):
                value = threshold = None
                if test.metric and readings:
                    value = float(readings[-1]["value"])
                    threshold = float(readings[-1]["threshold"]) if readings[-1].get("threshold") else test.metric.threshold
                out.append(FailedTest(test, name, value, threshold))
                break
    return out


def last_green(history: Sequence[RunInfo], failing: RunInfo) -> RunInfo | None:
    """The newest earlier run of the same workflow and branch that succeeded (history newest first)."""
    for run in history:
        if run.id != failing.id and run.id < failing.id and run.conclusion == "success" and run.head_branch == failing.head_branch:
            return run
    return None


def scope(policy: Policy, run: RunInfo, log: str, history: Sequence[RunInfo]) -> list[Scoped] | Unscoped:
    if run.conclusion != "failure":
        return Unscoped(f"run {run.id} concluded {run.conclusion}: nothing to bisect")
    if watched(policy, run) is None:
        return Unscoped(f"run {run.id} ({run.workflow_name or run.workflow_path} on {run.head_branch}, {run.event}) is not watched by the policy")
    failures = failed_tests(policy, log)
    if not failures:
        return Unscoped(f"run {run.id} failed, but its log names none of the watched tests ({', '.join(t.id for t in policy.tests)})")
    green = last_green(history, run)
    if green is None:
        return Unscoped(f"run {run.id} failed, but no earlier green run of this workflow on {run.head_branch} is known: start one by hand with `/revert-bisect <test> good=<sha>`")
    if green.head_sha == run.head_sha:
        return Unscoped(f"run {run.id} failed on {run.head_sha[:12]}, where run {green.id} passed: a flake, not a regression")
    return [Scoped(f, green.head_sha, run.head_sha, green.id, run.id) for f in failures]
