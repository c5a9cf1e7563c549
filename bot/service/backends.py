"""Where a policy's test runs its steps: the local pool, or the step workflow on self-hosted runners."""

from __future__ import annotations

import json
import math

from bot.adapters.dispatch.actions import GitHubActionsBackend, Limits
from bot.adapters.dispatch.local_pool import LocalPool, worktree_root
from bot.adapters.git.repo import GitRepo
from bot.domain.policy import Test
from bot.ports import Forge
from bot.service.config import BisectConfig
from runners.spec import Backend, StepSpec
from runners.step import Request

ENV_BUILD_MARGIN_MIN = 30  # the job's timeout leaves room for an environment build before the test's own


def step_inputs(request: Request, labels: list[str], timeout_minutes: float, correlation: str) -> dict[str, str]:
    """The step workflow's workflow_dispatch inputs (runners/github/revert-bisect-step.yml), all strings."""
    spec = request.spec
    return {
        "bisection": str(request.bisection_id),
        "step": str(spec.step_id),
        "sha": spec.sha,
        "test": request.test or "",
        "spec": json.dumps(request.to_json(), separators=(",", ":")),
        "runs_on": json.dumps(labels),
        "timeout_minutes": str(math.ceil(timeout_minutes + ENV_BUILD_MARGIN_MIN)),
        "correlation": correlation,
    }


def backend_for(
    test: Test, config: BisectConfig, repo: GitRepo, forge: Forge, clone_url: str, branch: str, bisection_id: int
) -> Backend:
    runner = test.runner
    if runner.backend == "local":
        return LocalPool(repo, config.workers, worktree_root(repo.path))
    metric = test.metric

    def inputs_for(spec: StepSpec, correlation: str) -> dict[str, str]:
        request = Request(
            clone_url,
            spec,
            bisection_id,
            test.id,
            metric.name if metric else None,
            metric.threshold if metric else None,
        )
        return step_inputs(request, runner.labels, runner.timeout_minutes, correlation)

    limits = Limits(poll_s=runner.poll_seconds, queue_timeout_s=runner.queue_timeout_minutes * 60)
    return GitHubActionsBackend(
        forge.actions(runner.workflow), branch, inputs_for, runner.parallelism, runner.labels, limits
    )
