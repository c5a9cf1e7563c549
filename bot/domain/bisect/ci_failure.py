"""CI's failure, and whether a run on the bisect runner failed the same way.

CI's red run failed the test's own check: a metric over its threshold (SGLang's `avg_kl_div=0.0065 > threshold=0.002`)
or an assertion its log printed. A run on the bisect runner that fails with an error instead -- an out-of-memory
error, a missing model file, a server that did not come up (runners.failure) -- did not fail the test: it failed to
run it. Such a run is an infra result naming the runner (`as_ci_reads`: never evidence, retried, and an endpoint
that only errors ends the bisection naming the runner, `runner_outcome`), and a failure without the metric CI read
over its threshold is no reproduction of it for the revert's proof (`like_ci`). Pure.
"""

from __future__ import annotations

import enum
from collections.abc import Sequence

from bot.domain.bisect.model import Kind, Outcome, Problem, Run, Status
from bot.domain.bisect.verdict import MetricRule, RawResult, Verdict
from bot.domain.case import ASSERTION
from bot.domain.reasons import Reason

RUNNER_ERROR = "errored on the bisect runner "  # starts the infra reason `as_ci_reads` gives


class Failure(str, enum.Enum):
    METRIC = "a metric over its threshold"
    ASSERTION = "an assertion"


def ci_failure(metric: float | None, line: str, rule: MetricRule | None) -> Failure | None:
    """How CI's red reading failed: its metric over the threshold, else an assertion its log printed (`line`); None
    when CI's log said neither (then no kind is compared)."""
    if rule is not None and rule.threshold is not None and metric is not None and rule.worse(metric, rule.threshold):
        return Failure.METRIC
    return Failure.ASSERTION if line and ASSERTION.search(line) else None


def as_ci_reads(raw: RawResult, failed: str | None, why: str | None, runner: str, ci: Failure | None) -> RawResult:
    """A runner's result as evidence of CI's failure. `failed`: how the runner says the test failed (runners.failure:
    "assertion" or "error"). An error where CI's red run failed an assertion or a metric is not the test failing: an
    infra result naming the runner and what it said."""
    if failed != "error" or ci is None or raw.infra_reason is not None:
        return raw
    said = (why or "an error").strip()
    return RawResult(None, raw.metric, f"{RUNNER_ERROR}{runner}: {said}, where CI's red run failed {ci.value}")


def ci_reading(problem: Problem, runs: Sequence[tuple[Run, Verdict]]) -> Failure | None:
    """CI's kind of failure at BAD as the engine holds it (its recorded reading's metric: the log's line is the
    service's, `ci_failure`)."""
    rule = problem.settings.metric
    at_bad = [r for r, v in runs if r.kind is Kind.CI and r.sha == problem.bad and v is Verdict.BAD]
    return next((f for r in at_bad if (f := ci_failure(r.raw.metric, "", rule)) is not None), None)


def like_ci(run: Run, verdict: Verdict, ci: Failure | None) -> bool:
    """Whether a runner's run failed as CI's red run did: a failure, with a metric reading (worse than the cut, or the
    verdict would not be BAD) when CI's failure was its metric over the threshold -- a crash before the metric is
    printed is not that failure."""
    return verdict is Verdict.BAD and (ci is not Failure.METRIC or run.raw.metric is not None)


def runner_outcome(outcome: Outcome, runs: Sequence[Run]) -> Outcome:
    """An endpoint found untestable because the runner only errored there (the runs `as_ci_reads` made infra) names
    the runner and what it said, instead of blaming the commit: an infra outcome, with nothing reverted."""
    sha = outcome.facts.get("sha")
    if outcome.status is not Status.UNTESTABLE or outcome.reason is not Reason.ENDPOINT_UNTESTABLE:
        return outcome
    said = [r.raw.infra_reason or "" for r in runs if r.sha == sha and r.kind is not Kind.CI]
    errored = [why for why in said if why.startswith(RUNNER_ERROR)]
    if not errored or len(errored) < len([why for why in said if why]):  # other infra failures there too
        return outcome
    runner, why = errored[-1].removeprefix(RUNNER_ERROR).split(": ", 1)
    message = (
        f"the {outcome.facts.get('endpoint', 'endpoint')} endpoint {str(sha)[:12]} {RUNNER_ERROR}{runner} every "
        f"time ({len(errored)} runs): {why}; the runner cannot run the test as CI does, so nothing was reverted"
    )
    facts = {**outcome.facts, "runner": runner, "why": why}
    return Outcome(Status.UNTESTABLE, message, reason=Reason.RUNNER_ERROR, facts=facts)
