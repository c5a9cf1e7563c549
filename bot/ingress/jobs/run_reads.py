"""What the nightly job reads of a watched workflow's runs, through the CiReads port, and no more than it needs.

- The red run: the logs of its newest attempt's failed jobs only (a test that failed ran in a failed job), and the
  JUnit / metrics artifacts the policy names.
- A test's history: the earlier runs newest first (bot.domain.scope.earlier_runs: the same workflow, event, branch,
  from this repository, at most `watch.history`); in each, the jobs of its newest attempt are listed (one request
  a page) and a job's log is downloaded only when the job could have run the test (bot.domain.signals.fetchable:
  `tests[].jobs`, and never a skipped or cancelled job), the job the test failed in on the red run first (the
  same suite partition, usually); the first job whose log has the test speaks for the run, and the walk stops at
  the first run in which the test passed: GOOD. So a run costs one jobs list and, typically, one log.
- The earlier attempts of a re-run: their failed jobs' logs, for the tests that failed there and not in the
  final attempt (flakes).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass, field

from bot.domain.ci_results import FailedTest, Results, combine, failed_tests, for_name, read_artifacts, read_job
from bot.domain.errors import RevertBisectError
from bot.domain.joblog import plain
from bot.domain.policy import Policy, Test, Watch
from bot.domain.scope import RunInfo, earlier_runs
from bot.domain.signals import JobInfo, Outcome, Reading, Signal, fetchable, latest_jobs, may_run
from bot.domain.suite_log import parse
from bot.ports import CiReads

log = logging.getLogger("revert_bisect.nightly")


@dataclass
class RedRun:
    """The final attempt's failed jobs, their logs (undone of GitHub's decorations) and the run's artifacts."""

    run: RunInfo
    results: Results
    logs: dict[str, str] = field(default_factory=dict)  # job name -> plain log
    jobs: list[JobInfo] = field(default_factory=list)


def artifacts(ci: CiReads, policy: Policy, run_id: int) -> tuple[tuple[str, ...], dict | None]:
    """The run's JUnit documents and metrics JSON, when the policy names those artifacts and the run has them."""
    junit: tuple[str, ...] = ()
    metrics = None
    if policy.results.junit_artifact:
        files = ci.run_artifact(run_id, policy.results.junit_artifact)
        junit = tuple(data.decode(errors="replace") for name, data in files.items() if name.endswith(".xml"))
    if policy.results.metrics_artifact:
        files = ci.run_artifact(run_id, policy.results.metrics_artifact)
        found = next((data for name, data in files.items() if name.endswith(".json")), None)
        try:
            metrics = json.loads(found) if found else None
        except ValueError:
            log.warning("run %s: the %s artifact is not JSON; using the log", run_id, policy.results.metrics_artifact)
    return junit, metrics


def _could_run_any(policy: Policy, job: JobInfo) -> bool:
    return any(fetchable(test, job) is None for test in policy.tests)


def failed_job_logs(ci: CiReads, policy: Policy, jobs: Iterable[JobInfo]) -> dict[str, str]:
    logs = {}
    for job in jobs:
        if job.conclusion in ("failure", "timed_out") and _could_run_any(policy, job):
            text = ci.job_log(job.id)
            if text is not None:
                logs[job.name] = plain(text)
    return logs


def red_run(ci: CiReads, policy: Policy, run: RunInfo) -> RedRun:
    jobs = latest_jobs(ci.run_jobs(run.id))
    logs = failed_job_logs(ci, policy, jobs)
    junit, metrics = artifacts(ci, policy, run.id)
    return RedRun(run, Results("\n".join(logs.values()), junit, metrics), logs, jobs)


def failed_in(policy: Policy, test: Test, red: RedRun) -> str | None:
    """The job the test failed in on the red run (its history is read from the job of that name first)."""
    for name, text in red.logs.items():
        job = next((j for j in red.jobs if j.name == name), None)
        if job is not None and read_job(policy, test, text, job).outcome is Outcome.FAILED:
            return name
    return None


def retried_passed(policy: Policy, logs: Iterable[str]) -> list[Test]:
    """Watched tests the suite runner retried in these logs and that then passed (↻ RETRIED: ... passed)."""
    return _retried(policy, logs, "passed")


def retried_failed(policy: Policy, logs: Iterable[str]) -> list[Test]:
    """Watched tests the suite runner retried in these logs and that failed again (↻ RETRIED: ... failed): the
    failure reproduced by the suite's own retry, with the same verdict."""
    return _retried(policy, logs, "failed")


def _retried(policy: Policy, logs: Iterable[str], result: str) -> list[Test]:
    files = [r.file for text in logs for r in parse(text).retried if r.result == result]
    found = (for_name(test, name) for test in policy.tests for name in files)
    return list({t.id: t for t in found if t is not None}.values())


def signal_in(ci: CiReads, policy: Policy, test: Test, run: RunInfo, first: str | None) -> Signal:
    """The test's word in one earlier run (see the module's docstring for what is downloaded)."""
    readings: list[Reading] = []
    if policy.results.junit_artifact or policy.results.metrics_artifact:
        found = read_artifacts(test, *artifacts(ci, policy, run.id))
        if found is not None:
            return Signal(run.id, run.head_sha, found.outcome, found.why, found.metric, run.url)
    jobs = sorted(latest_jobs(ci.run_jobs(run.id)), key=lambda j: j.name != first)
    for job in jobs:
        why = fetchable(test, job)
        if why is not None:
            if may_run(test, job):  # a job that could have run it did not: said; another job: not even that
                readings.append(Reading(Outcome.NONE, why))
            continue
        try:
            text = ci.job_log(job.id)
        except RevertBisectError as exc:  # the download keeps failing: this run says nothing
            readings.append(Reading(Outcome.NONE, f"the log of job {job.name!r} could not be read: {exc}"))
            continue
        if text is None:
            readings.append(Reading(Outcome.NONE, f"the log of job {job.name!r} expired"))
            continue
        reading = read_job(policy, test, plain(text), job)
        readings.append(reading)
        if reading.outcome is not Outcome.NONE:
            break  # a test runs in one job of a run (its suite partition): that job speaks for the run
    found = combine(readings, none_why="no job of it could run the test")
    return Signal(run.id, run.head_sha, found.outcome, found.why, found.metric, run.url)


def history(
    ci: CiReads,
    policy: Policy,
    watch: Watch,
    red: RunInfo,
    test: Test,
    workflow: int | str,
    first_job: str | None = None,
) -> list[Signal]:
    """The test's signals in the earlier runs, newest first, up to and including the first run it passed in."""
    # newest first from now: runs newer than the red one (it may be scoped hours later, after its re-runs) come too
    listed = ci.workflow_runs(workflow, red.head_branch, list(watch.events), 2 * watch.history + 10)
    runs = earlier_runs(policy, watch, red, listed)
    out = []
    for run in runs:
        signal = signal_in(ci, policy, test, run, first_job)
        log.info("run %s (%s): %s %s -- %s", run.id, run.head_sha[:12], test.id, signal.outcome, signal.why)
        out.append(signal)
        if signal.outcome is Outcome.PASSED:
            break
    return out


def failed_before(ci: CiReads, policy: Policy, run: RunInfo) -> list[tuple[FailedTest, str]]:
    """Watched tests that failed in the run's earlier attempts, once each, with the job they failed in (read from
    those attempts' failed jobs' logs)."""
    seen: dict[str, tuple[FailedTest, str]] = {}
    for attempt in range(1, run.run_attempt):
        jobs = ci.run_jobs(run.id, attempt)
        for name, text in failed_job_logs(ci, policy, jobs).items():
            for failure in failed_tests(policy, Results(text)):
                seen.setdefault(failure.test.id, (failure, name))
    return list(seen.values())


def passed_now(ci: CiReads, policy: Policy, test: Test, jobs: list[JobInfo], logs: dict[str, str], name: str) -> bool:
    """Did the test pass in the final attempt's job `name`, where it failed before? Its log says so, or, when the
    log has no word on the test, the job that failed it now succeeded."""
    job = next((j for j in jobs if j.name == name), None)
    if job is None or job.status != "completed" or job.conclusion not in ("success", "failure"):
        return False
    text = logs.get(name)
    if text is None:
        raw = ci.job_log(job.id)
        if raw is None:
            return False
        text = plain(raw)
    reading = read_job(policy, test, text, job)
    return reading.outcome is Outcome.PASSED or (reading.outcome is Outcome.NONE and job.conclusion == "success")
