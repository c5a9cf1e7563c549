"""The culprit finder's decision function: given everything seen so far, what happens next.

`decide` is pure. The caller persists the returned state, dispatches the returned probes, and
calls again when results arrive. Phases (the state machine the README draws):

    CALIBRATING -> SEARCHING -> CONFIRMING -> DONE
                       ^  |  (merge culprit, descend)   |
                       |  +-> SEARCHING (nested scope) |
                       +------ confirmation disagreed --+

A test taken as deterministic (`evidence.trusted`: --flake-rate 0, or auto until a result
contradicts that) costs about what `git bisect run` spends: one calibration run per endpoint, the
search already running on the runners calibration leaves free (the endpoints presumed right; a
surprising one cancels those runs), and one confirmation re-run of the culprit under auto, none
under 0. A flaky one gets `calibration_runs` per endpoint and x re-runs of culprit and parent.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from itertools import zip_longest

from bot.domain.bisect.candidates import Scope, is_merge
from bot.domain.bisect.evidence import Evidence, effective_flake, trusted
from bot.domain.bisect.model import (
    CONFIRMATION_KINDS,
    ABResult,
    Decision,
    Guess,
    Kind,
    Outcome,
    Phase,
    Probe,
    Problem,
    Run,
    State,
    Status,
)
from bot.domain.bisect.planner import USEFUL, choose_probes
from bot.domain.bisect.posterior import Contradiction, Posterior, Tally
from bot.domain.bisect.verdict import MetricRule, Verdict
from bot.domain.reasons import Reason


def decide(
    problem: Problem,
    state: State,
    runs: Sequence[Run],
    in_flight: Sequence[Probe] = (),
    free: int = 1,
) -> Decision:
    """The next state and the probes to dispatch now (possibly none: wait), or the outcome."""
    evidence = Evidence.of(problem, runs)
    next_round = 1 + max([r.round for r in runs] + [p.round for p in in_flight] + [0])
    if state.phase is Phase.CALIBRATING:
        return _calibrate(problem, state, evidence, in_flight, free, next_round)
    if state.phase is Phase.DONE:
        raise ValueError("bisection is already done")
    return _search(problem, state, evidence, in_flight, free, next_round)


def _done(state: State, outcome: Outcome, evidence: Evidence, flake: float = 0.0) -> Decision:
    return Decision(replace(state, phase=Phase.DONE), outcome=outcome, flake_rate=flake, boundary=evidence.boundary)


def _calibrate(
    problem: Problem, state: State, ev: Evidence, in_flight: Sequence[Probe], free: int, rnd: int
) -> Decision:
    s = problem.settings
    untestable = ev.untestable(s)
    for sha, name in ((problem.bad, "BAD"), (problem.good, "GOOD")):
        if sha in untestable:
            why = (
                "exited 125 (cannot be tested)"
                if Verdict.SKIP in ev.of_sha(sha)
                else f"failed on infrastructure {s.max_infra_per_commit} times"
            )
            found = f"the {name} endpoint {sha[:12]} {why}"
            facts = dict(endpoint=name, side=name.lower(), sha=sha)
            return _done(state, Outcome(Status.UNTESTABLE, found, reason=Reason.ENDPOINT_UNTESTABLE, facts=facts), ev)
    rule = s.metric
    metric_verdict = _metric_calibration(problem, ev, rule) if rule is not None else None
    # An endpoint saying the unexpected (GOOD fails, BAD passes, or one reading each that leaves nothing to
    # bisect) is a surprise: auto then calibrates as for a flaky test before believing it.
    doubt = ev.surprised(problem) or (
        metric_verdict is not None and metric_verdict.status in (Status.NOT_REPRODUCIBLE, Status.GOOD_FAILS)
    )
    trust = trusted(problem, ev) and not (doubt and s.flake_rate is None)
    needs = _calibration_needs(problem, ev, in_flight, 1 if trust else s.calibration_runs)
    if needs or any(p.kind is Kind.CALIBRATE for p in in_flight):
        return _calibration_round(problem, state, ev, in_flight, free, rnd, needs, presume=trust and not doubt)
    if metric_verdict is not None:
        return _done(state, metric_verdict, ev)
    good, bad = ev.of_sha(problem.good), ev.of_sha(problem.bad)
    if all(v is Verdict.GOOD for v in bad if v.is_evidence):
        found = f"the test passes on BAD {problem.bad[:12]} every time ({len(bad)} runs): nothing to bisect"
        facts = dict(sha=problem.bad)
        return _done(state, Outcome(Status.NOT_REPRODUCIBLE, found, reason=Reason.BAD_PASSES, facts=facts), ev)
    if all(v is Verdict.BAD for v in good if v.is_evidence):
        found = f"the test also fails on GOOD {problem.good[:12]} ({len(good)} runs): the breakage is older"
        facts = dict(sha=problem.good)
        return _done(state, Outcome(Status.GOOD_FAILS, found, reason=Reason.GOOD_FAILS, facts=facts), ev)
    return _search(problem, replace(state, phase=Phase.SEARCHING), ev, in_flight, free, rnd)


def _calibration_round(
    problem: Problem,
    state: State,
    ev: Evidence,
    in_flight: Sequence[Probe],
    free: int,
    rnd: int,
    needs: list[str],
    presume: bool,
) -> Decision:
    """Endpoint runs, and search runs on the runners they leave free while the endpoints are presumed
    right; once an endpoint surprised, the search runs under way were planned on a false premise."""
    obsolete = () if presume else tuple(p for p in in_flight if p.kind is Kind.SEARCH)
    free += len(obsolete)
    probes = [Probe(sha, Kind.CALIBRATE, rnd) for sha in needs[:free]]
    if presume:
        probes += _presumed_search(problem, ev, in_flight, free - len(probes), rnd)
    return Decision(state, tuple(probes), obsolete, boundary=ev.boundary)


def _calibration_needs(problem: Problem, ev: Evidence, in_flight: Sequence[Probe], each: int) -> list[str]:
    """The endpoint runs still missing for `each` results per testable endpoint, GOOD and BAD interleaved."""
    untestable = ev.untestable(problem.settings)
    need = {}
    for sha in (problem.good, problem.bad):
        have = sum(v.is_evidence for v in ev.of_sha(sha)) + sum(p.sha == sha for p in in_flight)
        need[sha] = 0 if sha in untestable else max(0, each - have)
    return [sha for batch in zip_longest(*([sha] * k for sha, k in need.items())) for sha in batch if sha is not None]


def _presumed_search(problem: Problem, ev: Evidence, in_flight: Sequence[Probe], free: int, rnd: int) -> list[Probe]:
    """Search probes for the runners calibration leaves free, planned as if GOOD passes and BAD fails
    (what a deterministic test's endpoints do), so the search does not wait a round for them.

    Only in the first round: speculation stays one round deep (a surprising endpoint wastes at most
    those runs), and a runner freed early waits for the endpoints instead of starting a round of
    its own (a metric reading could not be judged before they set the boundary anyway)."""
    if free <= 0 or ev.verdicts:
        return []
    scope = problem.scope(())
    n = len(scope.candidates)
    tallies = ev.tallies(scope)
    tallies[n] = tallies.get(n, Tally()).add(False)  # BAD presumed to fail; position 0 is GOOD by construction
    try:
        post = Posterior.compute(n, tallies, 0.0)
    except Contradiction:  # --flake-rate 0 with contradicting results: the search says so once calibrated
        return []
    busy = [p for p in (scope.position(pr.sha) for pr in in_flight) if p is not None]
    return [
        Probe(scope.sha(p), Kind.SEARCH, rnd)
        for p in choose_probes(post, free, busy, _untestable_positions(problem, scope, ev))
    ]


def _untestable_positions(problem: Problem, scope: Scope, ev: Evidence) -> set[int]:
    return {p for p in (scope.position(sha) for sha in ev.untestable(problem.settings)) if p}


def _metric_calibration(problem: Problem, ev: Evidence, rule: MetricRule) -> Outcome | None:
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


@dataclass(frozen=True)
class _Block:
    """The top hypothesis, widened over untestable commits it cannot be told apart from."""

    first: int  # first hypothesis position of the block
    last: int  # its one testable commit (n+1: "no culprit")
    parent: int  # the testable position just below the block
    mass: float


def _top_block(post: Posterior, untestable_pos: set[int]) -> _Block:
    i = post.median()
    if i > post.n:
        return _Block(i, i, post.n, post.no_culprit)
    last = i
    while last in untestable_pos and last < post.n:
        last += 1
    parent = i - 1
    while parent in untestable_pos and parent > 0:
        parent -= 1
    return _Block(parent + 1, last, parent, post.cdf(last) - post.cdf(parent))


def _search(problem: Problem, state: State, ev: Evidence, in_flight: Sequence[Probe], free: int, rnd: int) -> Decision:
    s = problem.settings
    scope = problem.scope(state.merges)
    n = len(scope.candidates)
    tallies = ev.tallies(scope)
    flake = effective_flake(s, tallies)
    if flake is None:
        found = (
            "results contradict a flake rate of 0 (a commit both passed and failed, or a pass above a failure):"
            " the test is flaky"
        )
        return _done(state, Outcome(Status.INCONCLUSIVE, found, reason=Reason.FLAKY_UNDER_ZERO), ev)
    try:
        post = Posterior.compute(n, tallies, flake)
    except Contradiction:  # only reachable with a positive flake rate on impossible data
        return _done(state, Outcome(Status.INCONCLUSIVE, "no single culprit explains the results"), ev, flake)
    untestable_pos = _untestable_positions(problem, scope, ev)
    trust = trusted(problem, ev, state.merges)
    block = _top_block(post, untestable_pos)
    guess = Guess(None if block.last > n else scope.sha(block.last), block.mass)
    fails_at = lambda p: tallies.get(p, Tally()).fails > 0  # noqa: E731
    passes_at = lambda p: p == 0 or tallies.get(p, Tally()).passes > 0  # noqa: E731
    confident = block.mass >= s.confidence
    backed = fails_at(block.last) and passes_at(block.parent) if block.last <= n else passes_at(n)
    # With a deterministic test, a run in flight whose outcome is already implied is pure waste.
    obsolete = tuple(
        pr
        for pr in in_flight
        if pr.kind is Kind.SEARCH
        and (pos := scope.position(pr.sha)) is not None
        and not USEFUL < post.cdf(pos) < 1 - USEFUL
    )
    busy = [p for p in (scope.position(pr.sha) for pr in in_flight if pr not in obsolete) if p is not None]
    free += len(obsolete)

    def finish(outcome: Outcome) -> Decision:
        return replace(_done(state, outcome, ev, flake), guess=guess)

    if confident and backed:
        if block.last > n:
            return finish(
                Outcome(
                    Status.NO_CULPRIT,
                    f"BAD passed on re-runs: its failures look like flakes (P={block.mass:.3f}); nothing to revert",
                    confidence=block.mass,
                )
            )
        culprit = scope.sha(block.last)
        if block.first < block.last:
            shas = tuple(scope.sha(p) for p in range(block.first, block.last + 1))
            return finish(
                Outcome(
                    Status.AMBIGUOUS,
                    f"the first bad commit is one of {len(shas)} commits; "
                    "all but the last could not be tested (exit 125)",
                    culprit=culprit,
                    first_parent_culprit=_outermost(state, culprit),
                    confidence=block.mass,
                    candidates=shas,
                )
            )
        if s.descend_merges and is_merge(problem.graph, culprit) and culprit not in state.merges:
            inner = replace(state, phase=Phase.SEARCHING, merges=state.merges + (culprit,), confirming=None)
            return _search(problem, inner, ev, in_flight, free, rnd)
        if state.phase is Phase.CONFIRMING and state.confirming == culprit:
            return _confirm(
                problem,
                state,
                ev,
                in_flight,
                free,
                rnd,
                culprit,
                scope.sha(block.parent),
                flake,
                block.mass,
                guess,
                trust,
            )
        if state.phase is not Phase.CONFIRMING or state.confirming != culprit:
            confirm = replace(
                state, phase=Phase.CONFIRMING, confirming=culprit, confirm_round=rnd, revert=None, revert_error=None
            )
            return _search(problem, confirm, ev, in_flight, free, rnd)
    if state.phase is Phase.CONFIRMING:
        # The confirmation round (or later evidence) disagreed: back to searching.
        if any(pr.kind in CONFIRMATION_KINDS for pr in in_flight):
            return Decision(state, (), guess=guess, flake_rate=flake, boundary=ev.boundary)
        retries = state.confirmations + 1
        if retries >= s.max_confirmations:
            found = f"confirmation failed {retries} times: the test is too flaky for confidence {s.confidence}"
            return finish(
                Outcome(
                    Status.INCONCLUSIVE,
                    found,
                    culprit=guess.sha,
                    confidence=block.mass,
                    reason=Reason.TOO_FLAKY,
                    facts=dict(confidence=s.confidence),
                )
            )
        state = replace(
            state, phase=Phase.SEARCHING, confirming=None, confirmations=retries, revert=None, revert_error=None
        )
    if ev.evidence_count() >= s.run_budget(n):
        return finish(
            Outcome(
                Status.INCONCLUSIVE,
                f"stopped after {ev.evidence_count()} runs without reaching confidence {s.confidence} "
                f"(best guess P={block.mass:.3f})",
                culprit=guess.sha,
                confidence=block.mass,
            )
        )
    # Once results contradict a deterministic test, the endpoints get their full calibration after all.
    recalibrate = (
        []
        if trust
        else [
            Probe(sha, Kind.CALIBRATE, rnd)
            for sha in _calibration_needs(problem, ev, in_flight, s.calibration_runs)[:free]
        ]
    )
    free -= len(recalibrate)
    if confident and block.last <= n:
        # The mass is settled but the culprit lacks its FAIL or its parent its PASS: test those.
        wanted = [
            p for p, ok in ((block.last, fails_at(block.last)), (block.parent, passes_at(block.parent))) if not ok
        ]
        positions = [p for p in wanted if p not in busy][:free]
    else:
        positions = choose_probes(post, free, busy, untestable_pos)
    if not positions and not recalibrate and len(in_flight) == len(obsolete):
        return finish(
            Outcome(
                Status.INCONCLUSIVE,
                f"no commit left whose result would change the answer (best guess P={block.mass:.3f})",
                culprit=guess.sha,
                confidence=block.mass,
            )
        )
    probes = tuple(recalibrate) + tuple(Probe(scope.sha(p), Kind.SEARCH, rnd) for p in positions)
    return Decision(state, probes, obsolete, guess=guess, flake_rate=flake, boundary=ev.boundary)


def _confirm(
    problem: Problem,
    state: State,
    ev: Evidence,
    in_flight: Sequence[Probe],
    free: int,
    rnd: int,
    culprit: str,
    parent: str,
    flake: float,
    mass: float,
    guess: Guess,
    trust: bool,
) -> Decision:
    """The confirmation round: culprit and parent re-run (x times each for a flaky test, fewer for a
    trusted one) and, in the same round, the branch head and head + revert x times each (the A/B
    proof), once the revert exists."""
    s = problem.settings
    x = s.confirm_runs(flake)
    # A trusted test: --flake-rate 0 believes the search's FAIL and PASS as `git bisect run` does; auto
    # re-runs the culprit once, since a flake (a good commit failing) can only mislead through a FAIL:
    # in the model a pass is proof, so re-running the parent could not change the answer.
    culprit_x, parent_x = ((0 if s.flake_rate == 0 else 1), 0) if trust else (x, x)

    def decided(probes: tuple[Probe, ...] = (), wants_revert: str | None = None) -> Decision:
        return Decision(state, probes, guess=guess, flake_rate=flake, boundary=ev.boundary, wants_revert=wants_revert)

    if problem.head and state.revert is None and state.revert_error is None:
        return decided(wants_revert=culprit)
    targets = [(culprit, Kind.CONFIRM, culprit_x), (parent, Kind.CONFIRM, parent_x)]
    if state.revert and problem.head:
        untestable = ev.untestable(s)
        targets += [
            (sha, kind, x)
            for sha, kind in ((problem.head, Kind.AB_HEAD), (state.revert, Kind.AB_REVERT))
            if sha not in untestable
        ]
    needs = []
    for sha, kind, want in targets:
        done = sum(
            1
            for r, v in ev.verdicts
            if r.sha == sha and r.kind is kind and r.round >= state.confirm_round and v.is_evidence
        )
        flying = sum(1 for p in in_flight if p.sha == sha and p.kind is kind)
        needs.append([Probe(sha, kind, rnd)] * max(0, want - done - flying))
    pending = [p for batch in zip_longest(*needs) for p in batch if p is not None]  # interleaved
    if pending:
        return decided(tuple(pending[:free]))
    if any(p.kind in CONFIRMATION_KINDS for p in in_flight):
        return decided()
    ab = _ab_result(problem, state, ev)
    if ab is not None and _flaky_revert(ab) and state.confirmations + 1 < problem.settings.max_confirmations:
        # HEAD failed every time and HEAD + revert passed at least once: one flaky run, not a revert that does
        # not work. The whole round (confirmation and A/B) runs again; only a round that agrees proves it.
        again = replace(state, confirm_round=rnd, confirmations=state.confirmations + 1)
        return _confirm(problem, again, ev, in_flight, free, rnd, culprit, parent, flake, mass, guess, trust)
    message = f"{culprit[:12]} is the first bad commit (P={mass:.4f}; {_confirmed_by(culprit_x, parent_x)})"
    if state.revert_error:
        message += f"; no revert to verify: {state.revert_error}"
    elif ab is not None:
        message += (
            "; the revert is proven: HEAD fails, HEAD + revert passes"
            if ab.passed
            else "; the revert is NOT proven by the A/B runs"
        )
    outcome = Outcome(
        Status.FOUND,
        message,
        culprit=culprit,
        first_parent_culprit=_outermost(state, culprit),
        confidence=mass,
        ab=ab,
        revert_error=state.revert_error,
    )
    return replace(_done(state, outcome, ev, flake), guess=guess)


def _confirmed_by(culprit_x: int, parent_x: int) -> str:
    if culprit_x == parent_x:
        if not culprit_x:
            return "its FAIL and its parent's PASS taken as final: a flake rate of 0"
        return f"confirmed by {culprit_x} re-runs of it and its parent"
    return f"confirmed by {culprit_x} re-run{'s' if culprit_x > 1 else ''} of it; its parent's PASS stands"


def _ab_result(problem: Problem, state: State, ev: Evidence) -> ABResult | None:
    if not (problem.head and state.revert):
        return None

    def verdicts(sha: str, kind: Kind) -> tuple[Verdict, ...]:
        return tuple(
            v
            for r, v in ev.verdicts
            if r.sha == sha and r.kind is kind and r.round >= state.confirm_round and v.is_evidence
        )

    return ABResult(
        problem.head, state.revert, verdicts(problem.head, Kind.AB_HEAD), verdicts(state.revert, Kind.AB_REVERT)
    )


def _flaky_revert(ab: ABResult) -> bool:
    return all(v is Verdict.BAD for v in ab.head_verdicts) and {Verdict.GOOD, Verdict.BAD} <= set(ab.revert_verdicts)


def _outermost(state: State, culprit: str) -> str:
    return state.merges[0] if state.merges else culprit
