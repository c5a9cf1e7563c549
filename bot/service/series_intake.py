"""The benchmarks' series, read from CI and kept (bot.ports.store.SeriesLog): each completed run of a watched
workflow, whatever its conclusion, read once per attempt (bot.domain.perf.run_series says which runs, which jobs and
what each metric reads).

- `read_run`: one run's points, every metric of every test that declares `metrics` (None where the run reported
  none), from the logs of its attempt's jobs that could have run the test, fetched into the run's typed reading
  (bot.domain.run_reading, bot.service.run_reading.fetch) as bot.domain.perf.run_series.wanted asks: logs one at a
  time, and no more once every metric of the test has a value. A reading of the run made already in this process
  (`kept`: the red-test intake's, or the sync's own for the intake) is grown, not fetched again, and kept.
- `sync`: the watch entry's newest `watch.history` completed runs listed (one request a page, a run just delivered
  added to them), and those not read yet, or read at an older attempt, read and stored, oldest first. Run on every
  `workflow_run` delivery of the watched workflow, it also catches a re-run attempt whose completion never came as
  a webhook, and the runs of a time the bot was down; run when the bot starts, it fills a new policy's series with
  its last `watch.history` runs (the backfill).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime

from bot.domain.errors import RevertBisectError
from bot.domain.perf.run_series import metric_names, metric_tests, runs_to_read, values, wanted
from bot.domain.policy import Policy, Test, Watch
from bot.domain.run_reading import RunReading
from bot.domain.scope import RunInfo
from bot.ports import CiReads
from bot.ports.store import SeriesLog, SeriesPoint
from bot.service.run_reading import Kept, fetch

log = logging.getLogger("revert_bisect.series")


def read_run(
    ci: CiReads,
    policy: Policy,
    run: RunInfo,
    tests: Sequence[Test] | None = None,
    kept: Kept | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> list[SeriesPoint]:
    """The run's points for `tests` (default: every test of the policy that declares `metrics`), from its typed
    reading (`kept`: what this process read of it already), grown with what bot.domain.perf.run_series.wanted asks
    for: the attempt's jobs listed once, then the logs its tests need (a log that expired says nothing; one that
    cannot be downloaded raises bot.domain.errors.RevertBisectError)."""
    tests = metric_tests(policy) if tests is None else tests
    if not tests:
        return []
    read = (kept.whole(policy.repository, run) if kept else None) or RunReading(run)
    while (want := wanted(policy, tests, read)) is not None:
        read = fetch(ci, policy, read, want)  # a download that keeps failing raises: nothing is stored of the run
    if kept is not None:
        kept.keep(policy.repository, read)
    started = run.created_at or run.updated_at or now()
    return [
        SeriesPoint(policy.repository, test, name, run.id, run.run_attempt, run.head_sha, started, value, run.url)
        for test, found in values(policy, tests, read).items()
        for name, value in found.items()
    ]


def _stale(series: SeriesLog, policy: Policy, test: Test) -> dict[int, int]:
    """Run id -> the attempt every metric of the test was read at (0 when one of them was not read there)."""
    per_metric = [series.runs_read(policy.repository, test.id, name) for name in metric_names(policy, test)]
    runs = set().union(*per_metric) if per_metric else set()
    return {run: min(read.get(run, 0) for read in per_metric) for run in runs}


def sync(
    ci: CiReads,
    series: SeriesLog,
    policy: Policy,
    watch: Watch,
    delivered: Sequence[RunInfo] = (),
    workflow: int | str | None = None,
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
    kept: Kept | None = None,
) -> list[SeriesPoint]:
    """Read and store the watch entry's recent runs that are not read yet at their newest attempt (`delivered`: runs
    a webhook just named, in case the list does not show them yet; `workflow`: the workflow's id or path, by default
    the watch's when it names a file; `kept`: the runs this process read, shared with the red-test intake); the
    points stored."""
    tests = metric_tests(policy)
    if not tests:
        return []
    workflow = workflow or (watch.workflow if watch.workflow.endswith((".yml", ".yaml")) else None)
    if workflow is None:  # GitHub lists a workflow's runs by its id or file, never by its name
        log.warning(
            "%s: watch %r names no workflow file: its runs are read as they are delivered",
            policy.repository,
            watch.workflow,
        )
    listed = ci.workflow_runs(workflow, watch.branch, list(watch.events), watch.history) if workflow else []
    runs = [*listed, *delivered]
    stored: list[SeriesPoint] = []
    stale = {test.id: _stale(series, policy, test) for test in tests}
    to_read: dict[int, tuple[RunInfo, list[Test]]] = {}
    for test in tests:
        for run in runs_to_read(policy, watch, runs, stale[test.id], watch.history):
            to_read.setdefault(run.id, (run, []))[1].append(test)
    for run_id in sorted(to_read):
        run, needing = to_read[run_id]
        try:
            points = read_run(ci, policy, run, needing, kept, now=now)
        except RevertBisectError as exc:  # not stored: the next sync reads it again
            log.warning("run %s: not read for its series this time: %s", run.id, exc)
            continue
        series.record(points)
        stored += points
        missing = sorted({p.metric for p in points if p.value is None})
        log.info(
            "run %s (%s, attempt %s, %s): %s readings stored%s",
            run.id,
            run.head_sha[:12],
            run.run_attempt,
            run.conclusion,
            sum(p.value is not None for p in points),
            f"; none for {', '.join(missing)}" if missing else "",
        )
    return stored


def sync_all(
    ci_for: Callable[[str], CiReads],
    series: SeriesLog,
    policies: Sequence[Policy],
    now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> int:
    """Every watch entry of every policy with metrics, synced (the bot's start: a new policy's backfill, and the runs
    that completed while it was down); the number of points stored. A watch entry that cannot be synced (GitHub does
    not answer, the repository is not reachable with the bot's credentials) is logged and left to the next delivery
    of its workflow, whose sync reads the same runs: the others are synced all the same."""
    total = 0
    for policy in policies:
        if not metric_tests(policy):
            continue
        for watch in policy.watch:
            try:
                total += len(sync(ci_for(policy.repository), series, policy, watch, now=now))
            except Exception as exc:  # noqa: BLE001 -- one repository's trouble is not every repository's
                log.warning("%s: the series of %s not synced: %s", policy.repository, watch.workflow, exc)
    return total
