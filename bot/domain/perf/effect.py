"""A shift's size: the relative change between two segments' means, with a Welch t interval (delta method)."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from bot.domain.bisect.stats import t_quantile  # scipy.special's, not scipy.stats' (0.5 s to import)


@dataclass(frozen=True)
class Effect:
    """`after / before - 1` of the segments' means, and its two-sided interval at `confidence`."""

    effect: float
    low: float
    high: float
    mean_before: float
    mean_after: float


def reaches(low: float, high: float, floor: float) -> bool:
    """Whether the interval [low, high] of a relative effect holds an effect of at least `floor` in size: a shift not
    shown smaller than the smallest worth acting on. A true shift of exactly `floor` has a point estimate under it
    half the time, and its interval reaches it (at 95%) 97.5% of the time; a smaller one is dropped once its
    interval rules `floor` out."""
    return max(abs(low), abs(high)) >= floor


def relative_effect(before: np.ndarray, after: np.ndarray, confidence: float = 0.95) -> Effect | None:
    """The relative change from `before`'s mean to `after`'s, or None when it has no meaning (fewer than two
    readings on a side, or a level before that is not positive: a benchmark reads a time, a rate, a size).

    The interval is Welch's: the ratio's standard error by the delta method, sqrt(v_a + r^2 v_b) / m_b with
    v = s^2 / n of each segment and r = m_a / m_b, and Welch-Satterthwaite's degrees of freedom for the two terms.
    """
    if len(before) < 2 or len(after) < 2:
        return None
    m_b, m_a = float(np.mean(before)), float(np.mean(after))
    if not m_b > 0 or not math.isfinite(m_a):
        return None
    ratio = m_a / m_b
    term_a = float(np.var(after, ddof=1)) / len(after) / m_b**2
    term_b = ratio**2 * float(np.var(before, ddof=1)) / len(before) / m_b**2
    se = math.sqrt(term_a + term_b)
    if se == 0:  # two flat segments at different levels: the shift is exact
        return Effect(ratio - 1, ratio - 1, ratio - 1, m_b, m_a)
    df = (term_a + term_b) ** 2 / (term_a**2 / (len(after) - 1) + term_b**2 / (len(before) - 1))
    half = t_quantile(0.5 + confidence / 2, df) * se
    return Effect(ratio - 1, ratio - 1 - half, ratio - 1 + half, m_b, m_a)
