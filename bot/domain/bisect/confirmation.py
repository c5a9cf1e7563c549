"""The confirmation round (bot.domain.bisect.engine's CONFIRMING phase): culprit and parent re-run, the A/B proof
of the revert, and the outcome that names the culprit."""

from __future__ import annotations

from dataclasses import dataclass
from itertools import zip_longest

from bot.domain.bisect.calibration import taken_as_read
from bot.domain.bisect.ci_failure import ci_reading, like_ci
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.model import (
    BISECT_KINDS,
    ABResult,
    Decision,
    Guess,
    Kind,
    Outcome,
    Probe,
    Problem,
    Run,
    State,
    Status,
)
from bot.domain.bisect.readings import Effect
from bot.domain.bisect.turn import Turn
from bot.domain.bisect.verdict import Verdict


def confirmation_round(
    t: Turn, culprit: str, parent: str, flake: float, mass: float, guess: Guess, trust: bool
) -> Decision:
    """The confirmation round: culprit and parent re-run (x times each for a flaky test, fewer for a
    trusted one) and, in the same round, the branch head and head + revert x times each (the A/B
    proof), once the revert exists."""
    problem, state, ev, s = t.problem, t.state, t.evidence, t.settings
    x = s.confirm_runs(flake)
    # A trusted test: --flake-rate 0 believes the search's FAIL and PASS as `git bisect run` does; auto
    # re-runs the culprit once, since a flake (a good commit failing) can only mislead through a FAIL:
    # in the model a pass is proof, so re-running the parent could not change the answer.
    culprit_x, parent_x = ((0 if s.flake_rate == 0 else s.trusted_reruns), 0) if trust else (x, x)

    def decided(probes: tuple[Probe, ...] = (), wants_revert: str | None = None) -> Decision:
        return t.decision(probes, guess=guess, flake_rate=flake, wants_revert=wants_revert)

    if problem.head and state.revert is None and state.revert_error is None:
        return decided(wants_revert=culprit)
    stood = _stood_for_head(t, x)
    targets = [(culprit, Kind.CONFIRM, culprit_x), (parent, Kind.CONFIRM, parent_x)]
    if state.revert and problem.head:
        untestable = ev.untestable(s)
        targets += [
            (sha, kind, want)
            for sha, kind, want in (
                (problem.head, Kind.AB_HEAD, max(0, x - stood.covers)),
                (state.revert, Kind.AB_REVERT, _revert_runs(t, x, trust)),
            )
            if sha not in untestable
        ]
    needs = []
    for sha, kind, want in targets:
        done = len(_this_round(t, sha, kind))
        needs.append([t.probe(sha, kind)] * max(0, want - done - t.flying(sha, (kind,))))
    pending = [p for batch in zip_longest(*needs) for p in batch if p is not None]  # interleaved
    if pending:
        return decided(tuple(pending[: t.free]))
    if t.confirming:
        return decided()
    ab = _ab_result(t, stood)
    if ab is not None and _flaky_revert(ab) and state.confirmations + 1 < problem.settings.max_confirmations:
        # HEAD failed every time and HEAD + revert passed at least once: one flaky run, not a revert that does
        # not work. The whole round (confirmation and A/B) runs again; only a round that agrees proves it.
        again = t.moved(confirm_round=t.round, confirmations=state.confirmations + 1)
        return confirmation_round(again, culprit, parent, flake, mass, guess, trust)
    how = _confirmed_by(culprit_x, parent_x)
    proven = f"HEAD{f' ({stood.source})' if stood.source else ''} fails, HEAD + revert passes"
    why_not = _unreproduced(t, ab)
    return found_decision(t, culprit, mass, guess, how, ab, proven, flake, why_not=why_not)


@dataclass(frozen=True)
class StoodFor:
    """What already says how HEAD reads, so its side of the A/B runs only the rest (`covers` of its x runs)."""

    verdicts: tuple[Verdict, ...] = ()
    covers: int = 0
    source: str = ""  # said in the outcome, the report and the PR ("" : HEAD's own A/B runs)
    by_ci: bool = False  # CI's readings, not the bisect runner's: HEAD's failure is yet to be reproduced there


def _stood_for_head(t: Turn, x: int) -> StoodFor:
    """Where the branch head is BAD itself, part of HEAD's side of the A/B is already known, conservatively:

    - the bisect runner's runs of BAD (calibration or search), up to `x` of them, when every one failed as CI's red
      run did (`ci_failure.like_ci`: its metric over the threshold when that is how CI failed) -- the same commit in
      the same environment;
    - with no such run, the endpoints taken as read (`trust_endpoints`: on the nightly path, CI read BAD red and a
      re-run attempt or the suite runner's retry read it red again): CI's red readings of BAD stand for all but one
      of the x. CI's machines are not the bisect runner's, so HEAD's failure is still reproduced there at least once
      (`like_ci` again) before HEAD + revert's PASS proves anything. Only recorded readings stand: the CLI's
      --trust-endpoints (the user's word, no reading) still runs HEAD x times.

    A pass among BAD's runs, a failure of another kind, or HEAD not BAD (commits landed since, which may touch the
    test), and HEAD runs afresh. A repeated confirmation round counts only its own runs, as for every other target."""
    problem, state, ev = t.problem, t.state, t.evidence
    if problem.head != problem.bad:
        return StoodFor()
    readings = head_stand_ins(problem, ev, state.confirm_round if state.confirmations else 0)
    if not readings:
        return StoodFor()
    verdicts = tuple(v for _, v in readings)
    if readings[0][0].kind is not Kind.CI:
        taken = verdicts[-x:]
        return StoodFor(taken, len(taken), f"BAD itself: {len(taken)} of its runs on the bisect runner stand for it")
    n = min(len(verdicts), x - 1)
    if n and not state.confirmations and Verdict.BAD in taken_as_read(problem, ev):
        return StoodFor(verdicts[-n:], n, f"BAD itself, read red by CI and reproduced there: {n} of them CI's", True)
    return StoodFor()


def head_stand_ins(problem: Problem, ev: Evidence, since: int = 0) -> tuple[tuple[Run, Verdict], ...]:
    """The readings of BAD that may stand for HEAD's A/B runs (`_stood_for_head` decides how many do): BAD's own runs
    on the bisect runner from round `since` on when every one failed as CI's red run did, or, with no run there, CI's
    red readings of it. The revert PR shows their values (bot.service.draft)."""
    ci = ci_reading(problem, ev.verdicts)
    on_bad = [(r, v) for r, v in ev.verdicts if r.sha == problem.bad and v.is_evidence]
    own = tuple((r, v) for r, v in on_bad if r.kind in BISECT_KINDS and r.round >= since)
    if own:
        return own if all(like_ci(r, v, ci) for r, v in own) else ()
    theirs = tuple((r, v) for r, v in on_bad if r.kind is Kind.CI)
    return theirs if theirs and all(v is Verdict.BAD for _, v in theirs) else ()


def _revert_runs(t: Turn, x: int, trust: bool) -> int:
    """HEAD + revert's runs. For a test still trusted to be deterministic one PASS is proof, as the parent's is in
    the confirmation (a flake is a good commit failing); a FAIL there is doubt, and the revert then runs x times."""
    if not trust:
        return x
    return x if any(v is Verdict.BAD for v in _this_round(t, t.state.revert, Kind.AB_REVERT)) else 1


def _this_round(t: Turn, sha: str | None, kind: Kind) -> tuple[Verdict, ...]:
    return tuple(v for _, v in _round_runs(t, sha, kind))


def _round_runs(t: Turn, sha: str | None, kind: Kind, evidence: bool = True) -> list[tuple]:
    since = t.state.confirm_round
    return [
        (r, v)
        for r, v in t.evidence.verdicts
        if r.sha == sha and r.kind is kind and r.round >= since and (v.is_evidence or not evidence)
    ]


def found_decision(
    t: Turn,
    culprit: str,
    mass: float,
    guess: Guess,
    how: str,
    ab: ABResult | None,
    proven: str,
    flake: float = 0.0,
    effect: Effect | None = None,
    why_not: str = "",
) -> Decision:
    """The culprit named: `how` it was confirmed, and what the A/B said (`proven`: what a passing one showed,
    `why_not`: why a failing one proves nothing, when it says more than its verdicts); a sampled metric's `effect`
    at the culprit."""
    state = t.state
    message = f"{culprit[:12]} is the first bad commit (P={mass:.4f}; {how})"
    if state.revert_error:
        message += f"; no revert to verify: {state.revert_error}"
    elif ab is not None:
        message += (
            f"; the revert is proven: {proven}" if ab.passed else f"; the revert is NOT proven by the A/B runs{why_not}"
        )
    outcome = Outcome(
        Status.FOUND,
        message,
        culprit=culprit,
        first_parent_culprit=outermost(state, culprit),
        confidence=mass,
        ab=ab,
        revert_error=state.revert_error,
        effect=effect,
    )
    return t.end(outcome, flake, guess)


def _confirmed_by(culprit_x: int, parent_x: int) -> str:
    if culprit_x == parent_x:
        if not culprit_x:
            return "its FAIL and its parent's PASS taken as final: a flake rate of 0"
        return f"confirmed by {culprit_x} re-runs of it and its parent"
    return f"confirmed by {culprit_x} re-run{'s' if culprit_x > 1 else ''} of it; its parent's passes stand"


def _ab_result(t: Turn, stood: StoodFor) -> ABResult | None:
    """HEAD's side: what stood for it (`_stood_for_head`), then its own A/B runs -- a failure of theirs that is not
    CI's (`like_ci`) counted as no failure (a skip). With none of it from the bisect runner (CI's reading stood and
    every run of HEAD's own errored), HEAD's side is empty: its failure was not reproduced, nothing is proven."""
    problem, state = t.problem, t.state
    if not (problem.head and state.revert):
        return None
    ci = ci_reading(problem, t.evidence.verdicts)
    own = tuple(
        v if v is not Verdict.BAD or like_ci(r, v, ci) else Verdict.SKIP
        for r, v in _round_runs(t, problem.head, Kind.AB_HEAD)
    )
    on_runner = bool(own) or (stood.covers > 0 and not stood.by_ci)
    head = stood.verdicts + own if on_runner else ()
    revert = _this_round(t, state.revert, Kind.AB_REVERT)
    return ABResult(problem.head, state.revert, head, revert, head_from=stood.source if on_runner else "")


def _unreproduced(t: Turn, ab: ABResult | None) -> str:
    """Why the A/B proves nothing when HEAD's failure was not reproduced on the bisect runner ("" otherwise)."""
    if ab is None or ab.passed or (ab.head_verdicts and all(v is Verdict.BAD for v in ab.head_verdicts)):
        return ""
    runs = _round_runs(t, t.problem.head, Kind.AB_HEAD, evidence=False)
    ci = ci_reading(t.problem, t.evidence.verdicts)
    said = [r.raw.infra_reason for r, v in runs if r.raw.infra_reason] + [
        "a run failed without the metric CI read"  # like_ci fails only a run without CI's metric
        for r, v in runs
        if v is Verdict.BAD and not like_ci(r, v, ci)
    ]
    return f": HEAD's failure was not reproduced on the bisect runner ({said[-1]})" if said else ""


def _flaky_revert(ab: ABResult) -> bool:
    return all(v is Verdict.BAD for v in ab.head_verdicts) and {Verdict.GOOD, Verdict.BAD} <= set(ab.revert_verdicts)


def outermost(state: State, culprit: str) -> str:
    return state.merges[0] if state.merges else culprit
