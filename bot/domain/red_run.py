"""The red-test intake: what a red run's reading (bot.domain.run_reading) says, decided as values -- which watched tests
the final attempt failed, which failed in an earlier attempt and passed now or passed on the suite runner's own
retry (flakes: recorded, not bisected), whether that retry failed every failing test again (the failure reproduced),
and, with each failing test's signals in the earlier runs, its range. Pure.

The reader (bot.service.run_reading) asks this module what to fetch of the red run, one piece at a time (`wanted`:
the newest attempt's jobs; the failed ones' logs that could hold a watched test; the artifacts the policy names;
each earlier attempt's jobs and failed jobs' logs; the newest attempt's log of a job where a test failed before and
not now), and which tests' histories range them (`needs_history`); fetches it all; and the job decides on the
result once (`intake`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace

from bot.domain.ci_results import FailedTest, Results, failed_tests, for_name, read_job
from bot.domain.policy import Policy, Test
from bot.domain.run_reading import FAILED, ArtifactsOf, Attempt, JobLog, JobsOf, LogOf, RunReading, Wanted
from bot.domain.scope import Scoped, Unscoped, failures, ranged, together
from bot.domain.signals import Flake, JobInfo, Outcome, Signal, fetchable


@dataclass(frozen=True)
class RedReading:
    """All the intake decides on: the run as read, and each failing test's signals in the earlier runs (newest first,
    up to and including the first run it passed in), by test id."""

    run: RunReading
    histories: Mapping[str, Sequence[Signal]]


@dataclass(frozen=True)
class Intake:
    """What the job does with a red run: the flakes it records, the tests it bisects with their ranges (grouped as
    they are bisected: bot.domain.scope.together), and why a failure, or the run, is not bisected."""

    flakes: tuple[Flake, ...] = ()
    scoped: tuple[Scoped, ...] = ()
    groups: tuple[tuple[Scoped, ...], ...] = ()
    unscoped: tuple[str, ...] = ()


def _to_read(policy: Policy, attempt: Attempt) -> JobInfo | None:
    """The next failed job of the attempt whose log the red run's reading lacks and that could run a watched test (a
    test that failed ran in a failed job)."""
    return next(
        (
            j
            for j in attempt.jobs
            if j.conclusion in FAILED
            and not attempt.read(j.name)
            and any(fetchable(test, j) is None for test in policy.tests)
        ),
        None,
    )


def wanted(policy: Policy, read: RunReading) -> Wanted | None:
    """What the red run's reading needs next (see the module's docstring), in the order it is fetched; None: all."""
    run = read.run
    final = read.attempt(run.run_attempt)
    if final is None:
        return JobsOf(run.run_attempt, newest=True)
    if run.conclusion == "failure":
        if (job := _to_read(policy, final)) is not None:
            return LogOf(final.number, job)
        if read.artifacts is None and (policy.results.junit_artifact or policy.results.metrics_artifact):
            return ArtifactsOf()
    for number in range(1, run.run_attempt):
        attempt = read.attempt(number)
        if attempt is None:
            return JobsOf(number)
        if (job := _to_read(policy, attempt)) is not None:
            return LogOf(number, job)
    more = logs_wanted(policy, read)
    return LogOf(final.number, more[0]) if more else None


def failing(policy: Policy, read: RunReading) -> list[FailedTest] | Unscoped:
    """The watched tests the final attempt failed, or why there is nothing to bisect in it; none when it succeeded."""
    if read.run.conclusion != "failure":
        return []
    return failures(policy, read.run, read.results())


def _still(found: list[FailedTest] | Unscoped) -> set[str]:
    return {f.test.id for f in found} if isinstance(found, list) else set()


def retried(policy: Policy, logs: Iterable[JobLog], result: str) -> list[Test]:
    """Watched tests the suite runner retried in these logs with this result (↻ RETRIED: ... passed | failed)."""
    files = [r.file for log in logs for r in log.report.retried if r.result == result]
    found = (for_name(test, name) for test in policy.tests for name in files)
    return list({t.id: t for t in found if t is not None}.values())


def reproduced(policy: Policy, read: RunReading) -> bool:
    """Did the suite runner's own retry fail every watched failing test again, with the same verdict?"""
    found = failing(policy, read)
    if not isinstance(found, list) or not found:
        return False
    again = {t.id for t in retried(policy, read.final.failed_logs().values(), "failed")}
    return all(f.test.id in again for f in found)


def failed_before(policy: Policy, read: RunReading) -> list[tuple[FailedTest, str]]:
    """Watched tests that failed in the run's earlier attempts, once each, with the job they failed in."""
    seen: dict[str, tuple[FailedTest, str]] = {}
    for attempt in read.earlier:
        for name, log in attempt.failed_logs().items():
            for failure in failed_tests(policy, Results(log.text, report=log.report)):
                seen.setdefault(failure.test.id, (failure, name))
    return list(seen.values())


def _rerun_job(final: Attempt, name: str) -> JobInfo | None:
    """The final attempt's job of that name, when it ran to a verdict."""
    job = final.job(name)
    if job is None or job.status != "completed" or job.conclusion not in ("success", "failure"):
        return None
    return job


def logs_wanted(policy: Policy, read: RunReading) -> list[JobInfo]:
    """The final attempt's jobs whose logs the re-run verdict needs and the reading lacks: where a test that failed
    before, and not now, ran again."""
    still = _still(failing(policy, read))
    final = read.final
    wanted: dict[str, JobInfo] = {}
    for failure, name in failed_before(policy, read):
        job = _rerun_job(final, name)
        if failure.test.id not in still and job is not None and not final.read(name):
            wanted.setdefault(name, job)
    return list(wanted.values())


def passed_now(policy: Policy, test: Test, final: Attempt, name: str) -> bool:
    """Did the test pass in the final attempt's job `name`, where it failed before? Its log says so, or, when the log
    has no word on the test, the job that failed it now succeeded."""
    job = _rerun_job(final, name)
    log = final.logs.get(name)
    if job is None or log is None:
        return False
    reading = read_job(policy, test, log.text, job, log.report)
    return reading.outcome is Outcome.PASSED or (reading.outcome is Outcome.NONE and job.conclusion == "success")


def failed_in(policy: Policy, test: Test, final: Attempt) -> str | None:
    """The job the test failed in on the red run (its history is read from the job of that name first)."""
    for name, log in final.failed_logs().items():
        job = final.job(name)
        if job is not None and read_job(policy, test, log.text, job, log.report).outcome is Outcome.FAILED:
            return name
    return None


def needs_history(policy: Policy, read: RunReading) -> list[tuple[Test, str | None]]:
    """The failing tests whose earlier runs range them, each with the job it failed in."""
    found = failing(policy, read)
    if not isinstance(found, list):
        return []
    return [(f.test, failed_in(policy, f.test, read.final)) for f in found]


def flakes(policy: Policy, read: RunReading, found: list[FailedTest] | Unscoped | None = None) -> list[Flake]:
    """Tests that failed and then passed on the same commit: on a re-run attempt, or on the suite runner's own retry;
    a test the final attempt still fails (`found`, when known: `failing`) is none."""
    run = read.run
    still = _still(failing(policy, read) if found is None else found)
    hows = [
        (failure.test.id, f"failed, then passed on re-run attempt {run.run_attempt}")
        for failure, name in failed_before(policy, read)
        if failure.test.id not in still and passed_now(policy, failure.test, read.final, name)
    ]
    if run.conclusion == "failure":
        retried_passed = retried(policy, read.final.failed_logs().values(), "passed")
        hows += [(t.id, "passed on the suite runner's own retry") for t in retried_passed if t.id not in still]
    return [Flake(policy.repository, test, run.id, run.head_sha, how, run.url) for test, how in hows]


def intake(policy: Policy, red: RedReading, started: str = "", reproduced: bool = False) -> Intake:
    """The flakes to record and the ranges to bisect; `started`, `reproduced`: why it starts now, carried on each."""
    read = red.run
    found = failing(policy, read)
    seen = tuple(flakes(policy, read, found))
    if isinstance(found, Unscoped):
        return Intake(seen, unscoped=(found.reason,))
    scoped: list[Scoped] = []
    unscoped: list[str] = []
    for failure in found:
        got = ranged(read.run, failure, red.histories.get(failure.test.id, ()))
        if isinstance(got, Unscoped):
            unscoped.append(got.reason)
        else:
            scoped.append(replace(got, started=started, reproduced=reproduced))
    groups = tuple(tuple(g) for g in together(policy, scoped))
    return Intake(seen, tuple(scoped), groups, tuple(unscoped))
