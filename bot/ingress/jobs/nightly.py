"""The `workflow_run.completed` job: scope a red scheduled run once its last attempt is done, then bisect each test
that still fails over its range.

1. A green or unwatched run (bot.domain.scope.watched: the workflow by path, its event, branch, and a head commit
   from this repository) is dropped without an API call. A repository may have several policies: the run is read by
   the one whose `watch` names its workflow (bot.domain.repo_policies), with that policy's results and tests.
2. Re-runs first (`watch.rerun_grace_minutes`): failed jobs of a scheduled run are often re-run (a new run_attempt of
   the same run id), and a re-run's completion may never arrive as a webhook. So the job waits out the grace period
   after the red attempt completed (bot.domain.patience.NotYet: queued again, no attempt used), then reads the run
   as it is now; while an attempt is in flight, or within the grace period of the newest attempt, it waits again.
   The grace is for a failure nothing has reproduced yet: a red re-run attempt (attempt 2 or later), or a first
   attempt in which the suite runner's own retry failed every watched failing test again (`↻ RETRIED: ... failed`),
   is scoped at once, and the status comment says which it was.
3. The final attempt: a test that failed in an earlier attempt and not in the final one, or that the suite runner
   passed on its own retry (`↻ RETRIED: ... passed`), is a flake: recorded once (the trust report's flakes seen
   per test) and not bisected. A final attempt that succeeded bisects nothing.
4. Each test that failed in the final attempt: GOOD is the newest earlier run in which it ran and passed
   (bot.domain.earlier_run), BAD the red run's head; one bisection per range.

A delivery reads first and decides after: the final attempt, its earlier attempts and each failing test's earlier
runs are read once each (bot.service.run_reading, into bot.domain.run_reading's values; the attempt read for the
suite runner's retry during the grace period is not read again), then the red-test intake decides on them
(bot.domain.red_run.intake), and the job records its flakes and starts its bisections.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import UTC, datetime
from typing import Protocol

from bot.domain import red_run
from bot.domain.patience import NotYet
from bot.domain.policy import Policy, Watch
from bot.domain.repo_policies import RepoPolicies
from bot.domain.run_reading import RunReading
from bot.domain.scope import RunInfo, Scoped, run_info
from bot.domain.signals import Flake
from bot.ports import CiReads, Forge
from bot.ports.store import ClaimedJob, FlakeLog
from bot.service.run_reading import Kept, read_red, read_run

log = logging.getLogger("revert_bisect.nightly")

# how often a run whose re-run is in flight is looked at again (the grace period, within these bounds), and how long
# at most a red run waits for re-runs
RERUN_POLL_S = 300.0
MIN_RERUN_POLL_S = 5.0
MAX_WAIT_S = 24 * 3600.0


class ForgeWithCi(CiReads, Forge, Protocol):
    """The job reads the red run and its history through CI, and hands the forge on to the bisections."""


class NightlyBisections(Protocol):
    def start_nightly(self, repo_slug: str, scoped: Scoped, forge: Forge) -> None: ...

    def start_nightly_group(self, repo_slug: str, group: Sequence[Scoped], forge: Forge) -> None:
        """Several red tests of the run, in one bisection (bot.domain.scope.together)."""


class NoFlakeLog:
    def record(self, flake: Flake) -> bool:
        log.info("flake (not recorded): %s in run %s: %s", flake.test, flake.run_id, flake.how)
        return True


def _rerun_failed(run: RunInfo) -> str | None:
    """A red re-run attempt: the failure reproduced (the failed jobs ran again and failed)."""
    if run.run_attempt > 1 and run.conclusion == "failure":
        return f"re-run attempt {run.run_attempt} of the run failed again"
    return None


def _age_s(run: RunInfo, now: datetime) -> float | None:
    return (now - run.updated_at).total_seconds() if run.updated_at is not None else None


class NightlyJob:
    def __init__(
        self,
        policies: Mapping[str, RepoPolicies],
        forge_for: Callable[[str], ForgeWithCi],
        bisections: NightlyBisections,
        flakes: FlakeLog | None = None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        kept: Kept | None = None,
    ):
        self.policies = policies
        self.forge_for = forge_for
        self.bisections = bisections
        self.flakes = flakes or NoFlakeLog()
        self.now = now
        self.kept = kept or Kept()  # the runs read in this process (the series' sync of the delivery shares it)

    def __call__(self, job: ClaimedJob) -> None:
        repo = (job.payload.get("repository") or {}).get("full_name")
        run = job.payload.get("workflow_run") or {}
        policies = self.policies.get(repo)
        if policies is None or "id" not in run or "head_sha" not in run:
            log.info("delivery %s: no policy for %s, or no run in the payload; ignored", job.delivery_id, repo)
            return
        info = run_info(run)
        rerun_passed = info.conclusion == "success" and info.run_attempt > 1  # its earlier attempt's failures: flakes
        if info.conclusion != "failure" and not rerun_passed:
            return  # a green run: nothing to do, and no API call
        watching = policies.watching(info)  # the policy whose `watch` names the run's workflow
        if len(watching) > 1:
            log.warning(
                "delivery %s: run %s (%s) is watched by %s: ambiguous, read by neither (name the workflow by its "
                "path in both, and check-policy refuses the pair)",
                job.delivery_id,
                info.id,
                info.workflow_path or info.workflow_name,
                " and ".join(policies.source(p) for p, _ in watching),
            )
            return
        if not watching:
            return  # an unwatched run (a fork's `main` too): nothing to do, and no API call
        ((policy, watch),) = watching
        reproduced = _rerun_failed(info)
        now = read = None
        if reproduced is None:
            try:
                self._grace(watch, info)  # no API call while re-runs may still start...
            except NotYet:  # ...unless something reproduced the failure
                reproduced, now, read = self._reproduced(self.forge_for(repo), policy, info)
                if reproduced is None:
                    raise
        forge = self.forge_for(repo)
        final = self._final_attempt(forge, watch, info, waits=reproduced is None, now=now)
        if final is None:
            return
        reproduced = reproduced or _rerun_failed(final)
        started = (
            f"at once: {reproduced}"
            if reproduced
            else f"after waiting {watch.rerun_grace_minutes:g} minutes for re-runs of the red attempt"
        )
        workflow = run.get("workflow_id") or info.workflow_path
        self._scope(job.delivery_id, forge, policy, watch, final, workflow, repo, started, bool(reproduced), read)

    # -- re-runs --

    def _grace(self, watch: Watch, run: RunInfo) -> None:
        age = _age_s(run, self.now())
        left = watch.rerun_grace_minutes * 60 - (age or 0.0)
        if age is not None and left > 0:
            raise NotYet(left, f"run {run.id} attempt {run.run_attempt}: waiting {left:.0f}s for re-runs to start")

    def _reproduced(
        self, ci: ForgeWithCi, policy: Policy, run: RunInfo
    ) -> tuple[str | None, RunInfo, RunReading | None]:
        """What already reproduced the red attempt's failure, if anything: a re-run attempt that completed red, or the
        suite runner's own retry failing every watched failing test again (one read of the run, its jobs and logs,
        kept for scoping it); with the run as it is now."""
        now = ci.run(run.id)
        if now.status != "completed":
            return None, now, None  # a re-run in flight: its verdict is worth the wait
        if now.run_attempt > run.run_attempt:
            return _rerun_failed(now), now, None
        if run.conclusion != "failure":
            return None, now, None  # nothing failed, so nothing reproduced: no read
        read = self.kept.keep(policy.repository, read_run(ci, policy, run, self.kept.get(policy.repository, run)))
        if not red_run.reproduced(policy, read):
            return None, now, read
        return "the suite runner's own retry failed it again, with the same verdict", now, read

    def _final_attempt(
        self, ci: CiReads, watch: Watch, first: RunInfo, waits: bool = True, now: RunInfo | None = None
    ) -> RunInfo | None:
        """The run as it is now (`now`: read already in this delivery), once its newest attempt completed and
        (`waits`: nothing reproduced the failure yet) the grace period after it passed."""
        now_run = now if now is not None else ci.run(first.id)
        waited = _age_s(first, self.now()) or 0.0
        if now_run.status != "completed":
            if waited > MAX_WAIT_S:
                log.warning(
                    "run %s: attempt %s still %s after %.0fh; given up",
                    first.id,
                    now_run.run_attempt,
                    now_run.status,
                    waited / 3600,
                )
                return None
            raise NotYet(
                min(RERUN_POLL_S, max(MIN_RERUN_POLL_S, watch.rerun_grace_minutes * 60)),
                f"run {first.id}: attempt {now_run.run_attempt} is {now_run.status}",
            )
        if waits and now_run.run_attempt > first.run_attempt and _rerun_failed(now_run) is None:
            self._grace(watch, now_run)  # a re-run of the re-run may come too
        return now_run

    def _record(self, flake: Flake) -> None:
        if self.flakes.record(flake):
            log.info("run %s: %s is a flake (%s): not bisected", flake.run_id, flake.test, flake.how)

    # -- scoping the final attempt --

    def _scope(
        self,
        delivery: str,
        forge: ForgeWithCi,
        policy: Policy,
        watch: Watch,
        run: RunInfo,
        workflow: int | str,
        repo: str,
        started: str = "",
        reproduced: bool = False,
        read: RunReading | None = None,
    ) -> None:
        """Read the final attempt and its failing tests' histories once (`read`: the attempt, read already), then
        decide on them (bot.domain.red_run.intake) and act: record the flakes, start the bisections."""
        if run.conclusion not in ("success", "failure"):
            log.warning(
                "delivery %s: run %s's last attempt concluded %s: nothing to bisect", delivery, run.id, run.conclusion
            )
            return
        read = read if read is not None else self.kept.get(repo, run)
        known = replace(read, run=run) if read is not None and read.final.number == run.run_attempt else None
        red = read_red(forge, policy, watch, run, workflow, known, self.kept)  # all the decision needs, fetched first
        self.kept.keep(repo, red.run)
        decided = red_run.intake(policy, red, started, reproduced)  # then decided, fetching nothing
        for flake in decided.flakes:
            self._record(flake)
        for why in decided.unscoped:
            log.warning("delivery %s: %s", delivery, why)
        for scoped in decided.scoped:
            log.info(
                "delivery %s: bisecting %s over %s..%s (GOOD: run %s, the newest earlier run it passed in)",
                delivery,
                scoped.test.test.id,
                scoped.good[:12],
                scoped.bad[:12],
                scoped.good_run,
            )
        for group in decided.groups:
            if len(group) == 1:
                self.bisections.start_nightly(repo, group[0], forge)
            else:
                log.info("delivery %s: %s bisected together", delivery, ", ".join(s.test.test.id for s in group))
                self.bisections.start_nightly_group(repo, list(group), forge)
