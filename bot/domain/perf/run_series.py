"""What one completed run of a watched workflow says of the benchmarks' series: which of its runs need reading, which
jobs' logs to read, and each metric's reading. Pure: the caller lists the runs, and fetches what `wanted` asks for into
the run's typed reading (bot.domain.run_reading, the same reading the red-test intake decides on), then takes the
`values` (bot.service.series_intake).

- The metrics watched: every test of the policy that declares `tests[].metrics` (its table cells or patterns,
  bot.domain.perf.readings); a test without them (an accuracy check's `metric` with a threshold) keeps no series.
- The runs: completed runs of the policy's watch entry -- its workflow, branch and events, from the policy's own
  repository, never a fork's (bot.domain.scope.watched) -- whatever their conclusion: a performance nightly stays
  green when it gets slower, and turns red only when a benchmark crashes.
- A run's reading is its newest attempt's: a re-run attempt replaces what the older attempt read (the same run id,
  the same commit), and a run is read again only when its attempt is newer than the one stored.
- The jobs: those of that attempt that could have run the test (`tests[].jobs`), finished and neither skipped nor
  cancelled (bot.domain.signals.fetchable), in the listed order, read one at a time until every metric of the test
  has a value; each metric takes the first value a log holds.
- A metric no log holds -- the benchmark crashed, its batch size was skipped, the job was skipped or its log has
  expired -- reads None: kept as a gap in the series, never a zero and never a change point.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from bot.domain.perf.readings import read, series_of
from bot.domain.policy import Policy, Test, Watch
from bot.domain.run_reading import Attempt, JobsOf, LogOf, RunReading, Wanted
from bot.domain.scope import RunInfo, watched
from bot.domain.signals import JobInfo, fetchable


def metric_tests(policy: Policy) -> list[Test]:
    """The policy's tests that declare `metrics`: each metric a series of its own."""
    return [t for t in policy.tests if t.metrics]


def metric_names(policy: Policy, test: Test) -> list[str]:
    return [s.name for s in series_of(policy, test)]


def runs_to_read(
    policy: Policy,
    watch: Watch,
    runs: Iterable[RunInfo],
    read: Mapping[int, int],
    history: int | None = None,
) -> list[RunInfo]:
    """The runs whose reading is missing or older than their newest attempt (`read`: run id -> the attempt read of
    it), oldest first: completed runs of this watch entry (this repository's, its branch and events), each run once
    with its newest attempt listed, at most the `history` newest of them (all when None)."""
    newest: dict[int, RunInfo] = {}
    for run in runs:
        if run.status != "completed" or watched(policy, run) is not watch:
            continue
        known = newest.get(run.id)
        if known is None or run.run_attempt > known.run_attempt:
            newest[run.id] = run
    kept = sorted(newest.values(), key=lambda r: r.id, reverse=True)[: history if history is not None else None]
    return sorted((r for r in kept if read.get(r.id, 0) < r.run_attempt), key=lambda r: r.id)


def jobs_to_read(test: Test, jobs: Sequence[JobInfo]) -> list[JobInfo]:
    """The attempt's jobs whose log may hold the test's output, in the listed order."""
    return [j for j in jobs if fetchable(test, j) is None]


def readings(policy: Policy, test: Test, logs: Iterable[str]) -> dict[str, float | None]:
    """Every metric of the test, in the policy's order: the first value the logs hold (in the jobs' order), else
    None."""
    found: dict[str, float | None] = dict.fromkeys(metric_names(policy, test))
    for log in logs:
        for name, value in read(policy, test, log).items():
            if found.get(name) is None:
                found[name] = value
    return found


def _logs(attempt: Attempt, test: Test) -> list[str]:
    return [attempt.logs[j.name].text for j in jobs_to_read(test, attempt.jobs) if j.name in attempt.logs]


def wanted(policy: Policy, tests: Sequence[Test], read: RunReading) -> Wanted | None:
    """What to fetch next for the tests' readings of the run's attempt (bot.domain.run_reading): its jobs list, then
    the logs of the jobs that could have run a test, one at a time, until every metric of the test has a value or
    no such log is left; None once nothing more is needed."""
    attempt = read.attempt(read.run.run_attempt)
    if attempt is None:
        return JobsOf(read.run.run_attempt)  # that attempt's jobs: a newer attempt in flight leaves them as they were
    for test in tests:
        if all(v is not None for v in readings(policy, test, _logs(attempt, test)).values()):
            continue
        job = next((j for j in jobs_to_read(test, attempt.jobs) if not attempt.read(j.name)), None)
        if job is not None:
            return LogOf(attempt.number, job)
    return None


def values(policy: Policy, tests: Sequence[Test], read: RunReading) -> dict[str, dict[str, float | None]]:
    """Test id -> metric -> the run's reading (None: no log read holds it), from what is read of its attempt."""
    attempt = read.attempt(read.run.run_attempt) or Attempt(read.run.run_attempt, ())
    return {test.id: readings(policy, test, _logs(attempt, test)) for test in tests}
