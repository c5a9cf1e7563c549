"""The benchmarks' slowdowns on the `workflow_run.completed` job: after the red-test intake, each policy with
`tests[].metrics` that watches the run's workflow has its tests' series assessed, and each new slowdown bisected and
acted on (bot.service.slowdowns).

- `SlowdownJob`: a completed run of such a workflow, green or red (a performance nightly stays green when it gets
  slower). It reads the series as stored by the series' sync that ran first on the same delivery
  (bot.ingress.jobs.series), so the run just completed is in it.
- `AfterIntake`: the red-test intake first, then the slowdowns: a bisection of a slowdown, hours on a GPU runner, never
  holds a red test's back. While the intake waits for re-runs (NotYet), the job is queued again and the slowdowns
  wait with it. A failure of the slowdowns' own is logged and does not fail the job: every delivery assesses the whole
  series again, and a bisection already started is resumed (its origin key), not started twice.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping

from bot.domain.repo_policies import RepoPolicies
from bot.domain.scope import run_info
from bot.ports.store import ClaimedJob
from bot.service.slowdowns import ForgeWithCi, Slowdowns

log = logging.getLogger("revert_bisect.slowdowns")

Handler = Callable[[ClaimedJob], None]


class SlowdownJob:
    def __init__(
        self, policies: Mapping[str, RepoPolicies], forge_for: Callable[[str], ForgeWithCi], slowdowns: Slowdowns
    ):
        self.policies = policies
        self.forge_for = forge_for
        self.slowdowns = slowdowns

    def __call__(self, job: ClaimedJob) -> None:
        repo = (job.payload.get("repository") or {}).get("full_name")
        run = job.payload.get("workflow_run") or {}
        policies = self.policies.get(repo)
        if policies is None or "id" not in run or "head_sha" not in run:
            return
        info = run_info(run)
        if info.status != "completed":
            return
        for policy, _ in policies.watching(info):
            if any(t.metrics for t in policy.tests):
                self.slowdowns.watch(self.forge_for(policy.repository), policy)


class AfterIntake:
    """The red-test intake, then the slowdowns, on one delivery's job."""

    def __init__(self, intake: Handler, slowdowns: Handler):
        self.intake = intake
        self.slowdowns = slowdowns

    def __call__(self, job: ClaimedJob) -> None:
        self.intake(job)
        try:
            self.slowdowns(job)
        except Exception:  # noqa: BLE001 -- the next delivery assesses the series again and resumes what started
            log.warning(
                "delivery %s: the slowdowns could not be assessed; the next delivery tries again",
                job.delivery_id,
                exc_info=True,
            )
