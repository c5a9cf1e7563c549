"""The observability of one app: /readyz, /metrics, the delivery counter, logging and its redactions."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, FastAPI, Request, Response
from fastapi.responses import JSONResponse
from sqlalchemy import Engine

from bot.observability.logs import ensure_logging, register_secret
from bot.observability.metrics import Metrics
from bot.observability.ready import check, policy_status
from bot.settings import BotSettings

router = APIRouter()


@dataclass
class Observability:
    engine: Engine
    metrics: Metrics
    policies: dict[str, Any]


def register_settings_secrets(settings: BotSettings) -> None:
    register_secret(settings.webhook_secret.get_secret_value())
    register_secret(settings.github_token.get_secret_value())
    key = settings.github_app_private_key
    if key is not None:
        try:
            register_secret(key.read_text())
        except OSError:
            pass  # unreadable: the app fails at start-up, naming the file


def observe(app: FastAPI, engine: Engine, settings: BotSettings) -> Observability:
    register_settings_secrets(settings)
    ensure_logging()
    obs = Observability(engine, Metrics(engine, settings.github_url), policy_status(settings.policies))
    app.state.observability = obs
    app.state.metrics = obs.metrics
    app.include_router(router)
    return obs


@router.get("/readyz")
def readyz(request: Request) -> JSONResponse:
    """200 when the store answers at the expected schema and the policies loaded; else 503 naming what failed."""
    obs: Observability = request.app.state.observability
    ready, body = check(obs.engine, obs.policies)
    return JSONResponse(body, status_code=200 if ready else 503)


@router.get("/metrics")
def metrics(request: Request) -> Response:
    """Prometheus text format."""
    body, content_type = request.app.state.observability.metrics.render()
    return Response(body, media_type=content_type)
