"""POST /webhooks/github: verify, record, answer at once; the work happens in the worker loop."""

from __future__ import annotations

import json
import logging

from fastapi import APIRouter, Request
from fastapi.responses import JSONResponse
from sqlalchemy.exc import SQLAlchemyError

from bot.ingress.webhooks.routes import handler_for
from bot.ingress.webhooks.signature import verify
from bot.observability import bind, count_delivery
from bot.ports import RunEvent
from bot.ports.store import DeliveryRecorder, Incoming
from bot.settings import BotSettings

router = APIRouter()
log = logging.getLogger("revert_bisect.webhooks")


def _answer(status: int, message: str, **extra) -> JSONResponse:
    return JSONResponse({"message": message, **extra}, status_code=status)


def _accepted(request: Request, event: str, outcome: str, status: int, message: str, **extra) -> JSONResponse:
    """An acknowledgement: counted (revert_bisect_webhook_deliveries_total), not logged -- the request path does
    nothing it does not need; the worker logs each job it runs with its delivery id."""
    count_delivery(request.app, event, outcome)
    return _answer(status, message, **extra)


def _refused(request: Request, event: str, outcome: str, status: int, message: str) -> JSONResponse:
    """A refusal: counted and logged with the delivery id in context."""
    count_delivery(request.app, event, outcome)
    level = logging.ERROR if status >= 500 else logging.WARNING
    log.log(
        level,
        "%s delivery %s: %s (%s)",
        event,
        outcome,
        message,
        status,
        extra={"event": event, "outcome": outcome, "status": status},
    )
    return _answer(status, message)


async def _read_body(request: Request, limit: int) -> bytes | None:
    declared = request.headers.get("content-length")
    if declared and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            return None
    return bytes(body)


@router.post("/webhooks/github", status_code=202)
async def github_webhook(request: Request) -> JSONResponse:
    """Verify the signature, store the delivery (and its job) unless its id is known, answer 202: nothing else."""
    # The delivery id as claimed (it is only checked below): log lines of refused deliveries carry it too.
    with bind(delivery_id=(request.headers.get("x-github-delivery") or "")[:64] or None):
        return await _receive(request, request.app.state.settings, request.app.state.deliveries)


async def _receive(request: Request, settings: BotSettings, deliveries: DeliveryRecorder) -> JSONResponse:
    # Until the signature checks out, the event header is anyone's: counted as "unverified".
    body = await _read_body(request, settings.max_body_bytes)
    if body is None:
        return _refused(request, "unverified", "too_large", 413, f"body larger than {settings.max_body_bytes} bytes")
    if not verify(
        settings.webhook_secret.get_secret_value().encode(), body, request.headers.get("x-hub-signature-256")
    ):
        return _refused(
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
        return _refused(request, label, "refused_bad_request", 400, "X-GitHub-Event and X-GitHub-Delivery are required")
    try:
        text = body.decode()
        payload = json.loads(text, parse_constant=_not_json)  # NaN, Infinity: Python's, not JSON (nor the store's)
    except (UnicodeDecodeError, ValueError):
        return _refused(request, event, "refused_bad_request", 400, "the body is not JSON")
    if not isinstance(payload, dict):
        return _refused(request, event, "refused_bad_request", 400, "the body is not a JSON object")
    action = payload.get("action") if isinstance(payload.get("action"), str) else None
    if action is not None and len(action) > 64:
        return _refused(request, event, "refused_bad_request", 400, "the payload's action is longer than 64")
    repo = payload.get("repository")
    full_name = repo.get("full_name") if isinstance(repo, dict) and isinstance(repo.get("full_name"), str) else None
    if full_name is not None and len(full_name) > 255:
        full_name = None  # not a repository GitHub would name; nothing routes by it
    handler = handler_for(event, action)
    try:
        # the recorder's thread stores it (batched with others) and this awaits the commit: no 202 before
        recorded = await deliveries.record(Incoming(delivery_id, event, action, full_name, handler, payload, text))
    except SQLAlchemyError:
        # Refused, not lost: GitHub shows the delivery as failed and it can be redelivered.
        return _refused(request, event, "store_unavailable", 503, "the store is unreachable; redeliver later")
    if event == "ping":
        return _accepted(
            request, event, "duplicate" if recorded.duplicate else "ignored", 200, "pong", zen=payload.get("zen")
        )
    if recorded.duplicate:
        return _accepted(
            request, event, "duplicate", 202, "already received this delivery; nothing to do", delivery=delivery_id
        )
    if (run := run_event(event, payload)) is not None:
        # the backend waiting on that run (if any) polls it now instead of at its next interval
        request.app.state.wake_runs(run)
    if handler is None:
        return _accepted(
            request,
            event,
            "ignored",
            202,
            f"ignored: nothing handles {event}" + (f".{action}" if action else ""),
            delivery=delivery_id,
        )
    return _accepted(
        request, event, "queued", 202, "queued", delivery=delivery_id, job=recorded.job_id, handler=handler
    )


def _not_json(name: str) -> None:
    raise ValueError(f"{name} is not JSON")


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
