"""POST /webhooks/github: verify, record, answer at once; the work happens in the worker loop."""

from __future__ import annotations

import json
import logging
from typing import Annotated

from fastapi import APIRouter, Depends, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import OperationalError
from starlette.concurrency import run_in_threadpool

from bot.ingress.webhooks.routes import handler_for
from bot.ingress.webhooks.signature import verify
from bot.observability import bind, count_delivery
from bot.ports import RunEvent
from bot.ports.store import DeliveryLog, Incoming
from bot.settings import BotSettings

router = APIRouter()
log = logging.getLogger("revert_bisect.webhooks")


def get_settings(request: Request) -> BotSettings:
    return request.app.state.settings


def get_deliveries(request: Request) -> DeliveryLog:
    return request.app.state.deliveries


SettingsDep = Annotated[BotSettings, Depends(get_settings)]
DeliveriesDep = Annotated[DeliveryLog, Depends(get_deliveries)]


def _answer(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"message": message, **extra}, status_code=status)


def _outcome(request: Request, event: str, outcome: str, status: int, message: str, **extra) -> JSONResponse:
    """The answer, counted (revert_bisect_webhook_deliveries_total) and logged with the delivery id in context."""
    count_delivery(request.app, event, outcome)
    level = logging.INFO if status < 400 else logging.ERROR if status >= 500 else logging.WARNING
    log.log(
        level,
        "%s delivery %s: %s (%s)",
        event,
        outcome,
        message,
        status,
        extra={"event": event, "outcome": outcome, "status": status},
    )
    return _answer(status, message, **extra)


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
    # The delivery id as claimed (it is only checked below): log lines of refused deliveries carry it too.
    with bind(delivery_id=(request.headers.get("x-github-delivery") or "")[:64] or None):
        return await _receive(request, settings, deliveries)


async def _receive(request: Request, settings: BotSettings, deliveries: DeliveryLog) -> JSONResponse:
    # Until the signature checks out, the event header is anyone's: counted as "unverified".
    body = await _read_body(request, settings.max_body_bytes)
    if body is None:
        return _outcome(request, "unverified", "too_large", 413, f"body larger than {settings.max_body_bytes} bytes")
    if not verify(
        settings.webhook_secret.get_secret_value().encode(), body, request.headers.get("x-hub-signature-256")
    ):
        return _outcome(
            request,
            "unverified",
            "refused_signature",
            401,
            "missing or wrong X-Hub-Signature-256 (check the webhook secret)",
        )
    event = request.headers.get("x-github-event")
    delivery_id = request.headers.get("x-github-delivery")
    if not event or not delivery_id or len(delivery_id) > 64 or len(event) > 64:
        label = event if event and len(event) <= 64 else "invalid"
        return _outcome(request, label, "refused_bad_request", 400, "X-GitHub-Event and X-GitHub-Delivery are required")
    try:
        payload = json.loads(body)
    except (UnicodeDecodeError, ValueError):
        return _outcome(request, event, "refused_bad_request", 400, "the body is not JSON")
    if not isinstance(payload, dict):
        return _outcome(request, event, "refused_bad_request", 400, "the body is not a JSON object")
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    repo = payload.get("repository")
    full_name = repo.get("full_name") if isinstance(repo, dict) and isinstance(repo.get("full_name"), str) else None
    handler = handler_for(event, action)
    try:
        # on a worker thread: a database round trip must not hold up every other request of this replica
        recorded = await run_in_threadpool(
            deliveries.record, Incoming(delivery_id, event, action, full_name, handler, payload)
        )
    except OperationalError:
        # Refused, not lost: GitHub shows the delivery as failed and it can be redelivered.
        return _outcome(request, event, "store_unavailable", 503, "the store is unreachable; redeliver later")
    if event == "ping":
        return _outcome(
            request, event, "duplicate" if recorded.duplicate else "ignored", 200, "pong", zen=payload.get("zen")
        )
    if recorded.duplicate:
        return _outcome(
            request, event, "duplicate", 202, "already received this delivery; nothing to do", delivery=delivery_id
        )
    if (run := run_event(event, payload)) is not None:
        # the backend waiting on that run (if any) polls it now instead of at its next interval
        request.app.state.wake_runs(run)
    if handler is None:
        return _outcome(
            request,
            event,
            "ignored",
            202,
            f"ignored: nothing handles {event}" + (f".{action}" if action else ""),
            delivery=delivery_id,
        )
    with bind(job_id=recorded.job_id):
        return _outcome(
            request, event, "queued", 202, "queued", delivery=delivery_id, job=recorded.job_id, handler=handler
        )


def run_event(event: str, payload: dict) -> RunEvent | None:
    """The run a `workflow_run` or `workflow_job` delivery is about; None for any other event."""
    if event == "workflow_run":
        run = payload.get("workflow_run")
        if isinstance(run, dict):
            run_id = run.get("id")
            title = run.get("display_title")
            return RunEvent(run_id if isinstance(run_id, int) else None, title if isinstance(title, str) else "")
    elif event == "workflow_job":
        job = payload.get("workflow_job")
        if isinstance(job, dict) and isinstance(job.get("run_id"), int):
            return RunEvent(job["run_id"])
    return None
