"""The benchmarks' series on the `workflow_run.completed` job, beside the red-test intake, and at the bot's start.

- `SeriesJob`: a completed run of a workflow that a policy with `tests[].metrics` watches (its workflow, branch and
  events, from this repository: bot.domain.scope.watched), green or red, syncs that watch entry's series
  (bot.service.series_intake.sync): the run and any recent one not read yet at its newest attempt.
- `Alongside`: the delivery's job runs the series' sync, then the red-test intake (bot.ingress.jobs.nightly), which
  decides exactly as it would alone. The sync's own failure is logged and does not stop the intake: the runs it
  missed are read by the next delivery's sync (or the next start). The intake may wait (NotYet, during a red run's
  re-run grace): each claim syncs again, which is one list request while nothing new has completed, and reads a
  re-run attempt as soon as it has.
- `SeriesSync`: run once when the bot starts (`at_start`, beside the worker's loops, not through the job queue: it
  is no delivery's work): every policy with metrics synced -- a new policy's last `watch.history` runs filled in, and
  the runs that completed while the bot was down. What it cannot read then (GitHub does not answer) the next
  delivery of that workflow reads: its sync looks at the same runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Mapping

from bot.domain.perf.run_series import metric_tests
from bot.domain.repo_policies import RepoPolicies
from bot.domain.scope import run_info
from bot.ports import CiReads
from bot.ports.store import ClaimedJob, SeriesLog
from bot.service.run_reading import Kept
from bot.service.series_intake import sync, sync_all

log = logging.getLogger("revert_bisect.series")

SYNC_AT_START = "series_sync"  # the handler run once at start (`at_start`); no delivery is routed to it
START = ClaimedJob(0, SYNC_AT_START, "start", "revert_bisect_start", {}, 1)

Handler = Callable[[ClaimedJob], None]


class SeriesJob:
    def __init__(
        self,
        policies: Mapping[str, RepoPolicies],
        ci_for: Callable[[str], CiReads],
        series: SeriesLog,
        kept: Kept | None = None,
    ):
        self.policies = policies
        self.ci_for = ci_for
        self.series = series
        self.kept = kept  # the runs read in this process, shared with the red-test intake

    def __call__(self, job: ClaimedJob) -> None:
        repo = (job.payload.get("repository") or {}).get("full_name")
        run = job.payload.get("workflow_run") or {}
        policies = self.policies.get(repo) if isinstance(repo, str) else None
        if policies is None or not isinstance(repo, str) or "id" not in run or "head_sha" not in run:
            return
        info = run_info(run)
        if info.status != "completed":
            return
        watching = [(p, w) for p, w in policies.watching(info) if metric_tests(p)]
        if len(watching) != 1:
            return  # unwatched, or no metrics; two policies at once is ambiguous (the intake says so)
        ((policy, watch),) = watching
        workflow = run.get("workflow_id") or info.workflow_path
        points = sync(self.ci_for(repo), self.series, policy, watch, [info], workflow, kept=self.kept)
        if points:
            log.info("delivery %s: %s series points stored for %s", job.delivery_id, len(points), repo)


class Alongside:
    """The series' sync, then the red-test intake, on one delivery's job."""

    def __init__(self, series: Handler, intake: Handler):
        self.series = series
        self.intake = intake

    def __call__(self, job: ClaimedJob) -> None:
        try:
            self.series(job)
        except Exception:  # noqa: BLE001 -- never in the intake's way: the next delivery's sync reads what it missed
            log.warning(
                "delivery %s: the series could not be synced; the next delivery tries again",
                job.delivery_id,
                exc_info=True,
            )
        self.intake(job)


class SeriesSync:
    """Every policy with metrics synced (run at start)."""

    def __init__(
        self,
        policies: Mapping[str, RepoPolicies],
        ci_for: Callable[[str], CiReads],
        series: SeriesLog,
        kept: Kept | None = None,
    ):
        self.policies = policies
        self.ci_for = ci_for
        self.series = series
        self.kept = kept  # the runs read in this process, shared with the red-test intake

    def __call__(self, job: ClaimedJob) -> None:
        every = [p for repo in self.policies.values() for p in repo]
        total = sync_all(self.ci_for, self.series, every)
        log.info("series synced at start: %s points stored", total)


def at_start(handlers: Mapping[str, Handler]) -> threading.Thread | None:
    """The series' sync, started on a thread of its own when its handler is wired (the bot's start)."""
    handler = handlers.get(SYNC_AT_START)
    if handler is None:
        return None

    def run() -> None:
        try:
            handler(START)
        except Exception:  # noqa: BLE001 -- logged; the next delivery's sync reads what this one could not
            log.warning("the series' sync at start failed", exc_info=True)

    thread = threading.Thread(target=run, name="revert-bisect-series-sync", daemon=True)
    thread.start()
    return thread
