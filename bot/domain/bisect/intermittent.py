"""The pass/fail posterior when a culprit need not fail every time (docs/algorithm.md, "Intermittent culprits").

Hypothesis i (first bad position i, or n+1: no culprit) says: every position below i fails with the flake rate f,
every position from i on fails with one rate q above f -- 1 for a regression that always fails, anything in (f, 1)
for an intermittent one (a race, a GPU nondeterminism). Neither f nor q is estimated and then trusted: the
likelihood of a hypothesis is integrated over both,

    L(i) = sum_f w(f) f^Fg (1-f)^Pg [ P_ALWAYS [Pb = 0] + (1 - P_ALWAYS) mean_{q in (f, 1)} q^Fb (1-q)^Pb ]

where Fg, Pg count the failures and passes below i, Fb, Pb those from i on, w is the prior over the flake rate
(a point mass when it is declared or taken as 0) and q is uniform on (f, 1) beside a point mass P_ALWAYS at 1. A
pass at a bad commit is then evidence against it rather than proof, and a commit is named only once its parent
has passed often enough that a culprit failing most but not all of the time would have shown itself there.

Integrals are sums over a fixed grid of q (midpoints of Q_STEPS equal steps), suffix-summed so that a decision
costs O(segments x (grid of q + grid of f)): the segments are Posterior's (the likelihood only changes at tested
positions).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from functools import cache, lru_cache

from bot.domain.bisect.model import Settings
from bot.domain.bisect.posterior import NO_CULPRIT_PRIOR, Posterior, Tally

Q_MIN = 0.2  # the least failure rate a culprit is taken to cause (one failing less is not told from a flake)
P_ALWAYS = 0.3  # prior probability that a culprit fails every time (q = 1)
Q_STEPS = 40
_Q = tuple((t + 0.5) / Q_STEPS for t in range(Q_STEPS))
_LOG_Q = tuple(math.log(q) for q in _Q)
_LOG_1MQ = tuple(math.log(1 - q) for q in _Q)
FLAKE_GRID = (0.0, 0.01, 0.02, 0.03, 0.05, 0.075, 0.1, 0.15, 0.2, 0.25, 0.3)


def flake_prior(declared: float | None, floor: float, trusted: bool) -> tuple[tuple[float, float], ...]:
    """(flake rate, prior weight) pairs: the declared rate alone, 0 for a test trusted to be deterministic,
    otherwise every rate of the grid from the floor up, equally likely."""
    if trusted:
        return ((0.0, 1.0),)
    if declared:
        return ((declared, 1.0),)
    rates = [f for f in FLAKE_GRID if f >= floor] or [floor]
    return tuple((f, 1.0 / len(rates)) for f in rates)


def _logsumexp(values: Sequence[float]) -> float:
    top = max(values)
    if top == -math.inf:
        return top
    return top + math.log(sum(math.exp(v - top) for v in values))


def _xlog(count: int, logp: float) -> float:
    return 0.0 if count == 0 else count * logp


def _log_or_ninf(p: float) -> float:
    return math.log(p) if p > 0 else -math.inf


@lru_cache(maxsize=65536)
def _bad_side(
    fails: int, passes: int, flakes: tuple[float, ...], always: float, min_ratio: float = 1.0
) -> tuple[float, ...]:
    """log of [always [passes = 0] + (1 - always) mean_{q > max(min_ratio f, Q_MIN)} q^fails (1-q)^passes] for each
    f (always < 1). Cached: a decision asks for the same counts segment after segment, and again after each result."""
    terms = [_xlog(fails, lq) + _xlog(passes, l1q) for lq, l1q in zip(_LOG_Q, _LOG_1MQ)]
    top = max(terms)
    suffix = [0.0] * (Q_STEPS + 1)  # sum of exp(terms[t:] - top)
    for t in range(Q_STEPS - 1, -1, -1):
        suffix[t] = suffix[t + 1] + math.exp(terms[t] - top)
    out = []
    for f in flakes:
        first = _first_above(f * min_ratio)
        mean = top + math.log(suffix[first] / (Q_STEPS - first)) if first < Q_STEPS else -math.inf
        certain = math.log(always) if passes == 0 and always > 0 else -math.inf
        out.append(_logsumexp((certain, math.log(1 - always) + mean)))
    return tuple(out)


@cache
def _first_above(flake: float) -> int:
    """The first grid point of q above both the flake rate and Q_MIN."""
    return next((t for t, q in enumerate(_Q) if q > max(flake, Q_MIN)), Q_STEPS)


def intermittent_posterior(
    n: int,
    tallies: Mapping[int, Tally],
    flakes: Sequence[tuple[float, float]],
    always: float = P_ALWAYS,
    no_culprit_prior: float = NO_CULPRIT_PRIOR,
    min_ratio: float = 1.0,
) -> Posterior:
    """P(first bad position = i | results) with the culprit's failure rate and the flake rate integrated out;
    `always`: the prior probability that a culprit fails every time (1: a test declared deterministic); `min_ratio`:
    how many times the flake rate a culprit fails at least (1: anything above it; bot.domain.bisect.regression)."""
    if always >= 1:  # a culprit always fails: the deterministic model, one flake rate (flake_prior's point mass)
        ((flake, _),) = flakes
        return Posterior.compute(n, tallies, flake, no_culprit_prior)
    if n < 1:
        raise ValueError("need at least one candidate")
    return _intermittent(n, tuple(sorted(tallies.items())), tuple(flakes), always, no_culprit_prior, min_ratio)


@lru_cache(maxsize=4096)  # a few MB at most in a long-lived service
def _intermittent(
    n: int,
    tallies: tuple[tuple[int, Tally], ...],
    flakes: tuple[tuple[float, float], ...],
    always: float,
    no_culprit_prior: float,
    min_ratio: float,
) -> Posterior:
    """intermittent_posterior's sums, cached by value (a Posterior is immutable): decisions weigh the same results
    again and again (300 simulated incidents at n = 64: 10,847 asks, 3,074 of them distinct)."""
    observed = dict(tallies)
    cuts = sorted({0, n} | {p for p in observed if 0 <= p <= n}) + [n + 1]
    counts = [observed.get(p, Tally()) for p in cuts[:-1]]
    rates = tuple(f for f, _ in flakes)
    # per flake rate: (log w, log f, log 1-f)
    weighted = [(math.log(w), _log_or_ninf(f), _log_or_ninf(1 - f)) for f, w in flakes]
    no_bad = (0.0,) * len(rates)
    total_fails = sum(t.fails for t in counts)
    total_passes = sum(t.passes for t in counts)
    ll = []
    fg = pg = 0
    exp, log, ninf = math.exp, math.log, -math.inf
    for tally in counts:
        # the segment ending here: positions up to it good, the rest bad (the last segment: no culprit at all)
        fg, pg = fg + tally.fails, pg + tally.passes
        fb, pb = total_fails - fg, total_passes - pg
        bad = _bad_side(fb, pb, rates, always, min_ratio) if fb + pb else no_bad
        # _logsumexp of w + _xlog(fg, log f) + _xlog(pg, log 1-f) + bad, inlined in the same order of operations
        # (the same floats): this loop runs for every segment of every decision
        terms = [
            w + ((fg * lf if fg else 0.0) + (pg * l1f if pg else 0.0)) + b for (w, lf, l1f), b in zip(weighted, bad)
        ]
        top = max(terms)
        ll.append(top if top == ninf else top + log(sum([exp(v - top) for v in terms])))
    return Posterior.of_segments(n, tuple(cuts), ll, no_culprit_prior)


def search_posterior(n: int, tallies: Mapping[int, Tally], settings: Settings, flake: float) -> Posterior:
    """The engine's posterior for a pass/fail test: `flake` is 0 while the test is trusted (no contradiction yet),
    and `--flake-rate 0` declares it deterministic (a culprit always fails, as git bisect run takes it)."""
    flakes = flake_prior(settings.flake_rate, settings.flake_floor, trusted=flake == 0)
    return intermittent_posterior(n, tallies, flakes, 1.0 if settings.flake_rate == 0 else P_ALWAYS)
