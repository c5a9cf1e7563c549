"""The statistics a noisy metric is judged by: two groups of readings, Student's t, and the Bayes factor that the
second group reads worse than the first (bot.domain.bisect.readings). Standard library only."""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

EFFECT_PRIOR = 1.5  # the prior scale of a regression, in standard deviations of the noise (docs/algorithm.md)
_T_CAP = 1e6  # a t statistic beyond this (readings identical within each group) is as good as certain


@dataclass(frozen=True)
class Stats:
    """Count, mean and sum of squared deviations of some readings (combinable without the readings)."""

    count: int = 0
    mean: float = 0.0
    m2: float = 0.0

    @classmethod
    def of(cls, values: Iterable[float]) -> Stats:
        out = cls()
        for v in values:
            out = out.add(v)
        return out

    def add(self, value: float) -> Stats:
        count = self.count + 1
        delta = value - self.mean
        mean = self.mean + delta / count
        return Stats(count, mean, self.m2 + delta * (value - mean))

    def __add__(self, other: Stats) -> Stats:
        if not other.count:
            return self
        if not self.count:
            return other
        count = self.count + other.count
        delta = other.mean - self.mean
        m2 = self.m2 + other.m2 + delta**2 * self.count * other.count / count
        return Stats(count, self.mean + delta * other.count / count, m2)

    @property
    def sd(self) -> float:
        return math.sqrt(self.m2 / (self.count - 1)) if self.count > 1 else 0.0


def _betacf(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        even = m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m))
        odd = -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1))
        for num in (even, odd):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < 1e-14:
            break
    return h


def incomplete_beta(a: float, b: float, x: float) -> float:
    """I_x(a, b), the regularized incomplete beta function."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    log_front = math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x) + b * math.log1p(-x)
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _betacf(a, b, x) / a
    return 1.0 - math.exp(log_front) * _betacf(b, a, 1.0 - x) / b


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    if math.isinf(t):
        return 1.0 if t > 0 else 0.0
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t))
    return 1.0 - tail if t > 0 else tail


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p (bisection: called once per reported interval)."""
    lo, hi = -1e3, 1e3
    for _ in range(200):
        mid = (lo + hi) / 2
        if t_cdf(mid, df) < p:
            lo = mid
        else:
            hi = mid
    return (lo + hi) / 2


@dataclass(frozen=True)
class Split:
    """Readings before a change (`a`) and from it on (`b`), oriented so that higher is worse."""

    a: Stats
    b: Stats

    @property
    def df(self) -> int:
        return self.a.count + self.b.count - 2

    @property
    def pooled_sd(self) -> float:
        return math.sqrt((self.a.m2 + self.b.m2) / self.df) if self.df > 0 else 0.0

    def t(self) -> float:
        """Two-sample t statistic of b's mean over a's (pooled variance)."""
        diff = self.b.mean - self.a.mean
        se = self.pooled_sd * math.sqrt(1 / self.a.count + 1 / self.b.count)
        if se <= 1e-12 * max(1.0, abs(self.a.mean), abs(self.b.mean)):
            return math.copysign(_T_CAP, diff) if diff else 0.0
        return max(-_T_CAP, min(_T_CAP, diff / se))

    def log_bayes_factor(self, scale: float = EFFECT_PRIOR) -> float:
        """log of the Bayes factor for "b reads worse than a" against "both read alike".

        The alternative puts a half-normal prior of `scale` standard deviations on the shift; the means and the
        common spread are unknown (flat and 1/sigma priors, shared by both hypotheses). Two-sided, that factor
        has the closed form of Gonen et al. (2005), a ratio of scaled t densities at the observed t; the
        one-sided factor is twice it times the posterior probability that the shift is positive."""
        if self.a.count < 1 or self.b.count < 1 or self.df < 1:
            return 0.0
        n = self.a.count * self.b.count / (self.a.count + self.b.count)
        t, df = self.t(), self.df
        s2 = 1 + n * scale * scale
        two_sided = -0.5 * math.log(s2) + (df + 1) / 2 * (math.log1p(t * t / df) - math.log1p(t * t / (df * s2)))
        positive = t_cdf(t * scale * math.sqrt(n) / math.sqrt(s2), df)
        return two_sided + math.log(2.0) + math.log(max(positive, 1e-300))

    def interval(self, level: float) -> tuple[float, float]:
        """The shift b - a and the half-width of its two-sided `level` confidence interval (Student's t)."""
        diff = self.b.mean - self.a.mean
        if self.df < 1:
            return diff, math.inf
        se = self.pooled_sd * math.sqrt(1 / self.a.count + 1 / self.b.count)
        return diff, t_quantile(0.5 + level / 2, self.df) * se
