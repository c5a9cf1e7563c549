"""The outcome of a bisection as data: the `--json` document and the replay log."""

from __future__ import annotations

from collections import defaultdict

from bot.domain.bisect.candidates import first_parent_chain
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import entries, runs_of, step_verdict
from bot.domain.bisect.model import BISECT_KINDS, Problem, Status
from bot.domain.bisect.replay import render
from bot.domain.cost import cost_of_steps, ranges_words
from bot.domain.outcome import BisectionOutcome, best_guess_of, culprit_of, outcome_of
from bot.ports import Clones, Git
from bot.ports.store import BisectionRecord
from bot.service.config import BisectConfig
from bot.service.driver import finished_runs
from bot.service.group_rows import git_ranges, group_of

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


def to_json(row: BisectionRecord, problem: Problem, repo: Git, clones: Clones) -> dict:
    outcome = outcome_of(row) or BisectionOutcome()
    config = BisectConfig.from_json(row.settings)
    ran = [s for s in row.steps if s.state in ("done", "lost")]
    # a culprit only once found, to revert; an answer short of it names its commit as the best guess, never there
    culprit, guess = culprit_of(row.status, outcome), best_guess_of(row.status, outcome)
    subjects = repo.subjects([sha for sha in (culprit, guess) if sha])
    rounds: dict[str, set[int]] = defaultdict(set)
    runs_by_kind: dict[str, int] = defaultdict(int)
    for s in ran:
        rounds[s.kind].add(s.round)
        runs_by_kind[s.kind] += 1
    cost = cost_of_steps(row.steps, config.gpus, git_ranges(row, problem))
    judged = _judged(row, problem, config)
    steps = []
    for step in ran:
        verdict = judged.get(step.id, step.verdict or "infra")
        steps.append(
            dict(
                sha=step.sha,
                kind=step.kind,
                round=step.round,
                verdict=verdict,
                exit_code=step.exit_code,
                metric=step.metric,
                infra_reason=step.infra_reason,
                duration_s=step.duration_s,
                runner=step.runner,
                tests=step.results or {},
            )
        )
    report = dict(
        id=row.id,
        status=row.status,
        message=outcome.message,
        culprit=culprit,
        culprit_subject=subjects.get(culprit) if culprit else None,
        first_parent_culprit=outcome.first_parent_culprit if culprit else None,
        best_guess=guess,
        best_guess_subject=subjects.get(guess) if guess else None,
        confidence=outcome.confidence,
        effect=(outcome.facts or {}).get("effect"),  # a sampled metric's shift at the culprit, with its interval
        candidates=outcome.candidates,
        good=row.good,
        bad=row.bad,
        range_size=len(problem.graph),
        flake_rate=row.flake_rate,
        metric_boundary=row.boundary,
        rounds=len({s.round for s in ran}),  # confirmation and A/B share rounds
        rounds_by_kind={k: len(v) for k, v in sorted(rounds.items())},
        runs_by_kind=dict(sorted(runs_by_kind.items())),
        runs=len(ran),
        # the runners' time: every finished run's duration, and what the cancelled runs held them for
        runner_seconds=round(cost.runner_s, 1),
        cancelled=dict(runs=cost.cancelled, runner_seconds=round(cost.cancelled_s, 1)),
        # what `git bisect run` would have spent on the same range, at this bisection's median run (bot.domain.cost):
        # per red test, each from its own GOOD as CI's readings of it leave it (`ranges`: their sizes in commits)
        git_bisect_run=dict(
            runs=cost.git_runs, runner_seconds=round(cost.git_runner_s, 1), ranges=list(cost.git_ranges)
        ),
        steps=steps,
        revert=_revert_info(row, repo, clones),
        ab=outcome.ab.as_json() if outcome.ab else None,
        tests=tests_of(row),
    )
    return report


def _judged(row: BisectionRecord, problem: Problem, config: BisectConfig) -> dict[int, str]:
    """Each finished step's verdict as its tests' calibrated boundaries judge it now (one word for its tests:
    bot.domain.bisect.ledger.step_verdict); a step that carried no test keeps the word stored for it."""
    ran = [s for s in row.steps if s.state in ("done", "lost")]
    runs = finished_runs(row)  # in step order, a run per test each step carried
    problems = group_of(problem, row, config.settings_for)[0].problems if row.tests else {}
    judged = {
        t: iter([v for _, v in Evidence.of(p, [r for r in runs if r.test == t]).verdicts]) for t, p in problems.items()
    }
    out = {}
    for step in ran:
        said = [next(judged[r.test]) for r in runs_of(step) if r.test in judged]
        if said:
            out[step.id] = step_verdict(said).value
    return out


def tests_of(row: BisectionRecord) -> list[dict]:
    """Each test: its culprit (or null), its best guess when it ended short of one, how it stands or ended, and the
    runs that carried it."""
    ran = [s for s in row.steps if s.state in ("done", "lost")]
    return [
        dict(
            test=e.test,
            culprit=e.culprit,
            best_guess=e.best_guess if e.status else None,
            outcome=e.word,
            runs=sum(e.test in (s.results or {}) for s in ran),
            message=e.told.message,
        )
        for e in entries(row.tests)
    ]


KIND_WORDS = {  # in the order a bisection spends them
    "calibrate": "calibration",
    "search": "search",
    "confirm": "confirmation",
    "ab_head": "A/B on HEAD",
    "ab_revert": "A/B on HEAD + revert",
}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _endpoint_tally(report: dict, name: str, verdict: str) -> tuple[int, int]:
    """(runs of endpoint `name` with `verdict`, runs of it with a verdict at all) among the range's runs."""
    sha = report[name]
    mine = [s["verdict"] for s in report["steps"] if s["sha"] == sha and s["kind"] in {k.value for k in BISECT_KINDS}]
    judged = [v for v in mine if v in ("good", "bad")]
    return judged.count(verdict), len(judged)


def _headline(report: dict) -> str:
    status, culprit = Status(report["status"]), report["culprit"]
    if status is Status.FOUND:
        found = {t["culprit"] for t in report.get("tests", []) if t["culprit"]}
        return f"found {len(found)} culprits" if len(found) > 1 else f"found {(culprit or found.pop())[:10]}"
    if status is Status.AMBIGUOUS:
        last = report.get("best_guess") or report["candidates"][-1]
        return f"ambiguous: the culprit is one of {len(report['candidates'])} commits ending at {last[:10]}"
    if status in (Status.NOT_REPRODUCIBLE, Status.NO_CULPRIT):
        passed, judged = _endpoint_tally(report, "bad", "good")
        what = "not reproducible" if status is Status.NOT_REPRODUCIBLE else "no culprit"
        return f"{what}: BAD passed {passed} of {_count(judged, 'run')}"
    if status is Status.GOOD_FAILS:
        failed, judged = _endpoint_tally(report, "good", "bad")
        return f"GOOD fails too: GOOD failed {failed} of {_count(judged, 'run')}"
    if status is Status.UNTESTABLE:
        blind = [name.upper() for name in ("good", "bad") if _endpoint_tally(report, name, "good")[1] == 0]
        return f"untestable: {' and '.join(blind) or 'an endpoint'} gave no result"
    if status is Status.INCONCLUSIVE and report.get("best_guess"):
        return f"inconclusive: best guess {report['best_guess'][:10]} at P={report['confidence']:.3f}"
    return status.value.replace("_", " ")


def summary(report: dict) -> str:
    """The outcome in one sentence, e.g. `found 0675d3033f in 20 runs over 8 rounds (4 calibration, 12 search,
    4 confirmation)` or `not reproducible: BAD passed 2 of 2 runs; 2 runs over 1 round (2 calibration)`:
    what a person reads at the end of `revert-bisect bisect`."""
    by_kind = report["runs_by_kind"]
    kinds = ", ".join(f"{by_kind[kind]} {words}" for kind, words in KIND_WORDS.items() if kind in by_kind)
    spent = f"{_count(report['runs'], 'run')} over {_count(report['rounds'], 'round')}" + (
        f" ({kinds})" if kinds else ""
    )
    if report.get("runner_seconds"):  # the runners' time is the cost: every run's, cancelled ones too
        spent += f"; {report['runner_seconds'] / 60:.1f} runner-minutes"
    cancelled = report.get("cancelled") or {}
    if cancelled.get("runs"):  # paid for, though their answers were not needed in the end
        minutes = cancelled["runner_seconds"] / 60
        spent += f"; {_count(cancelled['runs'], 'run')} cancelled after {minutes:.1f} runner-minutes"
    git = report.get("git_bisect_run") or {}
    if git.get("runs"):  # beside what `git bisect run` would spend on the range, verifying nothing
        ranges = git.get("ranges") or []
        each = f" once per red test, {ranges_words(ranges)}" if len(ranges) > 1 else ""
        spent += f"; git bisect run{each}: ~{_count(git['runs'], 'run')}, ~{git['runner_seconds'] / 60:.1f} "
        spent += "runner-minutes"
    found = report["status"] == Status.FOUND.value
    return f"{_headline(report)}{' in ' if found else '; '}{spent}"


def _revert_info(row: BisectionRecord, repo: Git, clones: Clones) -> dict | None:
    if not row.head:
        return None
    branch = None
    if row.revert:
        branches = repo.branches_at(row.revert)
        branch = branches[0] if branches else None
    culprit = culprit_of(row.status, outcome_of(row) or BisectionOutcome())
    # The driver kept only the reverter's words; the typed answer is asked of git again (ONTO is a sha: same answer).
    found = clones.find_revert(repo, culprit, row.head) if culprit and not row.revert and row.revert_error else None
    status = "made" if row.revert else "already_reverted" if found else "not_made" if row.revert_error else None
    return dict(
        onto=row.head,
        sha=row.revert,
        branch=branch,
        error=row.revert_error,
        status=status,
        reverted_by=found.as_json() if found else None,
    )


def replay_log(row: BisectionRecord, problem: Problem, repo: Git, test: str | None = None) -> str:
    """What `git bisect replay` accepts. A group's log is one test's (git bisects one test): `test`, else its first
    test with a culprit, else its first test."""
    tests = entries(row.tests)
    chosen = next((e for e in tests if e.test == test or (test is None and e.culprit)), tests[0] if tests else None)
    runs = [r for r in finished_runs(row) if chosen is not None and r.test == chosen.test]
    culprit = chosen.culprit if chosen else None
    evidence = Evidence.of(problem, runs)
    verdicts = defaultdict(list)
    for run, verdict in evidence.verdicts:
        if run.kind in BISECT_KINDS:
            verdicts[run.sha].append(verdict)
    first_parent = culprit is None or culprit in first_parent_chain(problem.graph, problem.bad)
    subjects = repo.subjects(list(verdicts) + ([culprit] if culprit else []))
    return render(problem.graph, problem.good, problem.bad, first_parent, verdicts, subjects, culprit)
