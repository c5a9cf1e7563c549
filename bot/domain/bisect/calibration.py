"""Calibration's runs: the endpoint runs still missing, the search runs presumed while they are under way, and
what the endpoints' metric readings already settle (bot.domain.bisect.engine's CALIBRATING phase)."""

from __future__ import annotations

from itertools import zip_longest

from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.model import Decision, Kind, Outcome, Probe, Problem, Status
from bot.domain.bisect.planner import choose_probes, runs_worth_starting
from bot.domain.bisect.posterior import Contradiction, Posterior, Tally
from bot.domain.bisect.turn import Turn
from bot.domain.bisect.verdict import MetricRule, Verdict
from bot.domain.reasons import Reason


def calibration_round(t: Turn, needs: list[str], presume: bool) -> Decision:
    """Endpoint runs, and search runs on the runners they leave free while the endpoints are presumed
    right; once an endpoint surprised, the search runs under way were planned on a false premise."""
    obsolete = () if presume else tuple(p for p in t.in_flight if p.kind is Kind.SEARCH)
    free = t.free + len(obsolete)
    probes = [t.probe(sha, Kind.CALIBRATE) for sha in needs[:free]]
    if presume:
        runners = free + len(t.in_flight) - len(obsolete)
        probes += presumed_search(t, free - len(probes), runners)
    return t.decision(tuple(probes), obsolete)


def calibration_needs(t: Turn, each: int) -> list[str]:
    """The endpoint runs still missing for `each` results per testable endpoint, GOOD and BAD interleaved.

    Each endpoint runs at least once on the bisect runner. CI's readings there stand for one of the `each`
    while they agree with the runner's (a flaky test's second calibration run is skipped; should the runner's
    first reading disagree, the run is asked for after all).

    An endpoint taken as read (`taken_as_read`) whose every reading so far says what its role says (CI read GOOD green
    and BAD red; on the CLI, the user's word with no reading at all) needs no run of its own: the search starts
    at once, and runs the endpoint only when its results contradict it (everything passes: the culprit would be
    BAD, whose FAIL the runner must show; GOOD's neighbour fails: GOOD's PASS is wanted, bot.domain.bisect.engine).
    A metric without a threshold is never taken as read: its boundary comes from the endpoints' own readings."""
    problem, ev = t.problem, t.evidence
    untestable = ev.untestable(problem.settings)
    as_read = taken_as_read(problem, ev)
    need = {}
    for sha, role in ((problem.good, Verdict.GOOD), (problem.bad, Verdict.BAD)):
        runner = [v for v in ev.of_sha(sha, ci=False) if v.is_evidence]
        ci = [v for r, v in ev.verdicts if r.sha == sha and r.kind is Kind.CI and v.is_evidence]
        agree = bool(ci) and len(set(ci + runner)) == 1
        taken = role in as_read and all(v is role for v in ci + runner)
        have = len(runner) + sum(p.sha == sha for p in t.in_flight)
        floor = 0 if taken else 1
        want = each
        if (
            role is Verdict.BAD and runner and Verdict.BAD not in runner and problem.settings.flake_rate != 0
        ):  # reproduced yet only as an intermittent
            want = max(each, problem.settings.reproduce_runs)  # failure is: BAD is "not reproducible" only after this
        need[sha] = 0 if sha in untestable else max(0, floor - have, want - have - (agree or taken))
    return [sha for batch in zip_longest(*([sha] * k for sha, k in need.items())) for sha in batch if sha is not None]


def taken_as_read(problem: Problem, ev: Evidence) -> frozenset[Verdict]:
    """The endpoints' roles that may stand as read (GOOD and BAD with `trust_endpoints`, GOOD with `good_as_read`
    for a test judged by its exit code):
    none for a metric without a threshold, and none once a run on the bisect runner gave no verdict (its
    infrastructure failed, or it could not be set up: exit 125) -- then whether the runner can run the test at all
    is the question, and the endpoints answer it first (an environment no commit can be set up in ends "untestable"
    at them, not after a search through every commit; an unbuildable commit in the range costs the endpoints'
    calibration, as without trust)."""
    s = problem.settings
    if s.trust_endpoints:
        roles = frozenset((Verdict.GOOD, Verdict.BAD))
    else:  # GOOD alone, for an exit code: a metric's boundary is read from both endpoints' readings, or from neither
        roles = frozenset((Verdict.GOOD,) if s.good_as_read and s.metric is None else ())
    if not roles or (s.metric is not None and s.metric.threshold is None):
        return frozenset()
    return roles if all(v.is_evidence for r, v in ev.verdicts if r.kind is not Kind.CI) else frozenset()


def calibration_owed(t: Turn) -> bool:
    """Whether endpoints taken as read are calibrated after all, from the search: a run gave no verdict (then whether
    the runner can run the test at all is asked of them, see `taken_as_read`), or one of them said the opposite when
    it ran (GOOD failed, BAD passed: calibrated as any surprising endpoint, the bisection ends good_fails or
    not_reproducible if its runs agree). Once an endpoint was run, its calibration round, or its end as untestable,
    comes from the engine's calibration phase as without trust."""
    problem, ev, s = t.problem, t.evidence, t.settings
    if not s.reads_endpoints:
        return False
    endpoints = (problem.good, problem.bad)
    if not taken_as_read(problem, ev) and (
        not all(any(v.is_evidence for v in ev.of_sha(sha, ci=False)) for sha in endpoints)
        or ev.untestable(s) & set(endpoints)
    ):
        return True
    return ev.surprised(problem) and bool(calibration_needs(t, s.calibration_runs))


def presumed_search(t: Turn, free: int, runners: int) -> list[Probe]:
    """Search probes for the `free` runners calibration leaves, planned as if GOOD passes and BAD fails
    (what a deterministic test's endpoints do), so the search does not wait a round for them.

    Only in the first round: speculation stays one round deep (a surprising endpoint wastes at most
    those runs), and a runner freed early waits for the endpoints instead of starting a round of
    its own (a metric reading could not be judged before they set the boundary anyway)."""
    if free <= 0 or t.evidence.ran():
        return []
    scope = t.problem.scope(())
    n = len(scope.candidates)
    tallies = t.evidence.tallies(scope)
    tallies[n] = tallies.get(n, Tally()).add(False)  # BAD presumed to fail; position 0 is GOOD by construction
    try:
        post = Posterior.compute(n, tallies, 0.0)
    except Contradiction:  # --flake-rate 0 with contradicting results: the search says so once calibrated
        return []
    busy = [p for p in (scope.position(pr.sha) for pr in t.in_flight) if p is not None]
    free = min(free, runs_worth_starting(post, runners, sum(p.kind is Kind.SEARCH for p in t.in_flight)))
    return [t.probe(scope.sha(p), Kind.SEARCH) for p in choose_probes(post, free, busy, t.untestable_in(scope))]


def metric_calibration(problem: Problem, ev: Evidence, rule: MetricRule) -> Outcome | None:
    readings = {
        sha: [
            r.raw.metric
            for r, v in ev.verdicts
            if r.sha == sha and r.kind is Kind.CALIBRATE and r.raw.metric is not None
        ]
        for sha in (problem.good, problem.bad)
    }
    good, bad = readings[problem.good], readings[problem.bad]
    shown = lambda vals: ", ".join(f"{v:.6g}" for v in vals) or "no value"  # noqa: E731
    if not bad or not good:
        found = f"the metric was not reported on the endpoints (GOOD: {shown(good)}; BAD: {shown(bad)})"
        return Outcome(Status.UNTESTABLE, found, reason=Reason.METRIC_MISSING)
    if ev.boundary is None:
        return Outcome(
            Status.NOT_REPRODUCIBLE,
            f"BAD's metric ({shown(bad)}) is not worse than GOOD's ({shown(good)}): nothing to bisect",
        )
    if rule.threshold is not None:
        if not any(rule.worse(v, rule.threshold) for v in bad):
            return Outcome(
                Status.NOT_REPRODUCIBLE,
                f"BAD reads {shown(bad)}, within the threshold {rule.threshold:g}: the failure does not reproduce",
            )
        if all(rule.worse(v, rule.threshold) for v in good):
            found = f"GOOD already reads {shown(good)}, beyond the threshold {rule.threshold:g}"
            return Outcome(Status.GOOD_FAILS, found, reason=Reason.GOOD_FAILS, facts=dict(sha=problem.good))
    return None
