"""A noisy metric's readings along the range, and the change-point posterior they give (docs/algorithm.md,
"Noisy metrics").

Hypothesis c says: commits before c read like GOOD, commits from c on read worse by some shift, every reading
with the same unknown spread. Its likelihood against "no culprit" (every commit reads alike) is the one-sided
Bayes factor of the split at c (bot.domain.bisect.stats), so the posterior needs no estimate of GOOD's or BAD's
mean nor of the noise: every reading below the change is a sample of GOOD, every one above it of BAD. The
likelihood only changes at sampled positions, so the posterior keeps Posterior's segments.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from bot.domain.bisect.candidates import Scope
from bot.domain.bisect.posterior import NO_CULPRIT_PRIOR, Posterior
from bot.domain.bisect.stats import Split, Stats


@dataclass(frozen=True)
class Readings:
    """The bisect runner's metric readings by position in a scope (0 is GOOD), as reported."""

    by_pos: Mapping[int, tuple[float, ...]]
    higher_is_worse: bool = True

    @classmethod
    def at(cls, scope: Scope, readings: Iterable[tuple[str, float]], higher_is_worse: bool = True) -> Readings:
        positions = ((scope.position(sha), value) for sha, value in readings)
        return cls.by_position(((p, v) for p, v in positions if p is not None), higher_is_worse)

    @classmethod
    def by_position(cls, readings: Iterable[tuple[int, float]], higher_is_worse: bool = True) -> Readings:
        out: dict[int, list[float]] = {}
        for pos, value in readings:
            out.setdefault(pos, []).append(value)
        return cls({p: tuple(v) for p, v in sorted(out.items())}, higher_is_worse)

    def _oriented(self, values: Iterable[float]) -> list[float]:
        return [v if self.higher_is_worse else -v for v in values]

    def count(self, pos: int) -> int:
        return len(self.by_pos.get(pos, ()))

    def split(self, c: int) -> Split:
        """Readings before position c against those at c and after, oriented (higher is worse)."""
        a = [v for p, vals in self.by_pos.items() if p < c for v in vals]
        b = [v for p, vals in self.by_pos.items() if p >= c for v in vals]
        return Split(Stats.of(self._oriented(a)), Stats.of(self._oriented(b)))

    def posterior(self, n: int, no_culprit_prior: float = NO_CULPRIT_PRIOR) -> Posterior:
        """P(first worse position = c) for c in 1..n, and n+1: no change at all."""
        cuts = tuple(sorted({0, n} | {p for p in self.by_pos if 0 <= p <= n})) + (n + 1,)
        stats = [Stats.of(self._oriented(self.by_pos.get(p, ()))) for p in cuts[:-1]]
        prefix, suffix = [Stats()], [Stats()]
        for s in stats:
            prefix.append(prefix[-1] + s)
        for s in reversed(stats):
            suffix.append(suffix[-1] + s)
        suffix.reverse()
        # Segment j: positions cuts[0..j] read like GOOD, cuts[j+1..] worse; the last segment is "no change".
        ll = [Split(prefix[j + 1], suffix[j + 1]).log_bayes_factor() for j in range(len(cuts) - 2)] + [0.0]
        return Posterior.of_segments(n, cuts, ll, no_culprit_prior)

    def evidence_of_change(self, post: Posterior, no_culprit_prior: float = NO_CULPRIT_PRIOR) -> float:
        """The Bayes factor of "some commit made it worse" against "no commit did" (the prior's odds taken out).

        Under "no commit did", every reading is drawn alike whichever commits were sampled and in what order, so
        this factor is a test martingale: the chance it ever reaches 1/alpha is at most alpha (Ville's
        inequality). Naming a culprit only past that bound caps the false-culprit rate at alpha."""
        none = post.no_culprit
        if none <= 0.0:
            return math.inf
        return (1 - none) / none * no_culprit_prior / (1 - no_culprit_prior)


@dataclass(frozen=True)
class Effect:
    """What the culprit did to the metric: readings at it and its parent, and the shift with its interval."""

    culprit: tuple[float, ...]
    parent: tuple[float, ...]
    shift: float  # mean of the readings from the culprit on, minus the mean of those before it (as reported)
    half_width: float
    level: float
    before: float  # mean before the culprit, as reported
    noise: float  # the readings' common spread (pooled standard deviation)

    @classmethod
    def at(cls, readings: Readings, c: int, parent: int, level: float = 0.95) -> Effect:
        split = readings.split(c)
        shift, half = split.interval(level)
        sign = 1.0 if readings.higher_is_worse else -1.0
        before = sign * split.a.mean
        at = readings.by_pos
        return cls(at.get(c, ()), at.get(parent, ()), sign * shift, half, level, before, split.pooled_sd)

    @property
    def percent(self) -> tuple[float, float] | None:
        if not self.before:
            return None
        return 100 * self.shift / abs(self.before), 100 * self.half_width / abs(self.before)

    def describe(self) -> str:
        """ "-4.1% +/- 0.9% at the culprit (95%)", or in the metric's units when GOOD reads 0."""
        pct = self.percent
        level = f"{100 * self.level:g}%"
        if pct is not None:
            return f"{pct[0]:+.1f}% +/- {pct[1]:.1f}% at the culprit ({level})"
        return f"{self.shift:+.4g} +/- {self.half_width:.2g} at the culprit ({level})"

    def sides(self) -> str:
        return f"culprit {_summary(self.culprit)}; parent {_summary(self.parent)}"


def _summary(values: tuple[float, ...]) -> str:
    if not values:
        return "no readings"
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"median {statistics.median(values):.6g}, sd {spread:.3g} (n={len(values)})"
