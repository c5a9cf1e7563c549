"""The running test's own limit (pytest-timeout's, `timeout` in pyproject.toml or @pytest.mark.timeout), kept so a
wait inside the test ends before the limit kills it, and says what it waited for (tests/conftest.py sets it)."""

from __future__ import annotations

import time

MARGIN_S = 20.0  # what a wait leaves of the test's limit to report the bisection's state and its log
_deadline: float | None = None


def start(limit_s: float | None) -> None:
    """The test begins (its fixtures included): a wait may last until `limit_s` less the margin from now."""
    global _deadline
    _deadline = time.monotonic() + max(1.0, limit_s - MARGIN_S) if limit_s else None


def bounded(timeout: float) -> tuple[float, bool]:
    """`timeout`, or what is left before the test's limit when that is less; and whether the limit bounds it."""
    if _deadline is None:
        return timeout, False
    left = max(0.0, _deadline - time.monotonic())
    return (left, True) if left < timeout else (timeout, False)
