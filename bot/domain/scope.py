"""Scoping a red scheduled run: which watched tests failed, with which metric, over which commit range.

Pure: the caller fetches the run, its log (or results) and the workflow's earlier runs; this
module decides. A failure it cannot scope says why, so it is reported instead of dropped.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from xml.etree import ElementTree

from bot.domain.joblog import plain
from bot.domain.policy import Policy, Test, Watch


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
        same = watch.workflow in (run.workflow_name, run.workflow_path) or run.workflow_path.endswith(
            "/" + watch.workflow
        )
        if same and run.head_branch == watch.branch and run.event in watch.events:
            return watch
    return None


@dataclass(frozen=True)
class Results:
    """What a run left behind: its log, and the artifacts the policy names when the run has them.

    The log is kept as the policy's regexes read it: GitHub's per-line timestamps and `##[...]` markers
    are taken off once, here (bot.domain.joblog.plain), before any regex sees it."""

    log: str
    junit: tuple[str, ...] = ()  # JUnit XML documents
    metrics: dict | None = None  # a metrics JSON: {"metric": {"name", "value", "threshold"}}

    def __post_init__(self) -> None:
        object.__setattr__(self, "log", plain(self.log))


def _results(results: Results | str) -> Results:
    return Results(results) if isinstance(results, str) else results


def junit_failures(documents: Sequence[str]) -> list[str]:
    """`classname.name` (and `name`) of every testcase with a <failure> or <error>."""
    names = []
    for text in documents:
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError:
            continue
        for case in root.iter("testcase"):
            if case.find("failure") is not None or case.find("error") is not None:
                name = case.get("name", "")
                names.append(f"{case.get('classname')}.{name}" if case.get("classname") else name)
    return names


def _metric_from_json(data: dict | None) -> dict | None:
    metric = (data or {}).get("metric")
    if isinstance(metric, dict) and isinstance(metric.get("value"), (int, float)):
        return {"value": metric["value"], "threshold": metric.get("threshold")}
    return None


def failed_tests(policy: Policy, results: Results | str) -> list[FailedTest]:
    """Watched tests that failed (JUnit when the run has it, else the log), each with its metric
    reading (the metrics artifact when present, else the log's last match)."""
    results = _results(results)
    log = results.log
    patterns = policy.results.log
    if results.junit:
        names = junit_failures(results.junit)
    else:
        names = [m.group("test") for m in re.finditer(patterns.failed, log)] if patterns.failed else []
    readings = [m.groupdict() for m in re.finditer(patterns.metric, log)] if patterns.metric else []
    if (artifact := _metric_from_json(results.metrics)) is not None:
        readings = [artifact]
    out = []
    for name in dict.fromkeys(names):
        for test in policy.tests:
            if re.search(test.match, name):
                value = threshold = None
                if test.metric and readings:
                    value = float(readings[-1]["value"])
                    threshold = (
                        float(readings[-1]["threshold"])
                        if readings[-1].get("threshold") is not None
                        else test.metric.threshold
                    )
                out.append(FailedTest(test, name, value, threshold))
                break
    return out


def _summary(policy: Policy, results: Results | str) -> re.Match | None:
    log = _results(results).log
    matches = list(re.finditer(policy.results.log.summary, log)) if policy.results.log.summary else []
    return matches[-1] if matches else None


def died_before_summary(policy: Policy, run: RunInfo, results: Results | str) -> str | None:
    """A red run whose log (JUnit aside) lacks the `results.log.summary` line never finished its suite: the job
    died (runner lost, OOM, setup step, timeout), which is reported as such, not scoped as a test failure."""
    results = _results(results)
    if not policy.results.log.summary or results.junit or _summary(policy, results):
        return None
    return (
        f"run {run.id} failed before its test summary (no line matches `results.log.summary`): the job died, "
        "it did not report a test failure; nothing to bisect"
    )


def suite_tally(policy: Policy, results: Results | str) -> str:
    """` (the suite ran: N of M tests failed)`, from the summary line's `passed` and `total`, when it has them."""
    found = _summary(policy, results)
    groups = found.groupdict() if found else {}
    if not (groups.get("passed") or "").isdigit() or not (groups.get("total") or "").isdigit():
        return ""
    return f" (the suite ran: {int(groups['total']) - int(groups['passed'])} of {groups['total']} tests failed)"


def last_green(history: Sequence[RunInfo], failing: RunInfo) -> RunInfo | None:
    """The newest earlier run of the same workflow and branch that succeeded (history newest first)."""
    for run in history:
        if (
            run.id != failing.id
            and run.id < failing.id
            and run.conclusion == "success"
            and run.head_branch == failing.head_branch
        ):
            return run
    return None


def scope(policy: Policy, run: RunInfo, results: Results | str, history: Sequence[RunInfo]) -> list[Scoped] | Unscoped:
    if run.conclusion != "failure":
        return Unscoped(f"run {run.id} concluded {run.conclusion}: nothing to bisect")
    results = _results(results)  # the log's GitHub decorations taken off, once
    if watched(policy, run) is None:
        return Unscoped(
            f"run {run.id} ({run.workflow_name or run.workflow_path} on {run.head_branch}, {run.event}) "
            "is not watched by the policy"
        )
    if died := died_before_summary(policy, run, results):
        return Unscoped(died)
    failures = failed_tests(policy, results)
    if not failures:
        return Unscoped(
            f"run {run.id} failed{suite_tally(policy, results)}, but its log names none of the watched tests "
            f"({', '.join(t.id for t in policy.tests)})"
        )
    green = last_green(history, run)
    if green is None:
        return Unscoped(
            f"run {run.id} failed, but no earlier green run of this workflow on {run.head_branch} is known: "
            "start one by hand with `/revert-bisect <test> good=<sha>`"
        )
    if green.head_sha == run.head_sha:
        return Unscoped(
            f"run {run.id} failed on {run.head_sha[:12]}, where run {green.id} passed: a flake, not a regression"
        )
    return [Scoped(f, green.head_sha, run.head_sha, green.id, run.id) for f in failures]
