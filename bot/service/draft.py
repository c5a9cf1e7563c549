"""Assembling the revert PR's evidence from a finished bisection (its rows, A/B, replay log)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bot.domain.bisect.confirmation import head_stand_ins
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import entry
from bot.domain.bisect.model import BISECT_KINDS, Kind, Problem
from bot.domain.bisect.verdict import Verdict
from bot.domain.cost import cost_of_steps, git_range
from bot.domain.outcome import AB as OutcomeAB
from bot.domain.subjects import pr_number, strip_pr_number
from bot.ports import Git, Revert
from bot.ports.store import BisectionRecord
from bot.service.case_facts import case_of
from bot.service.config import BisectConfig
from bot.service.driver import finished_runs
from bot.service.group_rows import git_ranges, group_of
from bot.service.pr_body import (
    AB,
    Culprit,
    FailingTest,
    FixedTest,
    PullRequestDraft,
    RevertEvidence,
    Row,
    render,
)
from bot.service.report import replay_log


@dataclass(frozen=True)
class PrRecord:
    number: int
    title: str
    author: str | None = None


def _summary(verdicts: list[Verdict]) -> str:
    counts = {v: verdicts.count(v) for v in Verdict if v in verdicts}
    return " ".join(f"{v.value}" + (f" x{c}" if c > 1 else "") for v, c in counts.items())


def _values(values: list[float | None], exits: list[int | None]) -> str:
    shown = [f"{v:.4g}" for v in values if v is not None]
    return ", ".join(shown) if shown else ", ".join("-" if e is None else str(e) for e in exits)


def draft(
    row: BisectionRecord,
    problem: Problem,
    repo: Git,
    revert: Revert,
    *,
    repo_slug: str,
    branch: str,
    test: FailingTest,
    prs: Mapping[str, PrRecord] = {},
    followups: list[int] = (),
    fixes: Sequence[str],
    followup_why: str = "",
) -> PullRequestDraft:
    """The revert PR for a found, proven culprit. `fixes`: the tests of the bisection this culprit broke, each
    listed with its own A/B; the first one's runs make the bisect table (`test` is it)."""
    outcome = entry(row.tests, fixes[0]).told
    culprit = outcome.culprit
    config = BisectConfig.from_json(row.settings)
    # a group's member is judged by its own rule (a metric, or its exit code) from its own GOOD, as the search judged it
    problems = group_of(problem, row, config.settings_for)[0].problems
    searched = problem  # the union of its tests' ranges
    problem = problems[fixes[0]]
    evidence = Evidence.of(problem, runs_of_test(row, fixes[0]))
    by_sha: dict[str, list] = defaultdict(list)
    by_ci: dict[str, list] = defaultdict(list)  # CI's readings: free evidence, shown apart from the runner's
    for run, verdict in evidence.verdicts:
        if run.kind in BISECT_KINDS:
            by_sha[run.sha].append((verdict, run.raw))
        elif run.kind is Kind.CI:
            by_ci[run.sha].append((verdict, run.raw))
    subjects = repo.subjects(list({**by_ci, **by_sha}) + [culprit])
    order = [problem.good] + list(problem.scope(()).candidates)
    position = {sha: i for i, sha in enumerate(order)}
    rows = []
    for sha in sorted({**by_ci, **by_sha}, key=lambda s: position.get(s, len(order))):
        record = prs.get(sha)
        subject = subjects.get(sha, "")
        ours, ci = by_sha.get(sha, []), by_ci.get(sha, [])
        rows.append(
            Row(
                sha,
                record.title if record else strip_pr_number(subject),
                _summary([v for v, _ in ours]),
                _values([r.metric for _, r in ours], [r.exit_code for _, r in ours]),
                record.number if record else pr_number(subject),
                ci=_summary([v for v, _ in ci]),
                ci_values=", ".join(f"{r.metric:.4g}" for _, r in ci if r.metric is not None),  # CI's passes print none
            )
        )
    parents = repo.parents(culprit)
    parent = parents[0]
    record = prs.get(culprit)
    culprit_info = Culprit(
        culprit,
        parent,
        record.title if record else strip_pr_number(subjects[culprit]),
        record.number if record else pr_number(subjects[culprit]),
        record.author if record else None,
        merge=len(parents) > 1,
    )
    ab = _ab(problem, evidence, revert, outcome.ab)
    fixed = []
    for member in fixes:
        told = entry(row.tests, member).told
        theirs = _ab(problems[member], Evidence.of(problems[member], runs_of_test(row, member)), revert, told.ab)
        fixed.append(
            FixedTest(
                member,
                theirs.head_verdicts,
                theirs.revert_verdicts,
                theirs.head_values,
                theirs.revert_values,
                theirs.passed,
            )
        )
    metric = lambda sha: [r.metric for v, r in by_sha.get(sha, []) if r.metric is not None]  # noqa: E731
    # git is given each red test's own range, as a person would start from it: one bisection per test of a group
    ranges = git_ranges(row, searched)
    cost = cost_of_steps(row.steps, config.gpus, ranges)
    together = len(ranges)  # the tests bisected: a JUnit report's green ones were not
    body = RevertEvidence(
        repo_slug=repo_slug,
        branch=branch,
        culprit=culprit_info,
        test=test,
        rows=rows,
        ab=ab,
        files=revert.files,
        diffstat=revert.diffstat,
        replay_log=replay_log(row, problem, repo, fixes[0]).rstrip(),
        bisection_id=row.id,
        confidence=outcome.confidence or 0.0,
        runs=sum(s.state in ("done", "lost") and s.kind != Kind.CI.value for s in row.steps),
        cost=cost.held(),
        versus_git=cost.versus_git(),
        ci_runs=sum(s.kind == Kind.CI.value for s in row.steps),
        commits=git_range(problem.graph, problem.good, problem.bad),  # the window: this test's own GOOD..BAD
        searched=len(searched.graph) if together > 1 else 0,
        together=together,
        before=metric(parent),
        after=metric(culprit),
        followups=list(followups),
        case=case_of(row, problem, repo, culprit, fixes[0]),
        good=problem.good,
        bad=problem.bad,
        followup_why=followup_why,
        fixes=fixed,
        effect=outcome.effect.words if outcome.effect else "",
    )
    return render(body, revert.branch)


def runs_of_test(row: BisectionRecord, test: str):
    """The runs of one test of the bisection."""
    return [r for r in finished_runs(row) if r.test == test]


def _ab(problem: Problem, evidence: Evidence, revert: Revert, told: OutcomeAB | None) -> AB:
    """The A/B table's two rows. HEAD's row: its own A/B runs, or, when something stood for them (BAD's runs, or CI's
    reproduced red reading of BAD: bot.domain.bisect.confirmation), the verdicts the A/B counted, named as such."""
    ab_runs: dict[Kind, list] = defaultdict(list)
    for run, verdict in evidence.verdicts:
        if run.kind in (Kind.AB_HEAD, Kind.AB_REVERT):
            ab_runs[run.kind].append((verdict, run.raw))
    head, reverted = ab_runs[Kind.AB_HEAD], ab_runs[Kind.AB_REVERT]
    head_summary = _summary([v for v, _ in head])
    if told and told.head_from:  # the verdicts the A/B counted, what stood for HEAD's runs among them
        head_summary = f"{_summary([Verdict(v) for v in told.head_verdicts])} ({told.head_from})"
        stood, n = [(v, r.raw) for r, v in head_stand_ins(problem, evidence)], len(told.head_verdicts) - len(head)
        head = (stood[-n:] if n > 0 else []) + head  # their values beside HEAD's own A/B runs'
    return AB(
        revert.onto,
        revert.sha,
        head_summary,
        _summary([v for v, _ in reverted]),
        _values([r.metric for _, r in head], [r.exit_code for _, r in head]),
        _values([r.metric for _, r in reverted], [r.exit_code for _, r in reverted]),
        bool(told and told.passed),
    )
