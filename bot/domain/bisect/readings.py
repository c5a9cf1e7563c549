"""A noisy metric's readings along the range, and the change-point posterior they give (docs/algorithm.md,
"Noisy metrics").

Hypothesis c says: commits before c read like GOOD, commits from c on read worse by some shift, every reading
with the same unknown spread around a level that may drift linearly with time (a runner warming up, a neighbour
moving in). Its likelihood against "no culprit" (every commit reads alike, drifting the same way) is the
one-sided Bayes factor of the shift at c with the drift fitted beside it (bot.domain.bisect.stats), so the
posterior needs no estimate of GOOD's or BAD's mean, the drift or the noise: they are integrated out. The
likelihood only changes at sampled positions, so the posterior keeps Posterior's segments.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import cached_property

from bot.domain.bisect.candidates import Scope
from bot.domain.bisect.posterior import NO_CULPRIT_PRIOR, Posterior
from bot.domain.bisect.stats import Contrast, Moments, drift_contrast, drift_of


@dataclass(frozen=True)
class Reading:
    """One run's metric at a position of the scope (0 is GOOD), and when it ran (its round: runs of one round run
    side by side)."""

    pos: int
    value: float
    time: float = 0.0


@dataclass(frozen=True)
class Readings:
    """The bisect runner's metric readings along a scope, as reported."""

    points: tuple[Reading, ...]
    higher_is_worse: bool = True

    @classmethod
    def at(cls, scope: Scope, readings: Iterable[tuple[str, float, float]], higher_is_worse: bool = True) -> Readings:
        """From (sha, value, time): readings of commits outside the scope are dropped."""
        positions = ((scope.position(sha), value, time) for sha, value, time in readings)
        return cls(tuple(Reading(p, v, t) for p, v, t in positions if p is not None), higher_is_worse)

    @classmethod
    def by_position(cls, readings: Iterable[tuple[int, float]], higher_is_worse: bool = True) -> Readings:
        """From (position, value), all read at one time."""
        return cls(tuple(Reading(p, v) for p, v in readings), higher_is_worse)

    @cached_property
    def by_pos(self) -> Mapping[int, tuple[float, ...]]:
        out: dict[int, list[float]] = {}
        for r in self.points:
            out.setdefault(r.pos, []).append(r.value)
        return {p: tuple(v) for p, v in sorted(out.items())}

    def _oriented(self, value: float) -> float:
        return value if self.higher_is_worse else -value

    @cached_property
    def _centre(self) -> tuple[float, float, float]:
        """The mean time, the mean value (oriented) and the values' scale: sums are taken around the means."""
        if not self.points:
            return 0.0, 0.0, 1.0
        ts = [r.time for r in self.points]
        ys = [self._oriented(r.value) for r in self.points]
        return statistics.fmean(ts), statistics.fmean(ys), max(1.0, max(abs(y) for y in ys))

    @cached_property
    def _moments_at(self) -> Mapping[int, Moments]:
        t0, y0, _ = self._centre
        sums: dict[int, list[float]] = {}
        for r in self.points:
            t, y = r.time - t0, self._oriented(r.value) - y0
            acc = sums.setdefault(r.pos, [0.0] * 6)
            for i, v in enumerate((1.0, t, y, t * t, t * y, y * y)):
                acc[i] += v
        return {p: Moments(int(a[0]), *a[1:]) for p, a in sums.items()}

    def _moments(self, pos: int) -> Moments:
        return self._moments_at.get(pos, Moments())

    def count(self, pos: int) -> int:
        return len(self.by_pos.get(pos, ()))

    def _sides(self, c: int) -> tuple[Moments, Moments]:
        before, after = Moments(), Moments()
        for p in self.by_pos:
            if p < c:
                before = before + self._moments(p)
            else:
                after = after + self._moments(p)
        return before, after

    def mean_before(self, c: int) -> float:
        """The mean of the readings before position c, as reported."""
        below = self._sides(c)[0]
        return self._oriented(self._centre[1] + below.y / below.count) if below.count else 0.0

    def contrast(self, c: int, drift: bool = True) -> Contrast:
        """The shift from position c on; with `drift`, a linear drift in time fitted beside it (drift_contrast)."""
        return drift_contrast(*self._sides(c), self._centre[2], drift)

    def drift(self, c: int) -> Contrast:
        """The readings' common slope in time (oriented: positive drifts worse), with a change at c fitted beside it."""
        return drift_of(*self._sides(c), self._centre[2])

    def residuals(self, c: int) -> list[float]:
        """Each reading less its side's level and the common drift (oriented), with a change at c."""
        slope = self.drift(c).shift
        t0, y0, _ = self._centre
        sides = self._sides(c)
        level = [(m.y - slope * m.t) / m.count if m.count else 0.0 for m in sides]
        return [self._oriented(r.value) - y0 - level[r.pos >= c] - slope * (r.time - t0) for r in self.points]

    @property
    def span(self) -> float:
        """The time between the first reading and the last."""
        times = [r.time for r in self.points]
        return max(times) - min(times) if times else 0.0

    def posterior(self, n: int, no_culprit_prior: float = NO_CULPRIT_PRIOR, drift: bool = False) -> Posterior:
        """P(first worse position = c) for c in 1..n, and n+1: no change at all; with `drift`, every reading's
        level may also move linearly in time."""
        cuts = tuple(sorted({0, n} | {p for p in self.by_pos if 0 <= p <= n})) + (n + 1,)
        moments = [self._moments(p) for p in cuts[:-1]]
        prefix, suffix = [Moments()], [Moments()]
        for m in moments:
            prefix.append(prefix[-1] + m)
        for m in reversed(moments):
            suffix.append(suffix[-1] + m)
        suffix.reverse()
        _, _, magnitude = self._centre
        # Segment j: positions cuts[0..j] read like GOOD, cuts[j+1..] worse; the last segment is "no change".
        ll = [
            drift_contrast(prefix[j + 1], suffix[j + 1], magnitude, drift).log_bayes_factor()
            for j in range(len(cuts) - 2)
        ] + [0.0]
        return Posterior.of_segments(n, cuts, ll, no_culprit_prior)

    def evidence_of_change(self, post: Posterior, no_culprit_prior: float = NO_CULPRIT_PRIOR) -> float:
        """The Bayes factor of "some commit made it worse" against "no commit did" (the prior's odds taken out).

        Under "no commit did", with Gaussian readings of one spread around a level that holds still (or, for the
        drifting model's posterior, drifts linearly in time), every reading is drawn alike whichever commits were
        sampled and in what order, so this factor is a test martingale: the chance it ever reaches 1/alpha is at
        most alpha (Ville's inequality). Naming a culprit only past that bound caps at alpha the chance of naming
        one when no commit changed the metric, inside that model; nothing more (docs/algorithm.md)."""
        none = post.no_culprit
        if none <= 0.0:
            return math.inf
        return (1 - none) / none * no_culprit_prior / (1 - no_culprit_prior)


@dataclass(frozen=True)
class Effect:
    """What the culprit did to the metric: readings at it and its parent, and the shift with its interval."""

    culprit: tuple[float, ...]
    parent: tuple[float, ...]
    shift: float  # the level from the culprit on over the level before it, a drift in time taken out (as reported)
    half_width: float
    level: float
    before: float  # mean before the culprit, as reported
    noise: float  # the readings' common spread (pooled standard deviation)
    drift: str | None = None  # how the readings drifted in time, when they did (the shift is taken beside it)
    slope: float = 0.0  # ... and by how much per round (as reported): a later reading reads `slope` more a round
    since: float = 0.0  # the mean time of the readings before the culprit, when `before` was read

    @classmethod
    def at(cls, readings: Readings, c: int, parent: int, level: float = 0.95, drift: str | None = None) -> Effect:
        """The effect of a change at c; with `drift` (how the readings drifted), its slope kept to read later
        readings against."""
        contrast = readings.contrast(c)
        shift, half = contrast.interval(level)
        sign = 1.0 if readings.higher_is_worse else -1.0
        before = readings.mean_before(c)
        at = readings.by_pos
        slope = sign * readings.drift(c).shift if drift else 0.0
        since = statistics.fmean(r.time for r in readings.points if r.pos < c) if drift else 0.0
        return cls(
            at.get(c, ()), at.get(parent, ()), sign * shift, half, level, before, contrast.sd, drift, slope, since
        )

    def expected(self, bad: bool, time: float) -> float:
        """What a reading at `time` reads on average, from a commit before the culprit or (`bad`) from it on."""
        return self.before + self.slope * (time - self.since) + (self.shift if bad else 0.0)

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
        drift = f"; {self.drift}, fitted beside the change" if self.drift else ""
        return f"culprit {_summary(self.culprit)}; parent {_summary(self.parent)}{drift}"


def _summary(values: tuple[float, ...]) -> str:
    if not values:
        return "no readings"
    spread = statistics.stdev(values) if len(values) > 1 else 0.0
    return f"median {statistics.median(values):.6g}, sd {spread:.3g} (n={len(values)})"
