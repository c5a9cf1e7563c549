"""Assembling the revert PR's evidence from a finished bisection (its rows, A/B, replay log)."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass, field

from bot.domain.bisect.confirmation import head_stand_ins
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import entries, entry
from bot.domain.bisect.model import BISECT_KINDS, Kind, Problem
from bot.domain.cost import cost_of_steps, git_range
from bot.domain.outcome import AB as Proof
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
    values_text,
    verdicts_text,
)
from bot.service.report import replay_log


@dataclass(frozen=True)
class PrRecord:
    number: int
    title: str
    author: str | None = None


@dataclass(frozen=True)
class RevertCase:
    """What a revert PR is drafted from: the bisection as stored (`row`) and its problem; the clone (`repo`) and the
    revert made in it; the repository's slug and the branch it reverts on; the failing test as the tables name it;
    the tests the culprit broke (`fixes`, never empty: each listed with its own A/B, the first one's runs make the
    bisect table, `test` is it); the PRs known by commit (`prs`: the culprit's, others' titles for the table); the
    follow-ups linked and what the one found shares with the culprit (`followup_why`)."""

    row: BisectionRecord
    problem: Problem
    repo: Git
    revert: Revert
    repo_slug: str
    branch: str
    test: FailingTest
    fixes: tuple[str, ...]
    prs: Mapping[str, PrRecord] = field(default_factory=dict)
    followups: tuple[int, ...] = ()
    followup_why: str = ""

    def __post_init__(self) -> None:
        if not self.fixes:
            raise ValueError("a revert PR names the tests it fixes: `fixes` is empty")


def draft(case: RevertCase) -> PullRequestDraft:
    """The revert PR for a found, proven culprit."""
    row, repo, revert, fixes, prs = case.row, case.repo, case.revert, case.fixes, case.prs
    outcome = entry(row.tests, fixes[0]).told
    culprit = outcome.culprit
    config = BisectConfig.from_json(row.settings)
    # a group's member is judged by its own rule (a metric, or its exit code) from its own GOOD, as the search judged it
    problems = group_of(case.problem, row, config.settings_for)[0].problems
    searched = case.problem  # the union of its tests' ranges
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
                verdicts_text(v for v, _ in ours),
                values_text(r for _, r in ours),
                record.number if record else pr_number(subject),
                ci=verdicts_text(v for v, _ in ci),
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
    fixed = [
        FixedTest(
            test,
            _ab(
                problems[test],
                Evidence.of(problems[test], runs_of_test(row, test)),
                revert,
                entry(row.tests, test).told.ab,
            ),
        )
        for test in fixes
    ]
    metric = lambda sha: [r.metric for v, r in by_sha.get(sha, []) if r.metric is not None]  # noqa: E731
    # git is given each red test's own range, as a person would start from it: one bisection per test of a group
    ranges = git_ranges(row, searched)
    cost = cost_of_steps(row.steps, config.gpus, ranges)
    together = len(ranges)  # the tests bisected: a JUnit report's green ones were not
    body = RevertEvidence(
        repo_slug=case.repo_slug,
        branch=case.branch,
        culprit=culprit_info,
        test=case.test,
        rows=rows,
        ab=fixed[0].ab,
        files=revert.files,
        diffstat=revert.diffstat,
        replay_log=replay_log(row, problem, repo, fixes[0]).rstrip(),
        bisection_id=row.id,
        confidence=outcome.confidence or 0.0,
        runs=sum(s.state in ("done", "lost") for s in row.steps),
        cost=cost.held(),
        versus_git=cost.versus_git(),
        ci_runs=sum(len(e.ci) for e in entries(row.tests)),
        commits=git_range(problem.graph, problem.good, problem.bad),  # the window: this test's own GOOD..BAD
        searched=len(searched.graph) if together > 1 else 0,
        together=together,
        before=metric(parent),
        after=metric(culprit),
        followups=list(case.followups),
        case=case_of(row, problem, repo, culprit, fixes[0]),
        good=problem.good,
        bad=problem.bad,
        followup_why=case.followup_why,
        fixes=fixed,
        effect=outcome.effect.words if outcome.effect else "",
    )
    return render(body, revert.branch)


def runs_of_test(row: BisectionRecord, test: str):
    """The runs of one test of the bisection."""
    return [r for r in finished_runs(row) if r.test == test]


def _ab(problem: Problem, evidence: Evidence, revert: Revert, proof: Proof | None) -> AB:
    """The A/B table's two rows: the stored proof beside the runs of each side. HEAD's: its own A/B runs, after what
    stood for them when something did (BAD's runs, or CI's reproduced red reading of BAD:
    bot.domain.bisect.confirmation), as many of those as the A/B counted."""
    ab_runs: dict[Kind, list] = defaultdict(list)
    for run, verdict in evidence.verdicts:
        if run.kind in (Kind.AB_HEAD, Kind.AB_REVERT):
            ab_runs[run.kind].append((verdict, run.raw))
    proof = proof or Proof()
    head = ab_runs[Kind.AB_HEAD]
    if proof.head_from:  # their values beside HEAD's own A/B runs'
        stood, n = [(v, r.raw) for r, v in head_stand_ins(problem, evidence)], len(proof.head_verdicts) - len(head)
        head = (stood[-n:] if n > 0 else []) + head
    return AB(proof, revert.onto, revert.sha, tuple(head), tuple(ab_runs[Kind.AB_REVERT]))
