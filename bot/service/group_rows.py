"""A bisection's tests as the store holds them (bot.domain.bisect.ledger): each test's problem and state, and a
step's result read per test.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from bot.domain.bisect.group import Group
from bot.domain.bisect.ledger import Result, ci_runs, entries, results_of, step_verdict
from bot.domain.bisect.model import Kind, Problem, Settings, State
from bot.domain.bisect.verdict import SKIP_EXIT, RawResult, Verdict, classify
from bot.domain.cost import git_range
from bot.ports.store import BisectionRecord, StepRecord, StepReport
from bot.service.config import BisectConfig
from runners.spec import StepResult

EXIT_OF = {"good": 0, "bad": 1, "skip": SKIP_EXIT}  # a case's outcome as the exit code a run of it alone gives


def group_of(
    problem: Problem,
    row: BisectionRecord,
    settings_for: Callable[[str], Settings] | None = None,
    one_run: bool = False,
) -> tuple[Group, dict[str, State]]:
    """The tests of the bisection with their problems (each its own GOOD and, with `settings_for`, its own metric
    rule) and states; `one_run`: every test is read from each step's one run (a slowdown's metrics)."""
    tests = entries(row.tests)
    problems = {
        e.test: replace(
            problem,
            good=e.good or problem.good,
            settings=settings_for(e.test) if settings_for else problem.settings,
        )
        for e in tests
    }
    return Group(problems, one_run), {e.test: e.state for e in tests}


def read_report(step: StepRecord) -> bool:
    """A step whose report of its tests was read: done, no infrastructure failure, not exit 125 (a skip). JUnit
    discovery (bot.service.discovery) learns a group's tests from the last such step at BAD."""
    return step.state == "done" and step.infra_reason is None and step.exit_code != SKIP_EXIT


def red_at_bad(row: BisectionRecord) -> set[str] | None:
    """The tests of a JUnit group that BAD's report failed, as discovery read them (round 0's calibration at BAD);
    None when there was no discovery: every test of the bisection was red where it started (CI's red run)."""
    if BisectConfig.from_json(row.settings).junit is None:
        return None
    at_bad = [s for s in row.steps if s.kind == Kind.CALIBRATE.value and s.round == 0 and s.sha == row.bad]
    read = [s for s in at_bad if read_report(s)]
    if not read:
        return None
    return {t for t, r in results_of(read[-1]).items() if r.verdict is Verdict.BAD}


def git_ranges(row: BisectionRecord, problem: Problem) -> list[int]:
    """The range `git bisect run` is given per red test, in commits (bot.domain.cost.git_range): the test's own
    GOOD (its last pass; a group's member its own, not the union's) to BAD, narrowed by CI's readings of that test
    -- what a person at a terminal would start from. A group's tests that passed at BAD are bisected by no one."""
    if not row.tests:
        return []  # a JUnit report never read: no test known red
    problems = group_of(problem, row)[0].problems
    red = red_at_bad(row)
    ci = ci_runs(entries(row.tests))
    ranges = []
    for test, mine in problems.items():
        if red is not None and test not in red:
            continue
        read = [r for r in ci if r.test == test]
        passed = [r.sha for r in read if r.raw.exit_code == 0]
        failed = [r.sha for r in read if r.raw.exit_code not in (0, None)]
        ranges.append(git_range(mine.graph, mine.good, mine.bad, passed, failed))
    return ranges


def raw_results(result: StepResult, tests: Sequence[str], whole: bool) -> dict[str, RawResult]:
    """Each test's own result in a step: the whole step's (`whole`: the bisection's one test is its command), else
    its case in the report (a test missing from it did not run at this commit: a skip, as a case a commit lacks; one
    that said nothing, infra). A step whose report was not read (exit 125, >= 128, infrastructure) gives each test
    its exit: a skip or infra for all, as git bisect run's."""
    by_case = {c.case: c for c in result.cases}
    out = {}
    for test in tests:
        case = by_case.get(test)
        if whole:
            out[test] = RawResult(result.exit_code, result.metric, result.infra_reason)
        elif result.infra_reason is not None or not result.cases:  # the report was not read: the exit code speaks
            out[test] = RawResult(result.exit_code, None, result.infra_reason)
        elif case is None:
            out[test] = RawResult(SKIP_EXIT)
        elif case.outcome == "infra":  # it said nothing of this commit (a lost GPU, its own timeout): never evidence
            out[test] = RawResult(None, case.metric, case.why or "no result")
        else:
            out[test] = RawResult(EXIT_OF.get(case.outcome, SKIP_EXIT), case.metric)
    return out


def classify_all(raws: Mapping[str, RawResult], group: Group, boundaries: Mapping[str, float | None]) -> dict:
    return {t: classify(raw, group.problems[t].settings.metric, boundaries.get(t)) for t, raw in raws.items()}


def step_report(result: StepResult, results: Mapping[str, Result]) -> StepReport:
    """What the store keeps of a step's result: the runner's facts, one verdict for displays and each test's own
    result, as read. A step that said nothing of any of its tests (each errored on the runner: bot.service.as_ci)
    keeps their reason as its own."""
    said = {r.infra_reason for r in results.values()}
    return StepReport(
        result.exit_code,
        result.metric,
        result.infra_reason or (said.pop() if len(said) == 1 else None),
        step_verdict(r.verdict for r in results.values() if r.verdict).value,
        result.runner,
        result.duration_s,
        result.log_tail,
        result.env_key,
        result.env_reused if result.env_key else None,
        results,
    )
