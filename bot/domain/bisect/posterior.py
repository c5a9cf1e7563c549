"""The posterior over "which candidate is the first bad one", with a flake model.

Positions: 0 is the GOOD endpoint, 1..n the candidates oldest first (n is BAD), and the
hypothesis n+1 stands for "no culprit" (every commit good, BAD's failures were flakes).
Hypothesis i means: positions >= i are bad, positions < i are good. A good commit fails with
probability `flake`; a bad one always fails, so a pass rules out every hypothesis at or below it.

The likelihood only changes at observed positions, so the posterior is stored as a handful of
segments of equal per-hypothesis density; every query costs O(observed positions), not O(n).
"""

from __future__ import annotations

import bisect
import math
from collections.abc import Mapping
from dataclasses import dataclass

NO_CULPRIT_PRIOR = 0.05


@dataclass(frozen=True)
class Tally:
    passes: int = 0
    fails: int = 0

    def add(self, passed: bool) -> Tally:
        return Tally(self.passes + passed, self.fails + (not passed))

    def __add__(self, other: Tally) -> Tally:
        return Tally(self.passes + other.passes, self.fails + other.fails)


class Contradiction(ValueError):
    """The evidence has zero likelihood under every hypothesis (a flaky test read as deterministic)."""


def _xlog(count: int, prob: float) -> float:
    if count == 0:
        return 0.0
    return count * math.log(prob) if prob > 0 else -math.inf


@dataclass(frozen=True)
class Posterior:
    n: int
    cuts: tuple[int, ...]  # segment j holds hypotheses (cuts[j], cuts[j+1]]; the last one is n+1 alone
    density: tuple[float, ...]  # posterior mass of each hypothesis in segment j
    before: tuple[float, ...]  # posterior mass of all segments before j

    @classmethod
    def compute(
        cls,
        n: int,
        tallies: Mapping[int, Tally],
        flake: float,
        no_culprit_prior: float = NO_CULPRIT_PRIOR,
    ) -> Posterior:
        if n < 1:
            raise ValueError("need at least one candidate")
        cuts = sorted({0, n} | {p for p in tallies if 0 <= p <= n}) + [n + 1]
        good_ll = [
            _xlog(tallies.get(p, Tally()).passes, 1 - flake) + _xlog(tallies.get(p, Tally()).fails, flake)
            for p in cuts[:-1]
        ]
        bad_ll = [_xlog(tallies.get(p, Tally()).passes, 0.0) for p in cuts[:-1]]
        # Segment j: positions cuts[0..j] are good, cuts[j+1..] are bad.
        segs = len(cuts) - 1
        ll = []
        good_sum = 0.0
        bad_suffix = [0.0] * (segs + 1)
        for j in range(segs - 1, -1, -1):
            bad_suffix[j] = bad_suffix[j + 1] + bad_ll[j]
        for j in range(segs):
            good_sum += good_ll[j]
            ll.append(good_sum + bad_suffix[j + 1])
        return cls.of_segments(n, tuple(cuts), ll, no_culprit_prior)

    @classmethod
    def of_segments(
        cls, n: int, cuts: tuple[int, ...], ll: list[float], no_culprit_prior: float = NO_CULPRIT_PRIOR
    ) -> Posterior:
        """From the log-likelihood of each segment's hypotheses (the last segment: "no culprit")."""
        segs = len(cuts) - 1
        top = max(ll)
        if top == -math.inf:
            raise Contradiction("no hypothesis explains the results")
        per_commit = (1 - no_culprit_prior) / n
        weights = []
        for j in range(segs):
            prior = no_culprit_prior if j == segs - 1 else per_commit
            weights.append(math.exp(ll[j] - top) * prior if ll[j] > -math.inf else 0.0)
        total = sum(w * (cuts[j + 1] - cuts[j]) for j, w in enumerate(weights))
        density = tuple(w / total for w in weights)
        before, acc = [], 0.0
        for j, d in enumerate(density):
            before.append(acc)
            acc += d * (cuts[j + 1] - cuts[j])
        return cls(n, tuple(cuts), density, tuple(before))

    def _segment(self, i: int) -> int:
        return min(bisect.bisect_left(self.cuts, i) - 1, len(self.density) - 1)

    def cdf(self, p: int) -> float:
        """P(first bad position <= p)."""
        if p <= 0:
            return 0.0
        if p > self.n:
            return 1.0
        j = self._segment(p)
        return min(1.0, self.before[j] + self.density[j] * (p - self.cuts[j]))

    def mass(self, i: int) -> float:
        """Posterior of hypothesis i (n+1 = no culprit)."""
        return self.density[self._segment(i)] if 1 <= i <= self.n + 1 else 0.0

    def support(self) -> int:
        """How many hypotheses (no culprit included) still have mass: for a deterministic test, those left to tell
        apart."""
        return sum(self.cuts[j + 1] - self.cuts[j] for j, d in enumerate(self.density) if d > 0)

    @property
    def no_culprit(self) -> float:
        return self.density[-1]

    def quantile(self, t: float) -> int:
        """Smallest position p in 1..n+1 with cdf(p) >= t."""
        eps = 1e-12
        j = max(0, bisect.bisect_right(self.before, t - eps) - 1)
        while j < len(self.density):
            lo, hi = self.cuts[j], self.cuts[j + 1]
            d = self.density[j]
            if d > 0 and self.before[j] + d * (hi - lo) >= t - eps:
                k = math.ceil((t - self.before[j]) / d - 1e-9)
                return max(lo + 1, min(hi, lo + k))
            j += 1
        return self.n + 1

    def median(self) -> int:
        return self.quantile(0.5)
