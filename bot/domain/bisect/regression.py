"""Whether a red test regressed at all, or fails by a flake anywhere (pure; for a group's member,
bot.domain.bisect.group).

A red run of several tests often holds one that fails by a flake everywhere, GOOD included, and failed at BAD by
chance. The search's own posterior (bot.domain.bisect.intermittent) cannot dismiss it soon: there a culprit may fail
at any rate q above the flake rate f, so "a culprit at i failing a little more often than f" explains a flaky test's
readings about as well as "no culprit" does, however many there are. What can be said is that no regression of a
stated size is there -- one failing at least MIN_RATIO times as often as the test flakes, and at least Q_MIN of the
time; a culprit below that (35% over a 30% flake) is not told from no culprit, as one under Q_MIN is not by the
search. The odds

    odds = L(no culprit) / mean_i L(culprit at i, q >= max(MIN_RATIO f, Q_MIN))

are the search's model with the culprit's rate held to the size (intermittent_posterior's `min_ratio`), both sides
integrated over the flake rate and q as there, the position uniform -- but with no weight on a culprit that fails
every time: the odds are asked only of a test whose BAD passed, which such a culprit never does (its weight would
only make the odds look better). Under a regression of the size drawn from that prior the odds are a martingale of
mean 1, however each run was chosen, so by Ville's inequality they ever reach 1 / (1 - C) with probability at most
1 - C (C the bisection's confidence): a test whose odds reach it ends `no_culprit`. As for a culprit the search
names, the bound is an average over the prior -- a culprit just at the size is dismissed more often than one far
above it -- and per rate it is measured (bench/regression_bench.py, docs/algorithm.md). The reading that made the
test red counts as a failure at BAD like any other, which only lowers the odds.

The readings that decide fastest are the endpoints': GOOD lies below every culprit and BAD above each.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.intermittent import flake_prior, intermittent_posterior
from bot.domain.bisect.model import Kind, Problem, Run
from bot.domain.bisect.posterior import Tally
from bot.domain.bisect.verdict import RawResult, Verdict

MIN_RATIO = 2.0  # a regression fails at least twice as often as the test flakes (and at least Q_MIN of the time)
SHARE = 2  # an endpoint's runs for the odds: at most this many times the other's (+ 2)


@dataclass(frozen=True)
class Regression:
    """What a test's readings say of a regression of MIN_RATIO: the log odds of none against one, the log odds that
    rule one out (the bisection's confidence), and the endpoints' own readings."""

    log_odds: float
    bar: float
    good: Tally
    bad: Tally

    @property
    def ruled_out(self) -> bool:
        """No regression of the stated size, wrongly said of one at most 1 - C of the time."""
        return self.log_odds >= self.bar

    @property
    def doubtful(self) -> bool:
        """No regression is at least as likely as one (even prior odds): the endpoints are the runs worth making."""
        return self.log_odds >= 0.0

    @property
    def probability(self) -> float:
        """P(no regression) from even prior odds."""
        return 1 / (1 + math.exp(-min(self.log_odds, 700.0)))

    def message(self, problem: Problem) -> str:
        def read(t: Tally) -> str:
            return f"{t.fails} of {t.passes + t.fails} runs"

        odds = math.exp(min(self.log_odds, 700.0))
        return (
            f"the test fails at GOOD {problem.good[:12]} ({read(self.good)}) about as often as at BAD "
            f"{problem.bad[:12]} ({read(self.bad)}): its failures are flakes, not a regression (one failing "
            f"{MIN_RATIO:g}x as often is ruled out at odds {odds:.0f}:1); nothing to bisect"
        )


def endpoint_runs(problem: Problem, runs: Sequence[Run], flying: Sequence[str], count: int) -> list[str]:
    """`count` runs of the endpoints (GOOD and BAD) for a test whose odds are in doubt: each where a reading is
    expected to raise the odds more if the test only flakes (at its failure rate so far), shared out between the two
    as runs pile up on one (`flying`: the endpoint runs of the test already in flight), and never more than
    SHARE x the other's runs (+ 2) on one: a flaky test's GOOD that happened to pass often would otherwise draw
    every run, while its BAD, read a few times, is what keeps a regression in play.

    A test that failed once and passes since gains most at BAD (a pass there is what a regression makes unlikely); a
    test failing now and then everywhere gains at both, GOOD's failures being what tells it from a regression."""
    now = regression(problem, runs).log_odds
    rate = (sum(r.raw.exit_code != 0 for r in runs) + 1) / (len(runs) + 2)
    gain = {}
    for sha in (problem.good, problem.bad):
        after = {
            code: regression(problem, [*runs, Run(sha, Kind.CALIBRATE, RawResult(code))]).log_odds - now
            for code in (0, 1)
        }
        gain[sha] = max(1e-9, rate * after[1] + (1 - rate) * after[0])
    pending = {sha: sum(f == sha for f in flying) for sha in gain}
    have = {sha: sum(r.sha == sha for r in runs) + pending[sha] for sha in gain}
    out = []
    for _ in range(count):
        sha = max(gain, key=lambda e: (gain[e] / (1 + pending[e]), e == problem.good))
        other = problem.bad if sha == problem.good else problem.good
        if have[sha] + 1 > SHARE * have[other] + 2:
            sha = other
        pending[sha] += 1
        have[sha] += 1
        out.append(sha)
    return out


def regression(problem: Problem, runs: Sequence[Run]) -> Regression:
    """The odds of no regression over one of at least MIN_RATIO times the flake rate, from every reading of the test on
    the first-parent range (CI's included)."""
    scope = problem.scope(())
    ev = Evidence.of(problem, runs)
    s = problem.settings
    flakes = flake_prior(s.flake_rate, s.flake_floor, trusted=False)
    # even prior odds: the posterior p of "no culprit" gives the odds (the Bayes factor) as p / (1 - p)
    none = intermittent_posterior(
        len(scope.candidates), ev.tallies(scope), flakes, 0.0, no_culprit_prior=0.5, min_ratio=MIN_RATIO
    ).no_culprit
    log_odds = math.inf if none >= 1 else -math.inf if none <= 0 else math.log(none) - math.log1p(-none)

    def runner(sha: str) -> Tally:
        out = Tally()
        for r, v in ev.verdicts:
            if r.sha == sha and r.kind is not Kind.CI and v.is_evidence:
                out = out.add(v is Verdict.GOOD)
        return out

    bar = -math.log(1 - s.confidence) if s.confidence < 1 else math.inf
    return Regression(log_odds, bar, runner(problem.good), runner(problem.bad))
