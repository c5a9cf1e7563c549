"""The statistics a noisy metric is judged by: two groups of readings (or the same with a drift in time fitted
beside them), Student's t, and the Bayes factor that the second group reads worse than the first
(bot.domain.bisect.readings). Student's t from scipy.special."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass
from types import ModuleType

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


@functools.cache
def _special() -> ModuleType:
    """scipy.special, imported when a t is first asked for: the store, the CLI and the bot import this module,
    and a pass/fail bisection never needs it (0.4 s of CPU at every start)."""
    from scipy import special

    return special


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom (scipy.special.stdtr: a search's Bayes factors ask for
    it tens of thousands of times, 7 times faster than the continued fraction written here before, and closer)."""
    return float(_special().stdtr(df, t))


def t_quantile(p: float, df: float) -> float:
    """The t with P(T <= t) = p."""
    return float(_special().stdtrit(df, p))


def _log_j(a: float, df: int) -> float:
    """log of the integral over v > 0 of v^df exp(-v^2 / 2 + a v): closed form at a = 0, else, with v = e^x (a
    smooth integrand over the whole line, near Gaussian around its mode), the trapezoid rule in steps of half its
    curvature width, out to where the integrand falls below 1e-17 of its peak (within 3e-8 in log of scipy's
    noncentral t density, about 60 evaluations)."""
    if a == 0.0:
        return (df - 1) / 2 * math.log(2.0) + math.lgamma((df + 1) / 2)
    root = math.sqrt(a * a + 4 * (df + 1))
    u = (a + root) / 2 if a > 0 else 2 * (df + 1) / (root - a)  # e^x at the mode: u^2 = df + 1 + a u
    mode, step = math.log(u), 0.5 / math.sqrt(u * u + df + 1)

    def log_f(x: float) -> float:
        return (df + 1) * x - math.exp(2 * x) / 2 + a * math.exp(x)

    peak, total = log_f(mode), 1.0
    for direction in (-1, 1):
        term, i = 1.0, 0
        while term >= 1e-17:
            i += 1
            term = math.exp(log_f(mode + direction * i * step) - peak)
            total += term
    return peak + math.log(step * total)


@dataclass(frozen=True)
class Contrast:
    """A shift estimated by least squares, whatever else the model fits beside it (the means, a drift in time):
    the estimate, its information `n_eff` (its variance is sigma^2 / n_eff), the residual sum of squares and its
    degrees of freedom. `magnitude`: the readings' scale, below which a standard error counts as zero."""

    shift: float
    n_eff: float
    rss: float
    df: int
    magnitude: float = 1.0

    @property
    def sd(self) -> float:
        return math.sqrt(max(self.rss, 0.0) / self.df) if self.df > 0 else 0.0

    @property
    def informative(self) -> bool:
        return self.df >= 1 and self.n_eff > 1e-9

    def t(self) -> float:
        """The shift over its standard error."""
        se = self.sd / math.sqrt(self.n_eff)
        if se <= 1e-12 * max(1.0, self.magnitude):
            return math.copysign(_T_CAP, self.shift) if self.shift else 0.0
        return max(-_T_CAP, min(_T_CAP, self.shift / se))

    def log_bayes_factor(self, scale: float = EFFECT_PRIOR) -> float:
        """log of the Bayes factor for "the shift is positive" against "there is none".

        The alternative puts a half-normal prior of `scale` standard deviations on the shift; every other
        coefficient and the common spread are unknown (flat and 1/sigma priors, shared by both hypotheses).
        Integrating those out leaves the shift's least-squares estimate with information n_eff and df residual
        degrees of freedom, so the two-sided factor has the closed form of Gonen et al. (2005) with n_eff for
        the two-sample n (a ratio of scaled t densities at the observed t); the one-sided factor is twice it
        times the posterior probability that the shift is positive."""
        if not self.informative:
            return 0.0
        n, t, df = self.n_eff, self.t(), self.df
        s2 = 1 + n * scale * scale
        two_sided = -0.5 * math.log(s2) + (df + 1) / 2 * (math.log1p(t * t / df) - math.log1p(t * t / (df * s2)))
        positive = t_cdf(t * scale * math.sqrt(n) / math.sqrt(s2), df)
        return two_sided + math.log(2.0) + math.log(max(positive, 1e-300))

    def log_likelihood_ratio(self, effect: float) -> float:
        """log of the likelihood ratio for "the shift is `effect` standard deviations of the noise" against "there
        is none", every other coefficient and the common spread unknown (flat and 1/sigma priors, shared by both).

        Integrating those out leaves the density of the shift's t statistic: noncentral (noncentrality `effect` x
        sqrt(n_eff)) over central, with df degrees of freedom (the sequential t-test's ratio). With the
        noncentrality lam and a = lam t / sqrt(df + t^2) it is exp(-lam^2 / 2) J(a) / J(0), where
        J(a) = integral over v > 0 of v^df exp(-v^2 / 2 + a v) (`_log_j`). A ratio of densities of the readings'
        maximal invariant under shifts and scalings (and a drift, when fitted beside the shift): under "there is
        none" it is a test martingale however the readings arrive, as the mixture in `log_bayes_factor` is."""
        if not self.informative:
            return 0.0
        lam, t, df = effect * math.sqrt(self.n_eff), self.t(), self.df
        return -lam * lam / 2 + _log_j(lam * t / math.sqrt(df + t * t), df) - _log_j(0.0, df)

    def interval(self, level: float) -> tuple[float, float]:
        """The shift and the half-width of its two-sided `level` confidence interval (Student's t)."""
        if not self.informative:
            return self.shift, math.inf
        return self.shift, t_quantile(0.5 + level / 2, self.df) * self.sd / math.sqrt(self.n_eff)


@dataclass(frozen=True)
class Split:
    """Readings before a change (`a`) and from it on (`b`), oriented so that higher is worse."""

    a: Stats
    b: Stats

    @property
    def df(self) -> int:
        return self.a.count + self.b.count - 2

    def contrast(self) -> Contrast:
        """b's mean over a's, the two groups' spread pooled."""
        if not self.a.count or not self.b.count:
            return Contrast(0.0, 0.0, 0.0, 0)
        n = self.a.count * self.b.count / (self.a.count + self.b.count)
        magnitude = max(abs(self.a.mean), abs(self.b.mean))
        return Contrast(self.b.mean - self.a.mean, n, self.a.m2 + self.b.m2, self.df, magnitude)


@dataclass(frozen=True)
class Moments:
    """Sums over readings taken at times t with values y (count, t, y, t^2, t*y, y^2), combinable without them."""

    count: int = 0
    t: float = 0.0
    y: float = 0.0
    tt: float = 0.0
    ty: float = 0.0
    yy: float = 0.0

    @classmethod
    def of(cls, points: Iterable[tuple[float, float]]) -> Moments:
        out = cls()
        for t, y in points:
            out = out + Moments(1, t, y, t * t, t * y, y * y)
        return out

    def __add__(self, o: Moments) -> Moments:
        return Moments(self.count + o.count, self.t + o.t, self.y + o.y, self.tt + o.tt, self.ty + o.ty, self.yy + o.yy)


def drift_of(a: Moments, b: Moments, magnitude: float = 1.0) -> Contrast:
    """The common slope in time of readings split in two levels (a's and b's): its least-squares estimate with
    each level partialled out, in the readings' units per unit of time."""
    if a.count + b.count < 4:
        return Contrast(0.0, 0.0, 0.0, 0)
    stt = sty = syy = 0.0
    for g in (a, b):
        if g.count:
            stt += g.tt - g.t * g.t / g.count
            sty += g.ty - g.t * g.y / g.count
            syy += g.yy - g.y * g.y / g.count
    df = a.count + b.count - 3
    if stt <= 1e-9 * max(1.0, a.tt + b.tt):
        return Contrast(0.0, 0.0, max(syy, 0.0), df, magnitude)
    slope = sty / stt
    return Contrast(slope, stt, max(syy - stt * slope * slope, 0.0), df, magnitude)


def drift_contrast(a: Moments, b: Moments, magnitude: float = 1.0, drift: bool = True) -> Contrast:
    """b's level over a's, with a common linear drift in time fitted beside it (y = mean + shift [in b] + slope t).

    The shift's least-squares estimate with the intercept and the slope partialled out (Frisch-Waugh-Lovell):
    when every reading has the same time there is no slope to fit, and this is the two-sample contrast. Centre
    the times and values near their means before summing: the sums are differences of large squares otherwise."""
    m = a + b
    if not a.count or not b.count:
        return Contrast(0.0, 0.0, 0.0, 0)
    n = m.count
    t_bar, y_bar = m.t / n, m.y / n
    stt = m.tt - n * t_bar * t_bar
    sty = m.ty - n * t_bar * y_bar
    syy = m.yy - n * y_bar * y_bar
    sss = b.count - b.count * b.count / n
    sst = b.t - b.count * t_bar
    ssy = b.y - b.count * y_bar
    df = n - 2
    if drift and stt > 1e-9 * max(1.0, m.tt):
        sss, ssy, syy = sss - sst * sst / stt, ssy - sst * sty / stt, syy - sty * sty / stt
        df -= 1
    if sss <= 1e-9 * b.count:  # the change and time say the same thing: no information on the shift
        return Contrast(0.0, 0.0, max(syy, 0.0), df, magnitude)
    shift = ssy / sss
    return Contrast(shift, sss, max(syy - sss * shift * shift, 0.0), df, magnitude)
