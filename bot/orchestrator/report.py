"""The outcome of a bisection as data: the `--json` document and the replay log."""

from __future__ import annotations

from collections import defaultdict

from bot.bisect.candidates import first_parent_chain
from bot.bisect.evidence import Evidence
from bot.bisect.model import BISECT_KINDS, Problem, Status
from bot.bisect.replay import render
from bot.gitrepo import GitRepo
from bot.orchestrator.driver import finished_runs
from bot.revert.already import find_revert
from bot.store.models import BisectionRow

EXIT_CODES = {
    Status.FOUND: 0,
    Status.AMBIGUOUS: 3,
    Status.NOT_REPRODUCIBLE: 4,
    Status.GOOD_FAILS: 5,
    Status.NO_CULPRIT: 6,
    Status.UNTESTABLE: 7,
    Status.INCONCLUSIVE: 8,
    Status.CANCELLED: 9,
}


def to_json(row: BisectionRow, problem: Problem, repo: GitRepo) -> dict:
    outcome = row.outcome or {}
    evidence = Evidence.of(problem, finished_runs(row))
    ran = [s for s in row.steps if s.state in ("done", "lost")]
    culprit = outcome.get("culprit")
    subjects = repo.subjects([culprit]) if culprit else {}
    rounds: dict[str, set[int]] = defaultdict(set)
    for s in ran:
        rounds[s.kind].add(s.round)
    steps = []
    for step, (_, verdict) in zip(ran, evidence.verdicts):  # same order: finished_runs keeps row order
        steps.append(dict(sha=step.sha, kind=step.kind, round=step.round, verdict=verdict.value, exit_code=step.exit_code, metric=step.metric, infra_reason=step.infra_reason, duration_s=step.duration_s, runner=step.runner))
    return dict(
        id=row.id,
        status=row.status,
        message=outcome.get("message"),
        culprit=culprit,
        culprit_subject=subjects.get(culprit) if culprit else None,
        first_parent_culprit=outcome.get("first_parent_culprit"),
        confidence=outcome.get("confidence"),
        candidates=outcome.get("candidates") or [],
        good=row.good,
        bad=row.bad,
        range_size=len(problem.graph),
        flake_rate=row.flake_rate,
        metric_boundary=evidence.boundary,
        rounds=len({s.round for s in ran}),  # confirmation and A/B share rounds
        rounds_by_kind={k: len(v) for k, v in sorted(rounds.items())},
        runs=len(ran),
        steps=steps,
        revert=_revert_info(row, repo),
        ab=outcome.get("ab"),
    )


def _revert_info(row: BisectionRow, repo: GitRepo) -> dict | None:
    if not row.head:
        return None
    branch = None
    if row.revert:
        branches = repo.repo.git.branch("--points-at", row.revert, "--format=%(refname:short)").split()
        branch = branches[0] if branches else None
    culprit = (row.outcome or {}).get("culprit")
    # The driver kept only the reverter's words; the typed answer is asked of git again (ONTO is a sha: same answer).
    found = find_revert(repo, culprit, row.head) if culprit and not row.revert and row.revert_error else None
    status = "made" if row.revert else "already_reverted" if found else "not_made" if row.revert_error else None
    return dict(onto=row.head, sha=row.revert, branch=branch, error=row.revert_error, status=status,
                reverted_by=found.as_json() if found else None)


def replay_log(row: BisectionRow, problem: Problem, repo: GitRepo) -> str:
    evidence = Evidence.of(problem, finished_runs(row))
    verdicts = defaultdict(list)
    for run, verdict in evidence.verdicts:
        if run.kind in BISECT_KINDS:
            verdicts[run.sha].append(verdict)
    culprit = (row.outcome or {}).get("culprit") if row.status == Status.FOUND.value else None
    first_parent = culprit is None or culprit in first_parent_chain(problem.graph, problem.bad)
    subjects = repo.subjects(list(verdicts) + ([culprit] if culprit else []))
    return render(problem.graph, problem.good, problem.bad, first_parent, verdicts, subjects, culprit)
