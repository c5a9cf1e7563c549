"""One workflow run as read from CI, as values: its attempts, each attempt's jobs, the logs read of them (each undone of
GitHub's decorations and parsed into run_suite's report once), its artifacts, and the metric values its logs hold
per test. Pure.

A reading grows as it is fetched: whoever decides on a run says what it still needs (`Wanted`: an attempt's jobs
list, a job's log, the artifacts -- bot.domain.red_run.wanted for a red run, bot.domain.earlier_run.word for a test's
word in an earlier run), the reader fetches that and adds it (bot.service.run_reading), and the decision is then made
on the values, fetching nothing. It holds what was read, not every log of the run: a log that could not be read is
kept as the reason (`Attempt.unread`), so it is not asked for again.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace

from bot.domain.ci_results import Results, read_job
from bot.domain.joblog import plain
from bot.domain.policy import Policy
from bot.domain.scope import RunInfo
from bot.domain.signals import JobInfo, latest_jobs
from bot.domain.suite_log import SuiteReport, merge, parse

FAILED = ("failure", "timed_out")


@dataclass(frozen=True)
class JobLog:
    """One job's log without GitHub's decorations (bot.domain.joblog.plain), and run_suite's report in it."""

    text: str
    report: SuiteReport

    @classmethod
    def of(cls, raw: str) -> JobLog:
        """A log as GitHub serves it."""
        text = plain(raw)
        return cls(text, parse(text))


@dataclass(frozen=True)
class Attempt:
    """One attempt of a run: its jobs (for the newest attempt, each job's newest execution, as GitHub lists them),
    the logs read of them by job name, and why a log could not be read (expired, the download kept failing)."""

    number: int
    jobs: tuple[JobInfo, ...]
    logs: Mapping[str, JobLog] = field(default_factory=dict)
    unread: Mapping[str, str] = field(default_factory=dict)  # job name -> why its log could not be read

    def job(self, name: str) -> JobInfo | None:
        return next((j for j in self.jobs if j.name == name), None)

    def read(self, name: str) -> bool:
        """Was the job's log asked for (read, or found unreadable)?"""
        return name in self.logs or name in self.unread

    def failed_logs(self) -> dict[str, JobLog]:
        """The logs read of the attempt's failed jobs, in the jobs' order."""
        return {j.name: self.logs[j.name] for j in self.jobs if j.name in self.logs and j.conclusion in FAILED}


@dataclass(frozen=True)
class Artifacts:
    """The run's JUnit documents and metrics JSON, when the policy names those artifacts and the run has them."""

    junit: tuple[str, ...] = ()
    metrics: dict | None = None  # {"metric": {"name", "value", "threshold"}}


@dataclass(frozen=True)
class JobsOf:
    """Wanted: an attempt's jobs list (`newest`: the run's newest attempt, each job's newest execution)."""

    attempt: int
    newest: bool = False


@dataclass(frozen=True)
class LogOf:
    """Wanted: one job's log, of that attempt."""

    attempt: int
    job: JobInfo


@dataclass(frozen=True)
class ArtifactsOf:
    """Wanted: the run's artifacts the policy names."""


Wanted = JobsOf | LogOf | ArtifactsOf


@dataclass(frozen=True)
class RunReading:
    """A run as read so far: the attempts listed (by number), the artifacts (None: not read), and the metric values
    found in its newest attempt's logs: test id -> metric name -> value, as the bisection reads a test's metric
    (`results.log.metric` in the test's own output, bot.domain.ci_results.read_job), from the first log read that
    holds one."""

    run: RunInfo
    attempts: tuple[Attempt, ...] = ()
    artifacts: Artifacts | None = None
    metrics: Mapping[str, Mapping[str, float]] = field(default_factory=dict)

    def attempt(self, number: int) -> Attempt | None:
        return next((a for a in self.attempts if a.number == number), None)

    @property
    def final(self) -> Attempt:
        """The newest attempt (no jobs while it is not listed)."""
        return self.attempt(self.run.run_attempt) or Attempt(self.run.run_attempt, ())

    @property
    def earlier(self) -> tuple[Attempt, ...]:
        return tuple(a for a in self.attempts if a.number < self.run.run_attempt)

    def results(self) -> Results:
        """What the newest attempt's failed jobs and the run's artifacts say, as the red run's reader reads them."""
        logs = self.final.failed_logs().values()
        found = self.artifacts or Artifacts()
        return Results("\n".join(log.text for log in logs), found.junit, found.metrics, merge(j.report for j in logs))

    def with_jobs(self, want: JobsOf, jobs: Iterable[JobInfo]) -> RunReading:
        listed = Attempt(want.attempt, tuple(latest_jobs(jobs) if want.newest else jobs))
        return replace(self, attempts=tuple(sorted((*self.attempts, listed), key=lambda a: a.number)))

    def with_artifacts(self, junit: tuple[str, ...], metrics: dict | None) -> RunReading:
        return replace(self, artifacts=Artifacts(junit, metrics))


def _metrics(policy: Policy, read: RunReading, attempt: Attempt | None, name: str) -> Mapping[str, Mapping[str, float]]:
    """The reading's metrics with those of the job `name`'s log, for the tests that had none yet."""
    if attempt is None or attempt.number != read.run.run_attempt:
        return read.metrics
    job, log = attempt.job(name), attempt.logs.get(name)
    if job is None or log is None:
        return read.metrics
    found = dict(read.metrics)
    for test in policy.tests:
        if test.metric is not None and test.id not in found:
            value = read_job(policy, test, log.text, job, log.report).metric
            if value is not None:
                found[test.id] = {test.metric.name: value}
    return found


def with_log(policy: Policy, read: RunReading, want: LogOf, raw: str | None, why: str = "") -> RunReading:
    """The reading with one more log of a listed attempt (`raw` as GitHub serves it; None: it could not be read,
    `why`)."""
    name = want.job.name

    def grown(attempt: Attempt) -> Attempt:
        if raw is None:
            return replace(attempt, unread={**attempt.unread, name: why})
        return replace(attempt, logs={**attempt.logs, name: JobLog.of(raw)})

    out = replace(read, attempts=tuple(grown(a) if a.number == want.attempt else a for a in read.attempts))
    return replace(out, metrics=_metrics(policy, out, out.attempt(want.attempt), name))
