"""The outcome of a bisection in words (the sentence `revert-bisect bisect` ends with), its exit code and its
replay log (bot.service.document is its JSON)."""

from __future__ import annotations

from collections import defaultdict

from bot.domain.bisect.candidates import first_parent_chain
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import BISECT_KINDS, Problem, Status
from bot.domain.bisect.replay import render
from bot.domain.cost import ranges_words
from bot.ports import Git
from bot.ports.store import BisectionRecord
from bot.service.document import BisectionDocument
from bot.service.driver import finished_runs

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


KIND_WORDS = {  # in the order a bisection spends them
    "calibrate": "calibration",
    "search": "search",
    "confirm": "confirmation",
    "ab_head": "A/B on HEAD",
    "ab_revert": "A/B on HEAD + revert",
}


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _endpoint_tally(doc: BisectionDocument, sha: str, verdict: str) -> tuple[int, int]:
    """(runs of endpoint `sha` with `verdict`, runs of it with a verdict at all) among the range's runs."""
    mine = [s.verdict for s in doc.steps if s.sha == sha and s.kind in {k.value for k in BISECT_KINDS}]
    judged = [v for v in mine if v in ("good", "bad")]
    return judged.count(verdict), len(judged)


def _headline(doc: BisectionDocument) -> str:
    status = Status(doc.status)
    if status is Status.FOUND:
        found = list(dict.fromkeys(c for c in (doc.culprit, *(t.culprit for t in doc.tests)) if c))
        return f"found {len(found)} culprits" if len(found) > 1 else f"found {found[0][:10]}"
    if status is Status.AMBIGUOUS:
        last = doc.best_guess or doc.candidates[-1]
        return f"ambiguous: the culprit is one of {len(doc.candidates)} commits ending at {last[:10]}"
    if status in (Status.NOT_REPRODUCIBLE, Status.NO_CULPRIT):
        passed, judged = _endpoint_tally(doc, doc.bad, "good")
        what = "not reproducible" if status is Status.NOT_REPRODUCIBLE else "no culprit"
        return f"{what}: BAD passed {passed} of {_count(judged, 'run')}"
    if status is Status.GOOD_FAILS:
        failed, judged = _endpoint_tally(doc, doc.good, "bad")
        return f"GOOD fails too: GOOD failed {failed} of {_count(judged, 'run')}"
    if status is Status.UNTESTABLE:
        ends = (("GOOD", doc.good), ("BAD", doc.bad))
        blind = [name for name, sha in ends if _endpoint_tally(doc, sha, "good")[1] == 0]
        return f"untestable: {' and '.join(blind) or 'an endpoint'} gave no result"
    if status is Status.INCONCLUSIVE and doc.best_guess:
        return f"inconclusive: best guess {doc.best_guess[:10]} at P={doc.confidence or 0.0:.3f}"
    return status.value.replace("_", " ")


def spent(doc: BisectionDocument) -> str:
    """What the bisection spent, e.g. `20 runs over 8 rounds (4 calibration, 12 search, 4 confirmation); 3.1
    runner-minutes; git bisect run: ~5 runs, ~1.2 runner-minutes`."""
    by_kind = doc.runs_by_kind
    kinds = ", ".join(f"{by_kind[kind]} {words}" for kind, words in KIND_WORDS.items() if kind in by_kind)
    said = f"{_count(doc.runs, 'run')} over {_count(doc.rounds, 'round')}" + (f" ({kinds})" if kinds else "")
    if doc.runner_seconds:  # the runners' time is the cost: every run's, cancelled ones too
        said += f"; {doc.runner_seconds / 60:.1f} runner-minutes"
    if doc.cancelled.runs:  # paid for, though their answers were not needed in the end
        minutes = doc.cancelled.runner_seconds / 60
        said += f"; {_count(doc.cancelled.runs, 'run')} cancelled after {minutes:.1f} runner-minutes"
    git = doc.git_bisect_run
    if git.runs:  # beside what `git bisect run` would spend on the range, verifying nothing
        each = f" once per red test, {ranges_words(git.ranges)}" if len(git.ranges) > 1 else ""
        said += f"; git bisect run{each}: ~{_count(git.runs, 'run')}, ~{git.runner_seconds / 60:.1f} runner-minutes"
    return said


def summary(doc: BisectionDocument) -> str:
    """The outcome in one sentence, e.g. `found 0675d3033f in 20 runs over 8 rounds (4 calibration, 12 search,
    4 confirmation)` or `not reproducible: BAD passed 2 of 2 runs; 2 runs over 1 round (2 calibration)`:
    what a person reads at the end of `revert-bisect bisect`."""
    found = doc.status == Status.FOUND.value
    return f"{_headline(doc)}{' in ' if found else '; '}{spent(doc)}"


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
