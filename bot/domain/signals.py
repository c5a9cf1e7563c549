"""What a run says about one test: passed, failed (with its metric when printed), or no signal.

A scheduled run of a big workflow (SGLang's PR Test Base: dozens of jobs, suite partitions) almost never succeeds as
a whole, so "the last good run" of a test is the newest earlier run in which *that test* ran and passed, read here
from the jobs that ran it:

- a job that was skipped or cancelled, or did not finish, gives no signal; nor does a job the policy says cannot run
  the test (`tests[].jobs`, a regex over job names): its log is never downloaded (`fetchable`);
- a job's log is read for the test (`read_job`): SGLang's run_suite report first (the TIMINGS block, which holds the
  result after the runner's own retry, else the PASSED / FAILED sections, bot.domain.suite_log), else the policy's
  `results.log.failed` regex; a job named by `tests[].jobs` whose log has no per-test report speaks for the test by
  its conclusion; otherwise the test did not run there: no signal;
- a run's JUnit or metrics artifact, when the policy names one and the run has it, is read instead (`read_artifacts`);
- one run's readings combine (`combine`): a failure anywhere is a failure, else a pass, else no signal.

The metric comes from the test's own output in the log (run_suite's Begin/End frame around the file), matched with
`results.log.metric`. `retried_passed`: run_suite retried the file and it then passed -- a flake, which the caller
records and does not bisect. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum
from xml.etree import ElementTree

from bot.domain.cases import failures
from bot.domain.policy import Direction, Policy, Test
from bot.domain.suite_log import parse


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    NONE = "no signal"


@dataclass(frozen=True)
class JobInfo:
    """One job of a run attempt, as GitHub lists it (GET .../runs/{id}/jobs, .../attempts/{n}/jobs)."""

    id: int
    name: str
    status: str  # queued | in_progress | completed | ...
    conclusion: str | None  # success | failure | cancelled | skipped | timed_out | ...
    run_attempt: int = 1


@dataclass(frozen=True)
class Reading:
    """What one job (or one run's artifacts) says of one test."""

    outcome: Outcome
    why: str
    metric: float | None = None
    retried_passed: bool = False  # the suite runner's own retry passed it: a flake
    job: str | None = None


@dataclass(frozen=True)
class Signal:
    """One earlier run's word on a test, for the history and for CI evidence inside the range."""

    run_id: int
    sha: str
    outcome: Outcome
    why: str
    metric: float | None = None
    url: str = ""


@dataclass(frozen=True)
class Flake:
    """A test that failed and then passed on the same commit (a re-run attempt, or the suite runner's own retry):
    not bisected, counted in the trust report."""

    repository: str
    test: str
    run_id: int
    sha: str
    how: str
    url: str = ""


NOT_RUN = {"skipped", "cancelled"}


def named(test: Test, name: str) -> bool:
    return re.search(test.match, name) is not None


def may_run(test: Test, job: JobInfo) -> bool:
    """Is this a job the test can run in (`tests[].jobs`; any job when unset)?"""
    return test.jobs is None or re.search(test.jobs, job.name) is not None


def fetchable(test: Test, job: JobInfo) -> str | None:
    """None when the job's log may hold the test's result (then it is downloaded); else why it cannot."""
    if not may_run(test, job):
        return f"job {job.name!r} does not run {test.id} (`tests[].jobs`)"
    if job.status != "completed":
        return f"job {job.name!r} did not finish ({job.status})"
    if job.conclusion in NOT_RUN:
        return f"job {job.name!r} was {job.conclusion}"
    return None


def latest_jobs(jobs: Iterable[JobInfo]) -> list[JobInfo]:
    """Each job's newest execution (a re-run of failed jobs runs them again under a new run_attempt)."""
    newest: dict[str, JobInfo] = {}
    for job in jobs:
        if job.name not in newest or job.run_attempt >= newest[job.name].run_attempt:
            newest[job.name] = job
    return list(newest.values())


def _metric(policy: Policy, text: str) -> float | None:
    pattern = policy.results.log.metric
    found = list(re.finditer(pattern, text)) if pattern else []
    try:
        return float(found[-1].group("value")) if found else None
    except (IndexError, ValueError):
        return None


def read_job(policy: Policy, test: Test, log: str, job: JobInfo) -> Reading:
    """The test's result in one job's log, the log already undone of GitHub's decorations (joblog.plain)."""
    report = parse(log)
    where = f"job {job.name!r}"
    output = next((text for file, text in report.outputs.items() if named(test, file)), None)
    retried = any(named(test, r.file) and r.result == "passed" for r in report.retried)
    timings = [t for t in report.timings if named(test, t.file)]
    passed: bool | None
    if timings:
        passed = timings[-1].passed
    elif any(named(test, file) for file, _ in report.failed):
        passed = False
    elif any(named(test, file) for file in report.passed):
        passed = True
    elif report.listed:
        passed = None  # run_suite listed what it ran, and this test is not among it (another partition's)
    else:
        pattern = policy.results.log.failed
        names = [m.group("test") for m in re.finditer(pattern, log)] if pattern else []
        if any(named(test, n) for n in names):
            passed = False
        elif test.jobs is not None and job.conclusion in ("success", "failure"):
            passed = job.conclusion == "success"
            where += f" ({job.conclusion}, no per-test report)"
        else:
            passed = None
    if passed is None:
        return Reading(Outcome.NONE, f"{test.id} did not run in {where}", job=job.name)
    metric = None
    if output is not None and not passed:  # the failing case's own reading (its unittest report), not the file's last
        metric = next((m for f in failures(output) if (m := _metric(policy, f.block)) is not None), None)
    if metric is None and output is not None:
        metric = _metric(policy, output)
    if metric is None and not passed and output is None:
        metric = _metric(policy, log)
    outcome = Outcome.PASSED if passed else Outcome.FAILED
    return Reading(outcome, f"{outcome} in {where}", metric, retried and passed, job.name)


def _junit(test: Test, documents: Sequence[str]) -> bool | None:
    verdict = None
    for text in documents:
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            full = f"{case.get('classname')}.{name}" if case.get("classname") else name
            if not any(named(test, n) for n in (full, case.get("classname") or "", name)):
                continue
            if case.find("skipped") is not None:
                continue
            failed = case.find("failure") is not None or case.find("error") is not None
            verdict = False if failed else verdict if verdict is False else True
    return verdict


def read_artifacts(test: Test, junit: Sequence[str], metrics: dict | None) -> Reading | None:
    """The test's result in a run's JUnit documents, else its metrics JSON ({"metric": {"value", "threshold"}});
    None when neither speaks of it."""
    verdict = _junit(test, junit)
    metric = (metrics or {}).get("metric")
    value = metric.get("value") if isinstance(metric, dict) else None
    value = float(value) if isinstance(value, (int, float)) else None
    if verdict is not None:
        outcome = Outcome.PASSED if verdict else Outcome.FAILED
        return Reading(outcome, f"{outcome} in the run's JUnit report", value)
    if value is not None and test.metric is not None:
        threshold = metric.get("threshold") if isinstance(metric, dict) else None
        limit = float(threshold) if isinstance(threshold, (int, float)) else test.metric.threshold
        worse = value > limit if test.metric.direction is Direction.HIGHER_IS_WORSE else value < limit
        outcome = Outcome.FAILED if worse else Outcome.PASSED
        return Reading(outcome, f"{outcome} in the run's metrics ({test.metric.name}={value:g})", value)
    return None


def combine(readings: Sequence[Reading], none_why: str = "no job ran it") -> Reading:
    """One run's word on the test from its jobs' readings: a failure anywhere, else a pass, else no signal."""
    for outcome in (Outcome.FAILED, Outcome.PASSED):
        found = [r for r in readings if r.outcome is outcome]
        if found:
            return found[0]
    whys = "; ".join(dict.fromkeys(r.why for r in readings)) or none_why
    return Reading(Outcome.NONE, whys)


def good(signals: Sequence[Signal]) -> Signal | None:
    """The newest run (signals newest first) in which the test ran and passed."""
    return next((s for s in signals if s.outcome is Outcome.PASSED), None)
