"""A runner's results read against CI's red failure (bot.domain.bisect.ci_failure): how CI's red reading of each
test failed, from the readings stored with the bisection, and each result of the bisect runner as evidence of it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.domain.bisect.ci_failure import Failure, as_ci_reads, ci_failure, runner_outcome
from bot.domain.bisect.group import Group, GroupDecision
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import Run
from bot.domain.bisect.verdict import RawResult
from bot.ports.store import BisectionRecord
from runners import failure
from runners.spec import StepResult


def ci_failures(row: BisectionRecord, group: Group) -> dict[str, Failure | None]:
    """Each test's kind of failure in CI's red run at BAD (its stored reading: the metric and the check's line)."""
    out: dict[str, Failure | None] = {}
    readings = {e.test: e.ci for e in entries(row.tests)}
    for test, problem in group.problems.items():
        at_bad = [c for c in readings.get(test, ()) if c.sha == problem.bad]
        kinds = [ci_failure(c.metric, c.line, problem.settings.metric) for c in at_bad]
        out[test] = next((k for k in reversed(kinds) if k is not None), None)
    return out


def read_as_ci(
    result: StepResult, raws: Mapping[str, RawResult], kinds: Mapping[str, Failure | None], whole: bool
) -> dict[str, RawResult]:
    """Each test's result from the bisect runner as evidence of CI's failure: a test that errored there (every failed
    case of it an error; `whole`: every case of the step is the test's) where CI's red run failed an assertion or a
    metric is an infra result naming the runner."""
    by_case = {c.case: c for c in result.cases}
    out = {}
    for test, raw in raws.items():
        cases = list(result.cases) if whole else [c for c in (by_case.get(test),) if c is not None]
        bad = [c for c in cases if c.outcome == "bad"]
        said = next((c.why for c in bad if c.failure == failure.ERROR), None)
        out[test] = as_ci_reads(raw, failure.of_cases(c.failure for c in bad), said, result.runner, kinds.get(test))
    return out


def naming_the_runner(decision: GroupDecision, runs: Sequence[Run]) -> GroupDecision:
    """The decision with each outcome that found an endpoint untestable because the runner only errored there
    naming the runner (bot.domain.bisect.ci_failure.runner_outcome)."""
    decisions = {
        test: d
        if d.outcome is None
        else replace(d, outcome=runner_outcome(d.outcome, [r for r in runs if r.test == test]))
        for test, d in decision.decisions.items()
    }
    return replace(decision, decisions=decisions)
