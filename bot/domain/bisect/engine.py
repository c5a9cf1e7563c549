"""The culprit finder's decision function: given everything seen so far, what happens next.

`decide` is pure. The caller persists the returned state, dispatches the returned probes, and
calls again when results arrive. Its phases and the moves between them are drawn once, at the top of
docs/algorithm.md.

A test taken as deterministic (`evidence.trusted`: --flake-rate 0, or auto until a result
contradicts that) costs about what `git bisect run` spends: one calibration run per endpoint, the
search already running on the runners calibration leaves free (the endpoints presumed right; a
surprising one cancels those runs), and one confirmation re-run of the culprit under auto, none
under 0. A flaky one gets `calibration_runs` per endpoint and x re-runs of culprit and parent.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

from bot.domain.bisect.calibration import calibration_needs, calibration_owed, calibration_round, metric_calibration
from bot.domain.bisect.candidates import is_merge
from bot.domain.bisect.confirmation import confirmation_round
from bot.domain.bisect.evidence import Evidence, effective_flake, trusted
from bot.domain.bisect.intermittent import search_posterior
from bot.domain.bisect.model import (
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
from bot.domain.bisect.planner import USEFUL, choose_probes, runs_worth_starting, settle_probes, top_block
from bot.domain.bisect.posterior import Contradiction, Tally
from bot.domain.bisect.sampled import calibrate as sampled_calibrate
from bot.domain.bisect.sampled import sampled
from bot.domain.bisect.sampled import search as sampled_search
from bot.domain.bisect.turn import Turn
from bot.domain.bisect.verdict import Verdict
from bot.domain.reasons import Reason

SETTLE = 0.5  # the top commit's mass from which its parent and it are read in turn (planner.settle_probes)


def decide(
    problem: Problem,
    state: State,
    runs: Sequence[Run],
    in_flight: Sequence[Probe] = (),
    free: int = 1,
    next_round: int | None = None,
) -> Decision:
    """The next state and the probes to dispatch now (possibly none: wait), or the outcome. `next_round`: the
    round new probes belong to, when the caller numbers rounds over more than these runs (a group of tests)."""
    if next_round is None:
        next_round = 1 + max([r.round for r in runs] + [p.round for p in in_flight] + [0])
    turn = Turn(problem, state, Evidence.of(problem, runs), tuple(in_flight), free, next_round)
    if state.phase is Phase.CALIBRATING:
        return _calibrate(turn)
    if state.phase is Phase.DONE:
        raise ValueError("bisection is already done")
    if sampled(problem.settings.metric, runs):
        return sampled_search(turn)
    return _search(turn)


def _calibrate(t: Turn) -> Decision:
    problem, ev, s = t.problem, t.evidence, t.settings
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
            return t.end(Outcome(Status.UNTESTABLE, found, reason=Reason.ENDPOINT_UNTESTABLE, facts=facts))
    rule = s.metric
    if sampled(rule, [r for r, _ in ev.verdicts]):
        return sampled_calibrate(t)
    # endpoints taken as read (trust_endpoints) have no calibration readings to judge: the threshold stands
    calibrated = any(r.kind is Kind.CALIBRATE for r, _ in ev.verdicts)
    metric_verdict = metric_calibration(problem, ev, rule) if rule is not None and calibrated else None
    # An endpoint saying the unexpected (GOOD fails, BAD passes, or one reading each that leaves nothing to
    # bisect) is a surprise: auto then calibrates as for a flaky test before believing it.
    doubt = ev.surprised(problem) or (
        metric_verdict is not None and metric_verdict.status in (Status.NOT_REPRODUCIBLE, Status.GOOD_FAILS)
    )
    trust = trusted(problem, ev) and not (doubt and s.flake_rate is None)
    needs = calibration_needs(t, 1 if trust else s.calibration_runs)
    if needs or any(p.kind is Kind.CALIBRATE for p in t.in_flight):
        return calibration_round(t, needs, presume=trust and not doubt)
    if metric_verdict is not None:
        return t.end(metric_verdict)
    good, bad = ev.of_sha(problem.good, ci=False), ev.of_sha(problem.bad, ci=False)
    if bad and all(v is Verdict.GOOD for v in bad if v.is_evidence):
        found = f"the test passes on BAD {problem.bad[:12]} every time ({len(bad)} runs): nothing to bisect"
        facts = dict(sha=problem.bad)
        return t.end(Outcome(Status.NOT_REPRODUCIBLE, found, reason=Reason.BAD_PASSES, facts=facts))
    if good and all(v is Verdict.BAD for v in good if v.is_evidence):
        found = f"the test also fails on GOOD {problem.good[:12]} ({len(good)} runs): the breakage is older"
        facts = dict(sha=problem.good)
        return t.end(Outcome(Status.GOOD_FAILS, found, reason=Reason.GOOD_FAILS, facts=facts))
    return _search(t.moved(phase=Phase.SEARCHING))


def _search(t: Turn) -> Decision:
    problem, ev, in_flight, s = t.problem, t.evidence, t.in_flight, t.settings
    if not t.state.merges and calibration_owed(t):
        return _calibrate(t.moved(phase=Phase.CALIBRATING))
    scope = problem.scope(t.state.merges)
    n = len(scope.candidates)
    tallies = ev.tallies(scope)
    flake = effective_flake(s, tallies)
    if flake is None:
        found = (
            "results contradict a flake rate of 0 (a commit both passed and failed, or a pass above a failure):"
            " the test is flaky"
        )
        return t.end(Outcome(Status.INCONCLUSIVE, found, reason=Reason.FLAKY_UNDER_ZERO))
    try:
        post = search_posterior(n, tallies, s, flake)
    except Contradiction:  # only reachable with a positive flake rate on impossible data
        return t.end(Outcome(Status.INCONCLUSIVE, "no single culprit explains the results"), flake)
    untestable_pos = t.untestable_in(scope)
    trust = trusted(problem, ev, t.state.merges)
    block = top_block(post, untestable_pos)

    def block_mass(extra: Mapping[int, Tally]) -> float:
        added = {p: tallies.get(p, Tally()) + t for p, t in extra.items()}
        after = search_posterior(n, {**tallies, **added}, s, flake)
        return after.cdf(block.last) - after.cdf(block.parent)

    guess = Guess(None if block.last > n else scope.sha(block.last), block.mass)
    # The answer is backed by the bisect runner's own FAIL at the culprit and PASS at its parent: CI's readings
    # narrow the range for free, but never stand for the runner (nor for confirmation).
    ran = ev.tallies(scope, ci=False)
    fails_at = lambda p: ran.get(p, Tally()).fails > 0  # noqa: E731
    # GOOD's PASS is taken from calibration, or (endpoints taken as read) run when GOOD is the culprit's parent
    good_ran = not s.reads_endpoints or bool(ev.of_sha(problem.good, ci=False))
    passes_at = lambda p: (p == 0 and good_ran) or ran.get(p, Tally()).passes > 0  # noqa: E731
    # "No culprit" leads and BAD, re-read, passed as often as calibration would have before calling it not
    # reproducible (Settings.reproduce_runs: a culprit failing 70% of the time shows with P >= C): its failure was a
    # flake, to the same standard a BAD that never reproduced is held to
    bad_passes = ran.get(n, Tally()).passes
    dismissed = block.last > n and block.mass >= SETTLE and bad_passes >= s.reproduce_runs
    confident = block.mass >= s.confidence or dismissed
    backed = fails_at(block.last) and passes_at(block.parent) if block.last <= n else passes_at(n)
    # The mass is settled but the culprit lacks the runner's FAIL or its parent the runner's PASS: those runs are
    # wanted, however settled CI's readings make them look.
    backing = (
        [p for p, ok in ((block.last, fails_at(block.last)), (block.parent, passes_at(block.parent))) if not ok]
        if confident and block.last <= n
        else []
    )
    # Once one commit holds most of the mass, it and its parent are read in turn (planner.settle_probes): a run
    # there is wanted however settled its own position looks. Elsewhere, a run in flight whose outcome is already
    # implied is pure waste.
    settling = block.mass >= SETTLE
    wanted = {block.last, block.parent} & set(range(n + 1)) if settling else set(backing)
    obsolete = tuple(
        pr
        for pr in in_flight
        if pr.kind is Kind.SEARCH
        and (pos := scope.position(pr.sha)) is not None
        and pos not in wanted
        and not USEFUL < post.cdf(pos) < 1 - USEFUL
    )
    busy = [p for p in (scope.position(pr.sha) for pr in in_flight if pr not in obsolete) if p is not None]
    # the runners the obsolete runs hold are free (and stay counted so in the phases this turn is handed on to; a
    # search of a merge's commits starts over from the runners given, and finds the runs obsolete there itself)
    given = t.free
    t = replace(t, free=t.free + len(obsolete))
    free = t.free
    runners = free + len(in_flight) - len(obsolete)

    def finish(outcome: Outcome) -> Decision:
        if outcome.status is Status.INCONCLUSIVE:  # where the failures rise, since no single commit is named
            lo, hi = (min(post.quantile(q), n) for q in (0.05, 0.95))
            rise = f"failures rise over commits {scope.sha(lo)[:12]}..{scope.sha(hi)[:12]} (90% of the posterior)"
            outcome = replace(outcome, message=f"{outcome.message}; {rise}")
        return t.end(outcome, flake, guess)

    if confident and backed:
        if block.last > n:
            return finish(
                Outcome(
                    Status.NO_CULPRIT,
                    f"BAD passed on re-runs ({bad_passes} times): its failures look like flakes "
                    f"(P={block.mass:.3f}); nothing to revert",
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
                    best_guess=culprit,  # not reverted: the first bad one may be any of them
                    confidence=block.mass,
                    candidates=shas,
                )
            )
        state = t.state
        if s.descend_merges and is_merge(problem.graph, culprit) and culprit not in state.merges:
            inside = t.moved(phase=Phase.SEARCHING, merges=state.merges + (culprit,), confirming=None)
            return _search(replace(inside, free=given))
        if state.phase is Phase.CONFIRMING and state.confirming == culprit:
            return confirmation_round(t, culprit, scope.sha(block.parent), flake, block.mass, guess, trust)
        if state.phase is not Phase.CONFIRMING or state.confirming != culprit:
            confirm = t.moved(
                phase=Phase.CONFIRMING, confirming=culprit, confirm_round=t.round, revert=None, revert_error=None
            )
            return _search(confirm)
    if t.state.phase is Phase.CONFIRMING:
        # The confirmation round (or later evidence) disagreed: back to searching.
        if t.confirming:
            return t.decision(guess=guess, flake_rate=flake, posterior=post)
        # A confirmation fails when the answer moved: the same commit still leading, short of the confidence
        # after a pass of an intermittent culprit (70% failing passes 3 in 10), is read on, not given up on.
        retries = t.state.confirmations + (guess.sha != t.state.confirming)
        if retries >= s.max_confirmations:
            found = f"confirmation failed {retries} times: the test is too flaky for confidence {s.confidence}"
            return finish(
                Outcome(
                    Status.INCONCLUSIVE,
                    found,
                    best_guess=guess.sha,
                    confidence=block.mass,
                    reason=Reason.TOO_FLAKY,
                    facts=dict(confidence=s.confidence),
                )
            )
        t = t.moved(phase=Phase.SEARCHING, confirming=None, confirmations=retries, revert=None, revert_error=None)
    if ev.evidence_count() >= s.run_budget(n):
        return finish(
            Outcome(
                Status.INCONCLUSIVE,
                f"stopped after {ev.evidence_count()} runs without reaching confidence {s.confidence} "
                f"(best guess P={block.mass:.3f})",
                best_guess=guess.sha,
                confidence=block.mass,
            )
        )
    # Once results contradict a deterministic test, the endpoints get their full calibration after all.
    recalibrate = (
        [] if trust else [t.probe(sha, Kind.CALIBRATE) for sha in calibration_needs(t, s.calibration_runs)[:free]]
    )
    free -= len(recalibrate)
    if confident and block.last <= n:
        positions = [p for p in backing if p not in busy][:free]
    else:
        if flake == 0 and not settling:  # a deterministic search: no more runs a round than keep its number of rounds
            searching = sum(pr.kind is Kind.SEARCH for pr in in_flight if pr not in obsolete)
            free = min(free, runs_worth_starting(post, runners, searching))
        positions = (
            settle_probes(block, block_mass, free, s.confidence, busy)
            if settling and block.last <= n
            else [n] * free  # "no culprit" leads: BAD is read again until its failure is dismissed (or reproduced)
            if settling
            else choose_probes(post, free, busy, untestable_pos)
        )
    if not positions and not recalibrate and len(in_flight) == len(obsolete):
        return finish(
            Outcome(
                Status.INCONCLUSIVE,
                f"no commit left whose result would change the answer (best guess P={block.mass:.3f})",
                best_guess=guess.sha,
                confidence=block.mass,
            )
        )
    # GOOD's run (an endpoint taken as read, backing its child's FAIL) is its deferred calibration
    kind_at = lambda p: Kind.CALIBRATE if scope.sha(p) == problem.good else Kind.SEARCH  # noqa: E731
    probes = tuple(recalibrate) + tuple(t.probe(scope.sha(p), kind_at(p)) for p in positions)
    return t.decision(probes, obsolete, guess=guess, flake_rate=flake, posterior=post)
