"""The `workflow_run.completed` job: scope a red scheduled run, then bisect each failed test's range."""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from bot.adapters.store.deliveries import ClaimedJob
from bot.domain.policy import Policy
from bot.domain.scope import Results, RunInfo, Scoped, Unscoped, scope, watched
from bot.ports import Forge

log = logging.getLogger("revert_bisect.nightly")


class NightlyBisections(Protocol):
    def start_nightly(self, repo_slug: str, scoped: Scoped, forge: Forge) -> None: ...


def run_info(run: dict) -> RunInfo:
    return RunInfo(
        run["id"],
        run.get("name") or "",
        run.get("path") or "",
        run.get("head_branch") or "",
        run["head_sha"],
        run.get("event") or "",
        run.get("conclusion"),
    )


def read_results(forge: Forge, policy: Policy, run_id: int) -> Results:
    """The run's log, plus the JUnit and metrics artifacts the policy names, when the run has them."""
    junit, metrics = (), None
    if policy.results.junit_artifact:
        files = forge.run_artifact(run_id, policy.results.junit_artifact)
        junit = tuple(data.decode(errors="replace") for name, data in files.items() if name.endswith(".xml"))
    if policy.results.metrics_artifact:
        files = forge.run_artifact(run_id, policy.results.metrics_artifact)
        found = next((data for name, data in files.items() if name.endswith(".json")), None)
        try:
            metrics = json.loads(found) if found else None
        except ValueError:
            log.warning("run %s: the %s artifact is not JSON; using the log", run_id, policy.results.metrics_artifact)
    return Results(forge.run_log(run_id), junit, metrics)


class NightlyJob:
    def __init__(
        self, policies: Mapping[str, Policy], forge_for: Callable[[str], Forge], bisections: NightlyBisections
    ):
        self.policies = policies
        self.forge_for = forge_for
        self.bisections = bisections

    def __call__(self, job: ClaimedJob) -> None:
        repo = (job.payload.get("repository") or {}).get("full_name")
        run = job.payload.get("workflow_run") or {}
        policy = self.policies.get(repo)
        if policy is None or "id" not in run or "head_sha" not in run:
            log.info("delivery %s: no policy for %s, or no run in the payload; ignored", job.delivery_id, repo)
            return
        info = run_info(run)
        if info.conclusion != "failure" or watched(policy, info) is None:
            return  # a green or unwatched run: nothing to do, and no API call
        forge = self.forge_for(repo)
        result = scope(
            policy, info, read_results(forge, policy, info.id), forge.run_history(run["workflow_id"], info.head_branch)
        )
        if isinstance(result, Unscoped):
            log.warning("delivery %s: %s", job.delivery_id, result.reason)
            return
        for scoped in result:
            log.info(
                "delivery %s: bisecting %s over %s..%s",
                job.delivery_id,
                scoped.test.test.id,
                scoped.good[:12],
                scoped.bad[:12],
            )
            self.bisections.start_nightly(repo, scoped, forge)
