"""A bisection's tests as the store holds them: each test's problem and state, each step's runs per test, and a
step's result read per test. A bisection of one test keeps its state in the bisection's own columns and its steps
one result each (as before groups); a group keeps them in `bisections.tests` and `steps.results`.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from bot.domain.bisect.group import Group
from bot.domain.bisect.model import Kind, Outcome, Phase, Problem, Run, Settings, State, Status
from bot.domain.bisect.verdict import SKIP_EXIT, RawResult, Verdict, classify
from bot.domain.cost import git_range
from bot.domain.outcome import AB, BisectionOutcome, members
from bot.ports.store import BisectionRecord, StepRecord, StepReport
from runners.spec import StepResult

SOLO = ""  # the one test of a bisection of one
EXIT_OF = {"good": 0, "bad": 1, "skip": SKIP_EXIT}  # a case's outcome as the exit code a run of it alone gives


def state_of(row: BisectionRecord) -> State:
    return State(
        Phase(row.phase),
        tuple(row.merges or ()),
        row.confirming,
        row.confirm_round,
        row.confirmations,
        row.revert,
        row.revert_error,
    )


def state_json(state: State) -> dict:
    return dict(
        phase=state.phase.value,
        merges=list(state.merges),
        confirming=state.confirming,
        confirm_round=state.confirm_round,
        confirmations=state.confirmations,
        revert=state.revert,
        revert_error=state.revert_error,
    )


def state_from_json(data: Mapping | None) -> State:
    if not data:
        return State()
    return State(
        Phase(data["phase"]),
        tuple(data.get("merges") or ()),
        data.get("confirming"),
        data.get("confirm_round", 0),
        data.get("confirmations", 0),
        data.get("revert"),
        data.get("revert_error"),
    )


def is_group(row: BisectionRecord) -> bool:
    return row.tests is not None


def group_of(
    problem: Problem, row: BisectionRecord, settings_for: Callable[[str], Settings] | None = None
) -> tuple[Group, dict[str, State]]:
    """The tests of the bisection with their problems (each its own GOOD and, with `settings_for`, its own metric
    rule) and states."""
    if not is_group(row):
        return Group({SOLO: problem}), {SOLO: state_of(row)}
    tests = row.tests or {}
    problems = {
        t: replace(
            problem,
            good=info.get("good") or problem.good,
            settings=settings_for(t) if settings_for else problem.settings,
        )
        for t, info in tests.items()
    }
    return Group(problems), {t: state_from_json(info.get("state")) for t, info in tests.items()}


def read_report(step: StepRecord) -> bool:
    """A step whose report of its tests was read: done, no infrastructure failure, not exit 125 (a skip). JUnit
    discovery (bot.service.discovery) learns a group's tests from the last such step at BAD."""
    return step.state == "done" and step.infra_reason is None and step.exit_code != SKIP_EXIT


def red_at_bad(row: BisectionRecord) -> set[str] | None:
    """The tests of a JUnit group that BAD's report failed, as discovery read them (round 0's calibration at BAD);
    None when there was no discovery: every test of the bisection was red where it started (CI's red run)."""
    if not is_group(row):
        return None
    at_bad = [s for s in row.steps if s.kind == Kind.CALIBRATE.value and s.round == 0 and s.sha == row.bad]
    read = [s for s in at_bad if read_report(s)]
    if not read:
        return None
    return {t for t, r in (read[-1].results or {}).items() if r.get("verdict") == Verdict.BAD.value}


def git_ranges(row: BisectionRecord, problem: Problem) -> list[int]:
    """The range `git bisect run` is given per red test, in commits (bot.domain.cost.git_range): the test's own
    GOOD (its last pass; a group's member its own, not the union's) to BAD, narrowed by CI's readings of that test
    -- what a person at a terminal would start from. A group's tests that passed at BAD are bisected by no one."""
    if is_group(row) and not row.tests:
        return []  # a JUnit report never read: no test known red
    problems = group_of(problem, row)[0].problems
    red = red_at_bad(row)
    ci = [r for s in row.steps if s.kind == Kind.CI.value for r in runs_of(s)]
    ranges = []
    for test, mine in problems.items():
        if red is not None and test not in red:
            continue
        read = [r for r in ci if r.test == test]
        passed = [r.sha for r in read if r.raw.exit_code == 0]
        failed = [r.sha for r in read if r.raw.exit_code not in (0, None)]
        ranges.append(git_range(mine.graph, mine.good, mine.bad, passed, failed))
    return ranges


def runs_of(step: StepRecord) -> list[Run]:
    """What the engine learns from a step: one run per test it carried (done and lost steps; cancelled ones said
    nothing). A lost step, or one that failed on infrastructure, is an infra run for each of its tests."""
    if step.state not in ("done", "lost"):
        return []
    if not step.results:
        return [Run(step.sha, Kind(step.kind), RawResult(step.exit_code, step.metric, step.infra_reason), step.round)]
    runs = []
    for test, r in step.results.items():
        infra = step.infra_reason or r.get("infra_reason")
        infra = infra or (None if "exit_code" in r else "the step reported nothing for this test")
        raw = RawResult(r.get("exit_code"), r.get("metric"), infra)
        runs.append(Run(step.sha, Kind(r["kind"]), raw, step.round, test))
    return runs


def raw_results(result: StepResult, tests: Sequence[str]) -> dict[str, RawResult]:
    """Each test's own result in a step that ran several: its case in the report (a test missing from it did not
    run at this commit: a skip, as a case a commit lacks; one that said nothing, infra). A step whose report was not
    read (exit 125, >= 128, infrastructure) gives each test its exit: a skip or infra for all, as git bisect run's."""
    by_case = {c.case: c for c in result.cases}
    out = {}
    for test in tests:
        case = by_case.get(test)
        if result.infra_reason is not None or not result.cases:  # the report was not read: the exit code speaks
            out[test] = RawResult(result.exit_code, None, result.infra_reason)
        elif case is None:
            out[test] = RawResult(SKIP_EXIT)
        elif case.outcome == "infra":  # it said nothing of this commit (a lost GPU, its own timeout): never evidence
            out[test] = RawResult(None, case.metric, case.why or "no result")
        else:
            out[test] = RawResult(EXIT_OF.get(case.outcome, SKIP_EXIT), case.metric)
    return out


def step_results(kinds: Mapping[str, Kind], raws: Mapping[str, RawResult], verdicts: Mapping[str, Verdict]) -> dict:
    """Each test's result in a step's row; a test's own infra reason (bot.service.as_ci: it errored) with it."""
    out = {
        t: dict(kind=kinds[t].value, exit_code=raws[t].exit_code, metric=raws[t].metric, verdict=verdicts[t].value)
        for t in kinds
    }
    for t, entry in out.items():
        if raws[t].infra_reason and (raws[t].exit_code is None):
            entry["infra_reason"] = raws[t].infra_reason
    return out


def step_verdict(verdicts: Sequence[Verdict]) -> Verdict:
    """One word for a step of several tests, for displays: infra, else bad if any test failed, else good if any
    passed, else skip."""
    for v in (Verdict.INFRA, Verdict.BAD, Verdict.GOOD):
        if v in verdicts:
            return v
    return Verdict.SKIP


def classify_all(raws: Mapping[str, RawResult], group: Group, boundaries: Mapping[str, float | None]) -> dict:
    return {t: classify(raw, group.problems[t].settings.metric, boundaries.get(t)) for t, raw in raws.items()}


def outcome_json(out: Outcome) -> dict:
    return BisectionOutcome(
        message=out.message,
        culprit=out.culprit,
        first_parent_culprit=out.first_parent_culprit,
        best_guess=out.best_guess,
        confidence=out.confidence,
        candidates=list(out.candidates),
        revert_error=out.revert_error,
        reason=out.reason.value if out.reason else None,
        facts=dict(out.facts),
        ab=None
        if out.ab is None
        else AB(
            head=out.ab.head,
            revert=out.ab.revert,
            passed=out.ab.passed,
            head_verdicts=[v.value for v in out.ab.head_verdicts],
            revert_verdicts=[v.value for v in out.ab.revert_verdicts],
            **({"head_from": out.ab.head_from} if out.ab.head_from else {}),
        ),
    ).as_json()


# A group's status, from its tests': a culprit when every bisected test has one, else the first of these a test
# ended with (what most needs the user's eye first).
_WORST_FIRST = (
    Status.CANCELLED,
    Status.INCONCLUSIVE,
    Status.AMBIGUOUS,
    Status.UNTESTABLE,
    Status.NO_CULPRIT,
    Status.GOOD_FAILS,
    Status.NOT_REPRODUCIBLE,
)
_NOT_BISECTED = (Status.NOT_REPRODUCIBLE, Status.GOOD_FAILS, Status.NO_CULPRIT)  # nothing to revert, nothing wrong


def group_outcome(tests: Mapping[str, Mapping]) -> tuple[Status, BisectionOutcome]:
    """The group's status (see _WORST_FIRST) and outcome, from each test's stored entry (bisections.tests, every test
    ended): the culprit when every test is answered and they agree on one, a line per test in the message. A group not
    found names no culprit (a test's own found one stays in its entry): the test that decided its status gives its
    best guess, if it has one, with that guess's probability."""
    ended = members(tests)
    statuses = {m.test: Status(m.status) for m in ended}
    outcomes = {m.test: m.outcome for m in ended}
    culprits = list(dict.fromkeys(m.culprit for m in ended if m.culprit))
    found = bool(culprits) and all(s is Status.FOUND or s in _NOT_BISECTED for s in statuses.values())
    status = Status.FOUND if found else next(s for s in (*_WORST_FIRST, Status.FOUND) if s in statuses.values())
    first = outcomes[next(t for t, s in statuses.items() if s is status)]
    one = found and len(culprits) == 1
    head = f"{len(culprits)} culprit{'s' if len(culprits) != 1 else ''} for {len(tests)} tests"
    lines = [f"{t}: {statuses[t].value}: {o.message}" for t, o in outcomes.items()]
    guess = None if found else first.best_guess
    told = BisectionOutcome(
        message="; ".join([head, *lines]),
        culprit=culprits[0] if one else None,
        first_parent_culprit=first.first_parent_culprit if one else None,
        best_guess=guess,
        confidence=(first.confidence or 0.0)
        if guess
        else min((o.confidence or 0.0 for t, o in outcomes.items() if statuses[t] is Status.FOUND), default=0.0),
        ab=first.ab if one else None,
        reason=None if found else first.reason,
        facts={} if found else dict(first.facts),
    )
    return status, told


def step_report(
    result: StepResult, verdict: Verdict, results: dict | None, solo: RawResult | None = None
) -> StepReport:
    """What the store keeps of a step's result: the runner's facts, its verdict (one word for several tests) and
    each test's own result; a bisection of one test keeps its result as read (`solo`: bot.service.as_ci)."""
    return StepReport(
        result.exit_code if solo is None else solo.exit_code,
        result.metric,
        result.infra_reason if solo is None else solo.infra_reason,
        verdict.value,
        result.runner,
        result.duration_s,
        result.log_tail,
        result.env_key,
        result.env_reused if result.env_key else None,
        results,
    )


def member_outcome(row: BisectionRecord, test: str) -> BisectionOutcome:
    """A group member's own outcome, as stored in bisections.tests (empty while it runs)."""
    return next((m.outcome for m in members(row.tests) if m.test == test), BisectionOutcome())
