"""Reading a watched workflow's runs through the CiReads port, each run once, into values (bot.domain.run_reading)
that the red-test intake (bot.domain.red_run) decides on without fetching anything more. What is fetched is what the
decision needs, and no more:

- the red run: the jobs of its newest attempt and the logs of the failed ones that could run a watched test, the
  JUnit / metrics artifacts the policy names (a red run only); for a re-run, each earlier attempt's jobs and failed
  jobs' logs, and the newest attempt's log of a job where a test failed before and not now (`read_run`);
- each failing test's history: the workflow's runs listed once, then the earlier runs newest first until the first
  in which the test passed (bot.domain.earlier_run says what each needs: its artifacts, its jobs list, a log); a
  run read for one failing test is not fetched again for another (`read_red`).

A red run's log that cannot be downloaded fails the read (the job is tried again); an earlier run's says nothing.

`Kept` holds the runs read in this process, so that the series' sync (bot.service.series_intake) and the red-test
intake of one delivery -- and the intake's later claims of it, after the re-run grace -- share one reading of a run:
what one fetched the other does not fetch again.
"""

from __future__ import annotations

import json
import logging
import threading
from collections import OrderedDict
from collections.abc import Sequence

from bot.domain import red_run
from bot.domain.earlier_run import word
from bot.domain.errors import RevertBisectError
from bot.domain.policy import Policy, Test, Watch
from bot.domain.run_reading import ArtifactsOf, JobsOf, RunReading, Wanted, with_log
from bot.domain.scope import RunInfo, earlier_runs
from bot.domain.signals import JobInfo, Outcome, Signal
from bot.ports import CiReads

log = logging.getLogger("revert_bisect.nightly")


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


def _log(ci: CiReads, job: JobInfo, quiet: bool) -> tuple[str | None, str]:
    """A job's log as GitHub serves it, or None and why not; a download that keeps failing raises, unless `quiet`."""
    try:
        text = ci.job_log(job.id)
    except RevertBisectError as exc:
        if not quiet:
            raise
        return None, f"the log of job {job.name!r} could not be read: {exc}"
    return text, f"the log of job {job.name!r} expired"


def fetch(ci: CiReads, policy: Policy, read: RunReading, want: Wanted, quiet: bool = False) -> RunReading:
    """The reading with what it wanted fetched and added: one request (a jobs list: one a page; the artifacts: one
    per artifact the policy names). `quiet`: a log whose download keeps failing is kept as unreadable."""
    run_id = read.run.id
    if isinstance(want, JobsOf):
        return read.with_jobs(want, ci.run_jobs(run_id, None if want.newest else want.attempt))
    if isinstance(want, ArtifactsOf):
        return read.with_artifacts(*artifacts(ci, policy, run_id))
    return with_log(policy, read, want, *_log(ci, want.job, quiet))


class Kept:
    """The readings of the last `size` run attempts read in this process, by repository, run and attempt (a newer
    attempt is another reading: its jobs and logs are new). Safe to share between the worker's threads."""

    def __init__(self, size: int = 16):
        self.size = size
        self._reads: OrderedDict[tuple[str, int, int], RunReading] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, repository: str, run: RunInfo) -> RunReading | None:
        with self._lock:
            return self._reads.get((repository.lower(), run.id, run.run_attempt))

    def whole(self, repository: str, run: RunInfo) -> RunReading | None:
        """The run's reading if every log asked of it was read (an earlier run's reader keeps a log it could not
        download as unreadable, where the series' reader must fail and read the run again later)."""
        read = self.get(repository, run)
        return read if read is not None and not any(a.unread for a in read.attempts) else None

    def keep(self, repository: str, read: RunReading) -> RunReading:
        key = (repository.lower(), read.run.id, read.run.run_attempt)
        with self._lock:
            self._reads[key] = read
            self._reads.move_to_end(key)
            while len(self._reads) > self.size:
                self._reads.popitem(last=False)
        return read


def read_run(ci: CiReads, policy: Policy, run: RunInfo, known: RunReading | None = None) -> RunReading:
    """The red run (or a re-run that succeeded), read for the intake piece by piece, as bot.domain.red_run.wanted
    asks (`known`: what is read of this attempt already)."""
    read = known if known is not None else RunReading(run)
    while (want := red_run.wanted(policy, read)) is not None:
        read = fetch(ci, policy, read, want)
    return read


def histories(
    ci: CiReads,
    policy: Policy,
    watch: Watch,
    red: RunInfo,
    workflow: int | str,
    tests: Sequence[tuple[Test, str | None]],
    kept: Kept | None = None,
) -> dict[str, list[Signal]]:
    """Each test's signals in the earlier runs, newest first, up to and including the first run it passed in; `tests`:
    each with the job it failed in on the red run (read first); `kept`: the runs this process read already."""
    if not tests:
        return {}
    # newest first from now: runs newer than the red one (it may be scoped hours later, after its re-runs) come too
    listed = ci.workflow_runs(workflow, red.head_branch, list(watch.events), 2 * watch.history + 10)
    runs = earlier_runs(policy, watch, red, listed)
    kept = kept or Kept()
    read = {run.id: kept.get(policy.repository, run) or RunReading(run) for run in runs}  # once, for every test
    out: dict[str, list[Signal]] = {}
    for test, first in tests:
        signals = out[test.id] = []
        for run in runs:
            while not isinstance(step := word(policy, test, read[run.id], first), Signal):
                read[run.id] = fetch(ci, policy, read[run.id], step, quiet=True)
            log.info("run %s (%s): %s %s -- %s", run.id, run.head_sha[:12], test.id, step.outcome, step.why)
            signals.append(step)
            if step.outcome is Outcome.PASSED:
                break
    for reading in read.values():
        kept.keep(policy.repository, reading)
    return out


def read_red(
    ci: CiReads,
    policy: Policy,
    watch: Watch,
    run: RunInfo,
    workflow: int | str,
    known: RunReading | None = None,
    kept: Kept | None = None,
) -> red_run.RedReading:
    """Everything the intake decides on: the run (`known`: what is read of this attempt already) and the histories of
    the tests it failed (`kept`: the earlier runs this process read already)."""
    read = read_run(ci, policy, run, known)
    failing = red_run.needs_history(policy, read)
    return red_run.RedReading(read, histories(ci, policy, watch, run, workflow, failing, kept))
