"""The culprit finder for a noisy metric (bot.domain.bisect.engine routes here): commits judged against the
endpoints' distributions, sampled until told apart at the stated error rate (docs/algorithm.md, "Noisy metrics").

A metric is sampled when its rule has no threshold (a benchmark: worse than GOOD is the signal), or when runs
of one commit read on both sides of its threshold (a KL of 0.0019 and 0.0021 against 0.002). Then:

- CALIBRATING: GOOD and BAD are read `ENDPOINT_FIRST` times each, then once more each per round, until the odds
  that BAD reads worse than GOOD pass `ENDPOINT_LEAN` (search), or a regression of `ENDPOINT_RULED_OUT` spreads
  is ruled out at `ENDPOINT_ODDS` ("not reproducible", no culprit), or `ENDPOINT_MOST` each are read ("not
  reproducible": not told apart). A search started short of `ENDPOINT_GATE` is on trial: one runner goes on
  reading the endpoints (the others search) until their odds, or the change-point model's evidence of a change
  over every reading, pass `ENDPOINT_GATE`, and the rules above still end it "not reproducible" meanwhile
  (`_still_judged`). When BAD reads like GOOD (Gaussian readings of one spread), the search runs past its trial
  at most 2 / `ENDPOINT_GATE` of the time (each odds a test martingale), and a regression of that size ends
  "not reproducible" at most 1 / `ENDPOINT_ODDS` of the time, however many rounds it takes (`_endpoints`).
- SEARCHING: the change-point posterior of bot.domain.bisect.readings over every reading, planned by the model of a
  level that holds still until the readings drift (bot.domain.bisect.misfit); runners go to its quantiles, a
  commit as often as it stays uncertain. A culprit is named when its mass reaches the confidence under that model
  *and* the one that fits a linear drift in time, the drifting model's evidence of any change reaches
  1 / (1 - confidence) (which, when no commit changed the metric and the readings are Gaussian around a level
  that holds still or drifts linearly, bounds the chance of naming one by Ville's inequality), and `samples`
  readings stand at it and at its parent (its confirmation, and the spread the report states).
- CONFIRMING: with a branch head, HEAD and HEAD + revert are read in turn until their pairs' differences prove
  that HEAD reads worse by about the culprit's estimated shift, or read alike against `REFUSE_SHARE` of it, each at
  the stated error rate (sequential likelihood ratio tests: `_paired`), or `max_ab_samples` each.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from statistics import NormalDist

from bot.domain.bisect import misfit
from bot.domain.bisect.confirmation import found_decision
from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.model import ABResult, Decision, Guess, Kind, Outcome, Phase, Probe, Run, Status
from bot.domain.bisect.planner import sampled_probes, top_block
from bot.domain.bisect.posterior import Posterior
from bot.domain.bisect.readings import Effect, Readings
from bot.domain.bisect.stats import Split, Stats
from bot.domain.bisect.turn import Turn
from bot.domain.bisect.verdict import MetricRule, Verdict
from bot.domain.reasons import Reason

# Once a commit holds this much of the mass, the question left is whether it reads worse than its parent: runners
# go to the two in pairs (`_sides`; the quantiles would keep sampling the side already settled).
FAVOURITE = 0.5
# The endpoints (`_endpoints`, docs/algorithm.md "Endpoints"): read this many times each before they are judged;
# the odds that BAD reads worse -- a mixture of shifts of 1.5 spreads (most weight: a regression the endpoints can
# just tell within Pinpoint's 20 runs) and 4 (a large or deterministic one, told in the first readings) against
# none -- past which the search runs without reading the endpoints on; the regression, in spreads of the noise,
# whose ruling out at these odds ends the bisection "not reproducible" (a 4% drop at 2% noise).
ENDPOINT_FIRST = 4
ENDPOINT_GATE = 100.0
# ... and the odds at which the search starts on trial beside the endpoints' readings: the endpoints' last rounds
# before the gate then read the range too (a 2-spread drop at k = 2: the gate takes 16 endpoint runs, this lean 10)
ENDPOINT_LEAN = 10.0
ENDPOINT_SHIFTS = ((0.8, 1.5), (0.2, 4.0))  # (weight, shift in spreads)
ENDPOINT_RULED_OUT = 2.0
ENDPOINT_ODDS = 1000.0
# ... and read at most this many times each: a regression of 1-1.5 spreads is told from none more often by 30 than
# by 20 (1 spread: 64% against 49% of 5,000 endpoint pairs), and a benchmark that does not regress is ruled out
# before 30 but 0.07% of the time (0.6% start the search), so the cap costs it little (16.4 runs on average, 16.3
# at a cap of 20)
ENDPOINT_MOST = 30
SPREAD_RATIO = 4.0  # readings of one commit across the cut this close are its noise; further apart, a flaky run
# The A/B reads HEAD and HEAD + revert alike only against this share of the culprit's estimated shift. The estimate
# is the winner of the search's selection: a search that stopped on a lucky draw reads a true -5% as -6.6% to -7.8%,
# and a test of "alike" against that estimate refused 6 of 491 right culprits (bench/slowdown_path_bench.py, 2%
# noise, 5% shift).
REFUSE_SHARE = 0.5


def sampled(rule: MetricRule | None, runs: Sequence[Run]) -> bool:
    """Whether the metric is judged by distributions: a benchmark, or runs of one commit spread across the cut.

    Two readings of one commit on both sides of the threshold are spread when within `SPREAD_RATIO` of each other
    (0.0019 and 0.0065 against 0.002); further apart (0.0004 and a faulted run's 0.0189) one of them is a flaky
    run, a wrong verdict the flake model of the pass/fail search already weighs."""
    if rule is None:
        return False
    threshold = rule.threshold
    if threshold is None:
        return True
    readings: dict[str, list[float]] = {}
    for r in runs:
        if r.kind is not Kind.CI and r.raw.metric is not None and r.raw.infra_reason is None:
            readings.setdefault(r.sha, []).append(r.raw.metric)
    for values in readings.values():
        worse = [v for v in values if rule.worse(v, threshold)]
        better = [v for v in values if not rule.worse(v, threshold)]
        if any(_close(w, b) for w in worse for b in better):
            return True
    return False


def _close(a: float, b: float) -> bool:
    if a <= 0 or b <= 0:
        return True  # no scale to compare on: any straddle is spread
    return max(a, b) / min(a, b) <= SPREAD_RATIO


def _timed(ev: Evidence, sha: str, kind: Kind, since: int = 0) -> list[tuple[float, float]]:
    """A commit's readings of one kind since a round, with the rounds they ran in."""
    return [
        (r.raw.metric, float(r.round))
        for r, v in ev.verdicts
        if r.sha == sha and r.kind is kind and r.round >= since and v.is_evidence and r.raw.metric is not None
    ]


def _values(ev: Evidence, sha: str, kind: Kind) -> list[float]:
    return [value for value, _ in _timed(ev, sha, kind)]


def _endpoint_values(ev: Evidence, sha: str) -> list[float]:
    return _values(ev, sha, Kind.CALIBRATE) + _values(ev, sha, Kind.SEARCH)


def _range_readings(t: Turn) -> Readings:
    """Every reading of the range so far, at its position in the turn's scope."""
    rule = t.settings.metric
    assert rule is not None
    points = [
        (r.sha, r.raw.metric, float(r.round))
        for r, v in t.evidence.verdicts
        if r.kind in (Kind.CALIBRATE, Kind.SEARCH, Kind.CONFIRM) and v.is_evidence and r.raw.metric is not None
    ]
    return Readings.at(t.problem.scope(t.state.merges), points, rule.higher_is_worse)


@dataclass(frozen=True)
class _Endpoints:
    """The endpoints' readings judged (`_endpoints`): log of the odds that BAD reads worse than GOOD, log of the
    odds against a regression of `ENDPOINT_RULED_OUT` spreads, and that regression in the metric's units."""

    worse: float
    ruled_out: float
    regression: float

    @property
    def search(self) -> bool:
        return self.worse >= math.log(ENDPOINT_GATE)

    @property
    def lean(self) -> bool:
        return self.worse >= math.log(ENDPOINT_LEAN)

    @property
    def alike(self) -> bool:
        return self.ruled_out >= math.log(ENDPOINT_ODDS)


def _endpoints(good: Sequence[float], bad: Sequence[float], higher_is_worse: bool) -> _Endpoints:
    """GOOD's and BAD's readings judged by two likelihood ratios of BAD's shift over GOOD's, in spreads of the noise
    (`Contrast.log_likelihood_ratio`: the readings' level and spread unknown, one spread on both sides):

    - `worse`: the ratio averaged over `ENDPOINT_SHIFTS` towards worse, against no shift. When BAD reads like GOOD,
      this is a test martingale whatever the rounds read, and by Ville's inequality it ever reaches
      `ENDPOINT_GATE` with probability at most 1 / `ENDPOINT_GATE` (1%; measured: 0.62% of 100,000 pairs);
    - `ruled_out`: no shift against a shift of `ENDPOINT_RULED_OUT` spreads towards worse. When BAD does read that
      much worse, this is a test martingale in turn: it ever reaches `ENDPOINT_ODDS` with probability at most
      1 / `ENDPOINT_ODDS` (0.1%; measured: 0.04% of 100,000 pairs). A smaller regression is ruled out more often
      (1 spread: 27% of 5,000 pairs), a larger one less.

    Both bounds hold for Gaussian readings of one spread around a level that holds still; heavy tails, two clock
    states or a drift are the measured rows' (docs/benchmarks.md)."""
    orient = 1.0 if higher_is_worse else -1.0
    contrast = Split(Stats.of(orient * v for v in good), Stats.of(orient * v for v in bad)).contrast()
    ratios = [math.log(w) + contrast.log_likelihood_ratio(shift) for w, shift in ENDPOINT_SHIFTS]
    top = max(ratios)
    worse = top + math.log(sum(math.exp(r - top) for r in ratios))
    ruled_out = -contrast.log_likelihood_ratio(ENDPOINT_RULED_OUT)
    return _Endpoints(worse, ruled_out, ENDPOINT_RULED_OUT * contrast.sd)


def _not_reproducible(t: Turn, good: list[float], bad: list[float], judged: _Endpoints) -> Decision:
    """The bisection ends: GOOD and BAD do not differ, or are not told apart within `ENDPOINT_MOST` each."""
    problem = t.problem
    each = min(len(good), len(bad))
    shown = f"GOOD reads {_describe(good)}, BAD {_describe(bad)}"
    size = f"{judged.regression:.3g}"
    level = abs(statistics.fmean(good))
    if level > 0:
        size += f" ({100 * judged.regression / level:.2g}%)"
    odds = (
        f"a regression of {ENDPOINT_RULED_OUT:g} spreads, {size}, ruled out at odds "
        f"{math.exp(min(judged.ruled_out, 700.0)):.3g}:1 ({ENDPOINT_ODDS:g} needed); odds that BAD reads "
        f"worse {math.exp(min(judged.worse, 700.0)):.3g}:1 ({ENDPOINT_GATE:g} needed)"
    )
    why = "do not differ at the stated error rate" if judged.alike else f"are not told apart in {each} each"
    found = f"GOOD and BAD {why} ({shown}; {odds}): nothing to bisect"
    # A runner that drifts widens the spread the regression is measured in: said, as the search says it
    outside = misfit.misfit(_range_readings(t), len(problem.scope(t.state.merges).candidates))
    if outside:
        found += f"; the readings left the model's assumptions: {'; '.join(outside)}"
    return t.end(Outcome(Status.NOT_REPRODUCIBLE, found, reason=Reason.BAD_PASSES, facts=dict(sha=problem.bad)))


def calibrate(t: Turn) -> Decision:
    problem, ev, s = t.problem, t.evidence, t.settings
    rule = s.metric
    assert rule is not None
    good = _endpoint_values(ev, problem.good)
    bad = _endpoint_values(ev, problem.bad)
    each = min(len(good), len(bad))
    judged = _endpoints(good, bad, rule.higher_is_worse) if each >= ENDPOINT_FIRST else None
    # With one runner there is none to search beside the endpoints: the search waits for the gate
    lean = judged is not None and (judged.search or (judged.lean and t.free + len(t.in_flight) > 1))
    if judged is not None and (lean or judged.alike or each >= ENDPOINT_MOST):
        if not lean:
            return _not_reproducible(t, good, bad, judged)
        shown = f"GOOD reads {_describe(good)}, BAD {_describe(bad)}"
        if rule.threshold is not None and not rule.worse(statistics.median(bad), rule.threshold):
            found = f"BAD's median is within the threshold {rule.threshold:g} ({shown}): the failure does not reproduce"
            return t.end(Outcome(Status.NOT_REPRODUCIBLE, found, reason=Reason.BAD_PASSES, facts=dict(sha=problem.bad)))
        if rule.threshold is not None and rule.worse(statistics.median(good), rule.threshold):
            found = f"GOOD's median is already beyond the threshold {rule.threshold:g} ({shown})"
            return t.end(Outcome(Status.GOOD_FAILS, found, reason=Reason.GOOD_FAILS, facts=dict(sha=problem.good)))
        # Past the lean, short of the gate: the search starts, the endpoints read on beside it (`_still_judged`)
        return search(t.moved(phase=Phase.SEARCHING))
    want = max(ENDPOINT_FIRST, each + 1)
    needs = {
        sha: max(0, want - len(have) - t.flying(sha, (Kind.CALIBRATE,)))
        for sha, have in ((problem.good, good), (problem.bad, bad))
    }
    # The side short of more first, GOOD and BAD in turn, and which goes first swapped every round: a runner that
    # drifts meanwhile then moves neither side more than the other.
    order = (problem.good, problem.bad) if each % 2 == 0 else (problem.bad, problem.good)
    probes: list[Probe] = []
    while len(probes) < t.free and any(needs.values()):
        sha = max(order, key=lambda side: needs[side])
        probes.append(t.probe(sha, Kind.CALIBRATE))
        needs[sha] -= 1
    return t.decision(tuple(probes))


def search(t: Turn) -> Decision:
    problem, ev, in_flight, free, s = t.problem, t.evidence, t.in_flight, t.free, t.settings
    scope = problem.scope(t.state.merges)
    n = len(scope.candidates)
    readings = _range_readings(t)
    # The readings' level may drift in time (a runner warming, a neighbour moving in). Runs are planned by the
    # model of a level that holds still, which tells the commits apart sooner, until the drift shows; a culprit
    # must convince the model that fits the drift (holding still is its special case) and the planning one.
    still = readings.posterior(n)
    drifts = misfit.drifting(readings, still.median())
    post = readings.posterior(n, drift=True) if drifts else still
    untestable = t.untestable_in(scope)
    block = top_block(post, untestable)
    guess = Guess(None if block.last > n else scope.sha(block.last), block.mass)
    confident = block.last <= n and block.mass >= s.confidence
    if confident:  # the drifting model, asked only when the planning one is convinced (it costs a posterior)
        drifting = post if drifts else readings.posterior(n, drift=True)
        named = drifting.cdf(block.last) - drifting.cdf(block.parent)
        confident = named >= s.confidence and readings.evidence_of_change(drifting) >= 1 / (1 - s.confidence)

    def finish(outcome: Outcome) -> Decision:
        return t.end(outcome, guess=guess)

    if block.last > n and block.mass >= s.confidence:
        found = f"no commit reads worse than GOOD (P={block.mass:.3f} that none does): nothing to revert"
        return finish(Outcome(Status.NO_CULPRIT, found, confidence=block.mass))
    lacking = [p for p in (block.last, block.parent) if confident and readings.count(p) < s.samples]
    if confident and not lacking:
        culprit = scope.sha(block.last)
        if t.state.phase is not Phase.CONFIRMING or t.state.confirming != culprit:
            t = t.moved(
                phase=Phase.CONFIRMING, confirming=culprit, confirm_round=t.round, revert=None, revert_error=None
            )
        effect = Effect.at(readings, block.last, block.parent, drift=misfit.drift_words(readings, block.last))
        return _prove(t, culprit, effect, block.mass, guess)
    if t.state.phase is Phase.CONFIRMING:  # later readings moved the answer: search again
        if t.confirming:
            return t.decision(guess=guess, posterior=post)
        t = t.moved(phase=Phase.SEARCHING, confirming=None, revert=None, revert_error=None)
    if ev.evidence_count() >= s.run_budget(n):
        found = (
            f"stopped after {ev.evidence_count()} runs without telling the culprit apart at confidence "
            f"{s.confidence} (best guess P={block.mass:.3f})"
        )
        outside = misfit.misfit(readings, min(block.last, n))
        if outside:
            found += f"; the readings left the model's assumptions: {'; '.join(outside)}"
        return finish(Outcome(Status.INCONCLUSIVE, found, best_guess=guess.sha, confidence=block.mass))
    endpoint_probes: list[Probe] = []
    judged = _still_judged(t, readings, still)
    if judged is not None:
        good, bad = judged
        ends = _endpoints(good, bad, s.metric.higher_is_worse if s.metric else True)
        if ends.alike or min(len(good), len(bad)) >= ENDPOINT_MOST:
            return _not_reproducible(t, good, bad, ends)
        # half the runners (at least one) read the endpoints, the side read less first, GOOD on a tie; the rest search
        had = {problem.good: len(good), problem.bad: len(bad)}
        flying = t.flying(problem.good, (Kind.CALIBRATE,)) + t.flying(problem.bad, (Kind.CALIBRATE,))
        for side in (problem.good, problem.bad):
            had[side] += t.flying(side, (Kind.CALIBRATE,))
        while free and flying < max(1, (t.free + len(in_flight)) // 2):
            side = problem.good if had[problem.good] <= had[problem.bad] else problem.bad
            endpoint_probes.append(t.probe(side, Kind.CALIBRATE))
            had[side] += 1
            flying += 1
            free -= 1
    busy = [p for p in (scope.position(pr.sha) for pr in in_flight if pr.kind is Kind.SEARCH) if p is not None]
    if lacking:
        positions = [p for p in lacking for _ in range(s.samples - readings.count(p) - busy.count(p))][:free]
    elif block.last <= n and block.mass >= FAVOURITE:
        positions = _sides(readings, block.last, block.parent, busy, free)
    else:
        positions = sampled_probes(post, free, busy, untestable)
    if not positions and not in_flight and block.last <= n:  # the mass sits on one commit, short of the confidence
        positions = _sides(readings, block.last, block.parent, busy, free)
    probes = tuple(endpoint_probes) + tuple(t.probe(scope.sha(p), Kind.SEARCH) for p in positions)
    return t.decision(probes, guess=guess, posterior=post)


def _still_judged(t: Turn, readings: Readings, still: Posterior) -> tuple[list[float], list[float]] | None:
    """GOOD's and BAD's readings (calibration's and any the search took of them), while the search started on the
    endpoints' lean is still on trial: the endpoints' odds short of `ENDPOINT_GATE` and the change-point model's
    evidence of a change (every reading of the range) short of it too. None once either passes, or when the search
    was not started on the lean: calibration's readings alone passed the gate, or were never taken (a metric taken
    as sampled mid-search), or the search is in a merge's commits."""
    problem, ev, s = t.problem, t.evidence, t.settings
    if s.metric is None or t.state.merges or readings.evidence_of_change(still) >= ENDPOINT_GATE:
        return None
    good, bad = _values(ev, problem.good, Kind.CALIBRATE), _values(ev, problem.bad, Kind.CALIBRATE)
    if min(len(good), len(bad)) < ENDPOINT_FIRST or _endpoints(good, bad, s.metric.higher_is_worse).search:
        return None  # a search the gate itself started is on no trial
    good, bad = _endpoint_values(ev, problem.good), _endpoint_values(ev, problem.bad)
    return None if _endpoints(good, bad, s.metric.higher_is_worse).search else (good, bad)


def _sides(readings: Readings, culprit: int, parent: int, busy: list[int], free: int) -> list[int]:
    """Runners for the favourite and its parent: in pairs, one each in the same round (a drift in time then moves
    both readings of a pair alike, as the A/B pairs its sides, and the drifting model tells the two apart sooner);
    an odd runner to the side read less, the favourite on a tie."""
    counts = {p: readings.count(p) + busy.count(p) for p in (culprit, parent)}
    positions = [p for _ in range(free // 2) for p in (culprit, parent)]
    for _ in range(free % 2):
        p = min(counts, key=lambda q: (counts[q], q == parent))
        counts[p] += 1
        positions.append(p)
    return positions


def _prove(t: Turn, culprit: str, effect: Effect, mass: float, guess: Guess) -> Decision:
    """The culprit named; with a branch head, its revert's A/B proof sampled first."""
    problem, state, ev, s = t.problem, t.state, t.evidence, t.settings
    if problem.head and state.revert is None and state.revert_error is None:
        return t.decision(guess=guess, wants_revert=culprit)
    ab = None
    if problem.head and state.revert:
        pair = ((problem.head, Kind.AB_HEAD), (state.revert, Kind.AB_REVERT))
        sides = {kind: _timed(ev, sha, kind, state.confirm_round) for sha, kind in pair}
        judged = _paired(sides[Kind.AB_HEAD], sides[Kind.AB_REVERT], effect, s.confidence)
        if judged is None and min(len(v) for v in sides.values()) < s.max_ab_samples:
            # Undecided: `samples` more of each side, HEAD's and the revert's runs alternating (the side read less
            # first), as Pinpoint alternates its attempts: a runner that drifts meanwhile moves both sides alike.
            target = min(s.max_ab_samples, (max(len(v) for v in sides.values()) // s.samples + 1) * s.samples)
            had = {kind: len(sides[kind]) + t.flying(sha, (kind,)) for sha, kind in pair}
            turns = sorted(pair, key=lambda side: had[side[1]])
            probes = [t.probe(sha, kind) for i in range(target) for sha, kind in turns if had[kind] + i < target]
            if probes or t.confirming:
                return t.decision(tuple(probes[: t.free]), guess=guess)
        head, revert = judged or tuple(_side(values, effect, s.confidence) for values in sides.values())
        ab = ABResult(problem.head, state.revert, tuple(v for v in (head,) if v), tuple(v for v in (revert,) if v))
    how = f"{effect.describe()}; {effect.sides()}"
    proven = "HEAD reads like the culprit, HEAD + revert like its parent"
    return found_decision(t, culprit, mass, guess, how, ab, proven, effect=effect)


def _paired(
    head: list[tuple[float, float]], revert: list[tuple[float, float]], effect: Effect, confidence: float
) -> tuple[Verdict | None, Verdict | None] | None:
    """HEAD's and HEAD + revert's verdicts once their readings, paired in the order they ran (a drift in time moves
    both readings of a pair alike), tell whether HEAD reads worse than the revert; None: not yet.

    Two likelihood ratios on the pairs' differences, Gaussian with the split's spread plugged in, each against "no
    difference", with bound B = confidence / (1 - confidence):
    - proven (HEAD BAD, the revert GOOD) once "HEAD reads worse by a shift drawn from the culprit's estimate" is B
      times likelier: the shift Gaussian around the estimate with its standard error, kept to its worse side (a
      mixture of Wald's ratios, which weighs the shifts the pairs themselves read as they come). When the revert
      takes nothing away, or makes it worse, each ratio mixed is a supermartingale and so is their mixture: by
      Ville's inequality it ever reaches B with probability at most 1/B (1.01% at 0.99), however many pairs;
    - alike once "HEAD reads worse by `REFUSE_SHARE` of the estimate" is B times less likely (Wald's ratio). When
      the revert takes away at least that share, its inverse is a supermartingale: such a revert is judged alike
      with probability at most 1/B, however far the estimate overshot the truth. Both sides then get the verdict
      their readings give together against the split's levels.
    The estimate, the winner of the search's selection and often too large, is thus not what a revert must take away
    to be proven, nor what it must fail to take away to be refused. Both bounds hold inside the model: Gaussian
    pairs with the split's spread, itself an estimate from the search's readings (docs/algorithm.md, "The A/B
    proof", measures what that costs)."""
    pairs = list(zip(sorted(head, key=lambda r: r[1]), sorted(revert, key=lambda r: r[1])))
    if not pairs:
        return None
    sd = max(effect.noise, 1e-9 * max(1.0, abs(effect.before)))
    diffs = [h - r for (h, _), (r, _) in pairs]
    bound = math.log(confidence / (1 - confidence))
    error = effect.half_width / NormalDist().inv_cdf(0.5 + effect.level / 2)
    if _log_mixture(diffs, effect.shift, error, sd) >= bound:
        return Verdict.BAD, Verdict.GOOD
    if _log_ratio(diffs, REFUSE_SHARE * effect.shift, sd) <= -bound:
        alike = _side(head + revert, effect, confidence)
        return alike, alike
    return None


def _log_ratio(diffs: list[float], shift: float, sd: float) -> float:
    """log of Wald's likelihood ratio of "each difference is `shift` plus noise" against "noise alone" (each
    difference of two readings of spread `sd`)."""
    return sum((d - shift / 2) * shift / (2 * sd**2) for d in diffs)


def _log_mixture(diffs: list[float], shift: float, error: float, sd: float) -> float:
    """log of the likelihood ratio of "each difference is one shift plus noise", the shift drawn from a Gaussian of
    mean `shift` and spread `error` cut at 0 (kept to `shift`'s side), against "noise alone" (each difference of
    two readings of spread `sd`): Wald's ratio averaged over the shift, in closed form."""
    if not 0.0 < error < math.inf:
        return _log_ratio(diffs, shift, sd)
    var, size, sign = 2 * sd**2, abs(shift), math.copysign(1.0, shift)
    mean = sign * sum(diffs) / var  # the sufficient statistic, oriented towards worse
    grow = 1 + len(diffs) * error**2 / var
    cut = NormalDist()

    def log_cdf(x: float) -> float:
        return math.log(max(cut.cdf(x), 1e-300))

    fitted = 0.5 * (mean**2 * error**2 + 2 * mean * size - size**2 * len(diffs) / var) / grow - 0.5 * math.log(grow)
    return fitted + log_cdf((mean * error**2 + size) / (error * math.sqrt(grow))) - log_cdf(size / error)


def _side(values: list[tuple[float, float]], effect: Effect, confidence: float) -> Verdict | None:
    """GOOD or BAD once the readings tell which side of the culprit's split they come from at the stated error rate
    (Wald's sequential probability ratio test, the split's levels -- moved by its drift to each reading's round --
    and spread plugged in); None: not yet."""
    if not values:
        return None
    sd = max(effect.noise, 1e-9 * max(1.0, abs(effect.before)))
    llr = 0.0
    for v, time in values:
        good_mean, bad_mean = effect.expected(False, time), effect.expected(True, time)
        llr += (v - (good_mean + bad_mean) / 2) * (bad_mean - good_mean) / sd**2
    bound = math.log(confidence / (1 - confidence))
    if llr >= bound:
        return Verdict.BAD
    if llr <= -bound:
        return Verdict.GOOD
    return None


def _describe(values: list[float]) -> str:
    return f"median {statistics.median(values):.6g} over {len(values)}"
