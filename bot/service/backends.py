"""What the step workflow is dispatched with. Which backend runs a policy's steps (the local pool, or the step
workflow on self-hosted runners) is the wiring's choice (bot.wiring.backend_for, a bot.ports.BackendFor)."""

from __future__ import annotations

import json
import math

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
