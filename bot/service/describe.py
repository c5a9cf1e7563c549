"""A stored bisection as its one document (bot.service.document): the row, its tests and each step's results read
through the ledger (bot.domain.bisect.ledger), its cost beside git bisect run's on the range given.

Every reader builds it here: `bisect --json` and `status ID --json` on the range git gives (bot.cli.documents), the
dashboard's API on the range recorded when the bisection started (`recorded_range`: no git there). Each surface
words the outcome's remedy in its own terms (`words`): the CLI in its flags; the finding alone by default.
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict
from datetime import UTC, datetime

from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import ci_runs, entries, results_of, runs_of, step_verdict
from bot.domain.bisect.model import Kind, Problem
from bot.domain.cost import cost_of_steps
from bot.domain.outcome import BisectionOutcome, best_guess_of, culprit_of, outcome_of
from bot.ports.store import BisectionRecord, StepRecord
from bot.service.config import BisectConfig
from bot.service.document import (
    BisectionDocument,
    DocAB,
    DocCancelled,
    DocCiReading,
    DocGitBisectRun,
    DocRevert,
    DocRevertedBy,
    DocStep,
    DocStepTest,
    DocTest,
)
from bot.service.group_rows import git_ranges, group_of

Wording = Callable[[BisectionOutcome], str]
Subjects = Callable[[list[str]], Mapping[str, str]]  # shas -> their subjects (bot.ports.Git.subjects)

RAN = ("done", "lost")  # the steps that ran: a lost one is an infra result, kept and never believed
AB_KINDS = (Kind.AB_HEAD.value, Kind.AB_REVERT.value)
RUN_URL = re.compile(r"\((https?://[^()\s]+)\)")


def finding(outcome: BisectionOutcome) -> str:
    """The outcome's message as the engine said it, no remedy."""
    return outcome.message or ""


def no_subjects(shas: list[str]) -> Mapping[str, str]:
    return {}


def aware(dt: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything the store writes is UTC."""
    if dt is None:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def run_urls(runner: str | None) -> list[str]:
    """The CI runs a runner's text links to (`gpu-3 (https://.../actions/runs/5)`)."""
    return RUN_URL.findall(runner or "")


def runner_label(runner: str | None) -> str:
    return RUN_URL.sub("", runner or "").strip()


def config_of(row: BisectionRecord) -> BisectConfig:
    return BisectConfig.from_json({"command": list(row.command or ()), **(row.settings or {})})


def recorded_range(row: BisectionRecord) -> Problem:
    """GOOD..BAD as recorded when the bisection started: its first-parent commits, oldest first, each the child of
    the one before (empty for a bisection stored before ranges were recorded)."""
    chain = [row.good, *(c[0] for c in row.commits or [] if isinstance(c, list) and c and isinstance(c[0], str))]
    graph = {sha: (parent,) for parent, sha in zip(chain, chain[1:])}
    return Problem(graph, row.good, row.bad, config_of(row).settings())


def describe(
    row: BisectionRecord, problem: Problem, words: Wording = finding, subjects: Subjects = no_subjects
) -> BisectionDocument:
    """The document of `row` on the range `problem` (its graph: GOOD..BAD's commits); `subjects` names the commits
    the range recorded does not (a culprit inside a merge)."""
    outcome = outcome_of(row) or BisectionOutcome()
    config = config_of(row)
    steps = sorted(row.steps, key=lambda s: s.id)
    ran = [s for s in steps if s.state in RAN]
    judged = _judged(row, problem, config)
    views = {s.id: _step(s, judged.get(s.id)) for s in steps}
    tests = entries(row.tests)
    culprit, guess = culprit_of(row.status, outcome), best_guess_of(row.status, outcome)
    named = _subjects(row, outcome, [sha for sha in (culprit, guess, *(e.culprit for e in tests)) if sha], subjects)
    cost = cost_of_steps(steps, config.gpus, git_ranges(row, problem))
    rounds: dict[str, set[int]] = defaultdict(set)
    for s in ran:
        rounds[s.kind].add(s.round)

    def told(o: BisectionOutcome) -> str | None:
        return words(o) if o.message else None

    return BisectionDocument(
        id=row.id,
        repo=row.repo,
        command=[str(c) for c in row.command or ()],
        good=row.good,
        bad=row.bad,
        good_rev=row.good_rev,
        bad_rev=row.bad_rev,
        phase=row.phase,
        status=row.status,
        message=told(outcome),
        reason=outcome.reason,
        culprit=culprit,
        culprit_subject=named.get(culprit) if culprit else None,
        first_parent_culprit=outcome.first_parent_culprit if culprit else None,
        best_guess=guess,
        best_guess_subject=named.get(guess) if guess else None,
        confidence=outcome.confidence,
        candidates=outcome.candidates,
        effect=_effect(outcome),
        guess=row.guess,
        guess_probability=row.guess_probability,
        flake_rate=row.flake_rate,
        metric_boundary=row.boundary,
        range_size=len(problem.graph) or None,
        rounds=len({s.round for s in ran}),
        rounds_by_kind={k: len(v) for k, v in sorted(rounds.items())},
        runs_by_kind=dict(sorted(Counter(s.kind for s in ran).items())),
        runs=len(ran),
        runner_seconds=round(cost.runner_s, 1),
        cancelled=DocCancelled(runs=cost.cancelled, runner_seconds=round(cost.cancelled_s, 1)),
        git_bisect_run=DocGitBisectRun(
            runs=cost.git_runs, runner_seconds=round(cost.git_runner_s, 1), ranges=list(cost.git_ranges)
        ),
        created_at=aware(row.created_at),
        finished_at=aware(row.finished_at),
        steps=list(views.values()),
        tests=[
            DocTest(
                test=e.test,
                outcome=e.word,
                culprit=e.culprit,
                culprit_subject=named.get(e.culprit) if e.culprit else None,
                best_guess=e.best_guess if e.status else None,
                message=told(e.told),
                runs=sum(e.test in (s.results or {}) for s in ran),
                steps=sum(e.test in (s.results or {}) for s in steps),
                revert_pr=e.told.revert_pr,
                ci=[DocCiReading(**asdict(c)) for c in e.ci],
            )
            for e in tests
        ],
        revert=_revert(row, outcome),
        ab=_ab(row, outcome, [views[s.id] for s in steps if s.kind in AB_KINDS]),
    )


def _subjects(row: BisectionRecord, outcome: BisectionOutcome, shas: list[str], subjects: Subjects) -> dict[str, str]:
    """The subjects of `shas`: as the range recorded them, as the publisher stored the culprit's, else as asked."""
    known = {c[0]: c[2] for c in row.commits or [] if isinstance(c, list) and len(c) == 3}
    if outcome.culprit and outcome.culprit_subject:
        known[outcome.culprit] = outcome.culprit_subject
    missing = [sha for sha in dict.fromkeys(shas) if sha not in known]
    return {**known, **(subjects(missing) if missing else {})}


def _effect(outcome: BisectionOutcome) -> str | None:
    """A sampled metric's shift at the culprit, as bot.domain.bisect.sampled words it (the outcome's typed effect)."""
    return outcome.effect.words if outcome.effect else None


def _judged(row: BisectionRecord, problem: Problem, config: BisectConfig) -> dict[int, str]:
    """Each finished step's verdict as its tests' calibrated boundaries judge it now (one word for its tests:
    bot.domain.bisect.ledger.step_verdict); a step that carried no test is left out (it keeps its stored word)."""
    ran = [s for s in row.steps if s.state in RAN]
    # CI's readings first (as the engine saw them), then a run per test each step carried, in step order
    runs = ci_runs(entries(row.tests)) + [run for step in ran for run in runs_of(step)]
    problems = group_of(problem, row, config.settings_for)[0].problems if row.tests else {}  # a report not read yet
    judged = {
        t: iter([v for r, v in Evidence.of(p, [r for r in runs if r.test == t]).verdicts if r.kind is not Kind.CI])
        for t, p in problems.items()
    }
    out = {}
    for step in ran:
        said = [next(judged[r.test]) for r in runs_of(step) if r.test in judged]
        if said:
            out[step.id] = step_verdict(said).value
    return out


def _step(step: StepRecord, judged: str | None) -> DocStep:
    finished = step.state in RAN
    return DocStep(
        id=step.id,
        sha=step.sha,
        kind=step.kind,
        round=step.round,
        state=step.state,
        verdict=judged or step.verdict or ("infra" if finished else None),
        exit_code=step.exit_code,
        metric=step.metric,
        infra_reason=step.infra_reason,
        duration_s=step.duration_s,
        runner=runner_label(step.runner) or None,
        run_urls=run_urls(step.runner),
        env_key=step.env_key,
        env_reused=step.env_reused,
        started_at=aware(step.started_at),
        finished_at=aware(step.finished_at),
        tests={
            t: DocStepTest(
                kind=r.kind.value,
                verdict=r.verdict.value if r.verdict else None,
                exit_code=r.exit_code,
                metric=r.metric,
                infra_reason=r.infra_reason,
            )
            for t, r in results_of(step).items()
        },
    )


def _revert(row: BisectionRecord, outcome: BisectionOutcome) -> DocRevert | None:
    """The revert on ONTO, when one was asked for: made, found made already (the outcome's `already_reverted`, as
    the CLI and the publisher record it) or not made, and why."""
    if not row.head:
        return None
    found = outcome.already_reverted
    status = "made" if row.revert else "already_reverted" if found else "not_made" if row.revert_error else None
    return DocRevert(
        onto=row.head,
        sha=row.revert,
        branch=outcome.branch,
        error=row.revert_error,
        status=status,
        reverted_by=DocRevertedBy.model_validate(found) if found else None,
    )


def _ab(row: BisectionRecord, outcome: BisectionOutcome, steps: Sequence[DocStep]) -> DocAB | None:
    """The A/B once it has runs or an answer: its verdicts as the engine judged them, `passed` null until then."""
    told = outcome.ab
    if told is None and not steps:
        return None
    if told is None:
        return DocAB(head=row.head, revert=row.revert, steps=list(steps))
    return DocAB(
        head=told.head or row.head,
        revert=told.revert or row.revert,
        passed=told.passed if "passed" in told.model_fields_set else None,
        head_verdicts=told.head_verdicts,
        revert_verdicts=told.revert_verdicts,
        head_from=told.head_from,
        steps=list(steps),
    )
