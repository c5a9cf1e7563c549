"""What a noisy metric's readings did that the sampled search's model does not assume (docs/algorithm.md, "Outside
the model"): a drift in time, outliers, heavy tails, two modes. An outcome says it, so that "inconclusive" names the
assumption that failed, and a culprit named through a drift says the drift was fitted."""

from __future__ import annotations

import statistics

from bot.domain.bisect.readings import Readings

DRIFT_T = 3.0  # a drift's t statistic from which it is real (the search plans by the model that fits it)
OUTLIER = 5.0  # a reading this many robust spreads (1.4826 MAD) from its side's level is an outlier
HEAVY = 3.0  # excess kurtosis of the rest above which the spread is heavy-tailed ...
TWO_MODES = -1.0  # ... and below which the readings gather in two clusters (a Gaussian's is 0)
ENOUGH = 50  # readings before their shape is judged (Gaussian ones read "two clusters" 14% of the time at 20, 3% at 40)


def drifting(readings: Readings, c: int) -> bool:
    return abs(readings.drift(c).t()) >= DRIFT_T


def drift_words(readings: Readings, c: int) -> str | None:
    """ "the readings drift -0.052 per round (3.1 spreads over 60 rounds)", when they do."""
    drift = readings.drift(c)
    if abs(drift.t()) < DRIFT_T:
        return None
    slope = drift.shift if readings.higher_is_worse else -drift.shift
    spread = drift.sd
    over = f" ({abs(drift.shift) * readings.span / spread:.1f} spreads over {readings.span:g} rounds)" if spread else ""
    return f"the readings drift {slope:+.3g} per round{over}"


def misfit(readings: Readings, c: int) -> tuple[str, ...]:
    """What the readings did outside the model, with a change at position c: the drift, outliers, the tails."""
    found = [w for w in (drift_words(readings, c),) if w]
    residuals = readings.residuals(c)
    if len(residuals) < ENOUGH:
        return tuple(found)
    centre = statistics.median(residuals)
    scale = 1.4826 * statistics.median(abs(r - centre) for r in residuals)
    if scale <= 0:
        return tuple(found)
    far = [r for r in residuals if abs(r - centre) > OUTLIER * scale]
    if far:
        found.append(f"{len(far)} of {len(residuals)} readings lie over {OUTLIER:g} spreads from their commits' level")
    rest = [r for r in residuals if abs(r - centre) <= OUTLIER * scale]
    mean = statistics.fmean(rest)
    m2 = statistics.fmean((r - mean) ** 2 for r in rest)
    excess = statistics.fmean((r - mean) ** 4 for r in rest) / m2**2 - 3 if m2 > 0 else 0.0
    if excess > HEAVY:
        found.append(f"their spread is heavy-tailed (excess kurtosis {excess:.1f}; a Gaussian's is 0)")
    elif excess < TWO_MODES:
        found.append(f"they gather in two clusters (excess kurtosis {excess:.1f}): two clock states?")
    return tuple(found)
