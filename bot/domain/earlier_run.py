"""A test's word in one earlier run of the watched workflow, from what is read of that run so far
(bot.domain.run_reading): its signal, or what must be fetched of the run first. Pure.

The run's artifacts speak first (JUnit, a metrics JSON with a cut), when the policy names them and the run has them.
Else its newest attempt's jobs are listed, and a job's log is read only when the job could have run the test
(bot.domain.signals.fetchable: `tests[].jobs`, never a skipped or cancelled job), the job the test failed in on the
red run first (the same suite partition, usually); the first job whose log has the test speaks for the run. So a
run costs one jobs list and, typically, one log; and a run read for one test is not read again for another.
"""

from __future__ import annotations

from bot.domain.ci_results import combine, read_artifacts, read_job
from bot.domain.policy import Policy, Test
from bot.domain.run_reading import ArtifactsOf, JobsOf, LogOf, RunReading, Wanted
from bot.domain.signals import Outcome, Reading, Signal, fetchable, may_run


def word(policy: Policy, test: Test, read: RunReading, first: str | None) -> Signal | Wanted:
    """The test's signal in the run, or what to fetch of the run first; `first`: the job read first."""
    run = read.run
    if read.artifacts is None and (policy.results.junit_artifact or policy.results.metrics_artifact):
        return ArtifactsOf()
    if read.artifacts is not None:
        found = read_artifacts(test, read.artifacts.junit, read.artifacts.metrics)
        if found is not None:
            return Signal(run.id, run.head_sha, found.outcome, found.why, found.metric, run.url)
    final = read.attempt(run.run_attempt)
    if final is None:
        return JobsOf(run.run_attempt, newest=True)
    readings: list[Reading] = []
    for job in sorted(final.jobs, key=lambda j: j.name != first):
        why = fetchable(test, job)
        if why is not None:
            if may_run(test, job):  # a job that could have run it did not: said; another job: not even that
                readings.append(Reading(Outcome.NONE, why))
            continue
        if job.name in final.unread:
            readings.append(Reading(Outcome.NONE, final.unread[job.name]))
            continue
        log = final.logs.get(job.name)
        if log is None:
            return LogOf(final.number, job)
        reading = read_job(policy, test, log.text, job, log.report)
        readings.append(reading)
        if reading.outcome is not Outcome.NONE:
            break  # a test runs in one job of a run (its suite partition): that job speaks for the run
    found = combine(readings, none_why="no job of it could run the test")
    return Signal(run.id, run.head_sha, found.outcome, found.why, found.metric, run.url)
