"""POST /webhooks/github: verify, record, answer at once; the work happens in the worker loop."""

from __future__ import annotations

import json
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError

from bot.settings import BotSettings
from bot.store.deliveries import Deliveries, Incoming
from bot.webhooks.routes import handler_for
from runners.backends.github_actions import wake_all
from bot.webhooks.signature import verify

router = APIRouter()


def get_settings(request: Request) -> BotSettings:
    return request.app.state.settings


def get_deliveries(request: Request) -> Deliveries:
    return request.app.state.deliveries


SettingsDep = Annotated[BotSettings, Depends(get_settings)]
DeliveriesDep = Annotated[Deliveries, Depends(get_deliveries)]


def _answer(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"message": message, **extra}, status_code=status)


async def _read_body(request: Request, limit: int) -> bytes | None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    body = b""
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return body


@router.post("/webhooks/github", status_code=202)
async def github_webhook(request: Request, settings: SettingsDep, deliveries: DeliveriesDep) -> JSONResponse:
    body = await _read_body(request, settings.max_body_bytes)
    if body is None:
        return _answer(413, f"body larger than {settings.max_body_bytes} bytes")
    if not verify(settings.webhook_secret.get_secret_value().encode(), body, request.headers.get("x-hub-signature-256")):
        return _answer(401, "missing or wrong X-Hub-Signature-256 (check the webhook secret)")
    event = request.headers.get("x-github-event")
    delivery_id = request.headers.get("x-github-delivery")
    if not event or not delivery_id or len(delivery_id) > 64 or len(event) > 64:
        return _answer(400, "X-GitHub-Event and X-GitHub-Delivery are required")
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return _answer(400, "the body is not JSON")
    if not isinstance(payload, dict):
        return _answer(400, "the body is not a JSON object")
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    repo = payload.get("repository")
    full_name = repo.get("full_name") if isinstance(repo, dict) and isinstance(repo.get("full_name"), str) else None
    handler = handler_for(event, action)
    try:
        recorded = deliveries.record(Incoming(delivery_id, event, action, full_name, handler, payload))
    except OperationalError:
        # Refused, not lost: GitHub shows the delivery as failed and it can be redelivered.
        return _answer(503, "the store is unreachable; redeliver later")
    if event == "ping":
        return _answer(200, "pong", zen=payload.get("zen"))
    if recorded.duplicate:
        return _answer(202, "already received this delivery; nothing to do", delivery=delivery_id)
    if event in ("workflow_run", "workflow_job"):
        wake_all()  # a step's run may have moved: its backend polls now instead of at its next interval
    if handler is None:
        return _answer(202, f"ignored: nothing handles {event}" + (f".{action}" if action else ""), delivery=delivery_id)
    return _answer(202, "queued", delivery=delivery_id, job=recorded.job_id, handler=handler)
