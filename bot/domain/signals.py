"""What a run says about one test, as values: passed, failed (with its metric when printed), or no signal; and which
of a run's jobs may say it.

A scheduled run of a big workflow (SGLang's PR Test Base: dozens of jobs, suite partitions) almost never succeeds as
a whole, so "the last good run" of a test is the newest earlier run in which *that test* ran and passed, read from
the jobs that ran it:

- a job that was skipped or cancelled, or did not finish, gives no signal; nor does a job the policy says cannot run
  the test (`tests[].jobs`, a regex over job names): its log is never downloaded (`fetchable`);
- what a job's log or a run's artifacts say of the test is read by bot.domain.ci_results, the one reader of CI's
  results (the red run's failed tests too).

`retried_passed`: run_suite retried the file and it then passed -- a flake, which the caller records and does not
bisect. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from enum import StrEnum

from bot.domain.policy import Test


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


def good(signals: Sequence[Signal]) -> Signal | None:
    """The newest run (signals newest first) in which the test ran and passed."""
    return next((s for s in signals if s.outcome is Outcome.PASSED), None)
