"""Which tests a bisection of a JUnit report bisects: those red at BAD (among `--tests`), learnt from BAD's report.

The first step runs the command at BAD (and at GOOD on a second runner: the calibration run every test would ask
for anyway). Every test of BAD's report becomes a test of the group: one failing there is bisected, one passing
there ends at once as not reproducible. Discovery steps are calibration runs of round 0; their results are stored
per test, so the engine counts them, and a resumed bisection does not run them again.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace

from bot.domain.bisect.ledger import Entry, Result, outcome_model, results_of
from bot.domain.bisect.model import Kind, Outcome, Phase, Problem, State, Status
from bot.domain.bisect.verdict import RawResult, Verdict, classify
from bot.domain.reasons import Reason
from bot.observability.heartbeat import beat
from bot.ports.store import BisectionStore, NewStep, StepRecord, StepReport
from bot.service.group_rows import raw_results, read_report, step_report
from runners.spec import Backend, StepResult, StepSpec, new_ref

ROUND = 0
CANCELLED = "cancelled on request before an answer"


def discover(
    store: BisectionStore,
    bisection_id: int,
    problem: Problem,
    pattern: str | None,
    max_infra: int,
    backend: Backend,
    spec: Callable[[int, str, str], StepSpec],  # (step id, sha, runner ref) -> the step to run
    cancelled: Callable[[], bool] = lambda: False,
) -> list[Entry] | str:
    """The report's tests (bisections.tests), stored; or why there are none to bisect (the bisection then ends)."""
    wanted = re.compile(pattern) if pattern else None
    while not cancelled():
        steps = [s for s in store.get(bisection_id).steps if s.kind == Kind.CALIBRATE.value and s.round == ROUND]
        at_bad = [s for s in steps if s.sha == problem.bad]
        usable = [s for s in at_bad if read_report(s)]
        if usable:
            return _tests(store, bisection_id, problem, usable[-1])
        if at_bad and at_bad[-1].exit_code == 125 and at_bad[-1].state == "done":
            return f"the command exited 125 (cannot be tested) at BAD {problem.bad[:12]}: no test to bisect"
        if len(at_bad) >= max_infra:
            why = at_bad[-1].infra_reason or "no report"
            return f"BAD {problem.bad[:12]} said nothing of its tests {len(at_bad)} times: {why}"
        ran = {s.sha for s in steps if s.state == "done"}
        shas = [problem.bad] + ([problem.good] if backend.free >= 2 and problem.good not in ran else [])
        _run(store, bisection_id, shas, backend, spec, wanted, cancelled)
    return CANCELLED


def _run(
    store: BisectionStore,
    bisection_id: int,
    shas: Sequence[str],
    backend: Backend,
    spec: Callable[[int, str, str], StepSpec],
    wanted: re.Pattern[str] | None,
    cancelled: Callable[[], bool],
) -> None:
    refs = [new_ref() for _ in shas]
    name = getattr(backend, "name", None)
    ids = store.add_steps(
        bisection_id, [NewStep(sha, Kind.CALIBRATE.value, ROUND, ref, name) for sha, ref in zip(shas, refs)]
    )
    for step_id, sha, ref in zip(ids, shas, refs):
        backend.submit(spec(step_id, sha, ref))
    pending = set(ids)
    while pending:
        beat()  # waiting for BAD's report, not stuck (the worker's liveness)
        if cancelled():  # stopped on request: the runs in flight say nothing
            backend.cancel(list(pending))
            store.mark_lost(bisection_id, "cancelled: the bisection was cancelled", state="cancelled", step_ids=pending)
            return
        for result in backend.wait(timeout=1.0):
            if result.step_id in pending:
                pending.discard(result.step_id)
                store.finish_step(result.step_id, _report(result, wanted))


def _report(result: StepResult, wanted: re.Pattern[str] | None) -> StepReport:
    tests = [c.case for c in result.cases if wanted is None or wanted.search(c.case)]
    raws = raw_results(result, tests, whole=False)
    results = {t: Result.of(Kind.CALIBRATE, raw, classify(raw, None, None)) for t, raw in raws.items()}
    report = step_report(result, results)
    if result.infra_reason is not None or not results:  # the report was not read: the exit code speaks
        report = replace(
            report, verdict=classify(RawResult(result.exit_code, None, result.infra_reason), None, None).value
        )
    return report


def _tests(store: BisectionStore, bisection_id: int, problem: Problem, at_bad: StepRecord) -> list[Entry] | str:
    results = results_of(at_bad)
    if not results:
        return f"BAD {problem.bad[:12]}'s JUnit report has no test to bisect (none matches --tests, or it is empty)"
    tests = [
        Entry(test, problem.good)
        if r.verdict is Verdict.BAD
        else _ended(Entry(test, problem.good), problem, r.verdict is Verdict.GOOD)
        for test, r in results.items()
    ]
    store.save_tests(bisection_id, tests)
    return tests


def _ended(test: Entry, problem: Problem, passed: bool) -> Entry:
    """A test of the report that did not fail at BAD: not bisected."""
    if passed:
        message = f"passes at BAD {problem.bad[:12]}: not bisected"
        out = Outcome(Status.NOT_REPRODUCIBLE, message, reason=Reason.BAD_PASSES, facts={"sha": problem.bad})
    else:
        message = f"skipped at BAD {problem.bad[:12]}: not bisected"
        facts = {"endpoint": "BAD", "side": "bad", "sha": problem.bad}
        out = Outcome(Status.UNTESTABLE, message, reason=Reason.ENDPOINT_UNTESTABLE, facts=facts)
    return replace(test, state=State(Phase.DONE), status=out.status, outcome=outcome_model(out))
