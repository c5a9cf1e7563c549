"""Logs with context, Prometheus metrics, readiness. Importing this package stays cheap (no
prometheus_client, no FastAPI): `observe` loads the rest when an app is built."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from bot.observability.logs import bind, carry, current, redact, register_secret, setup_logging

if TYPE_CHECKING:
    from fastapi import FastAPI
    from sqlalchemy import Engine

    from bot.settings import BotSettings

__all__ = ["bind", "carry", "count_delivery", "current", "observe", "redact", "register_secret", "setup_logging"]


def observe(app: FastAPI, engine: Engine, settings: BotSettings) -> Any:
    """Add /readyz and /metrics to `app`, its metrics registry (app.state.metrics), logging and redactions."""
    from bot.observability.service import observe as _observe

    return _observe(app, engine, settings)


def count_delivery(app: Any, event: str, outcome: str) -> None:
    """One webhook delivery's outcome, in the app's metrics (nothing when the app has none)."""
    metrics = getattr(app.state, "metrics", None)
    if metrics is not None:
        metrics.delivery(event, outcome)
