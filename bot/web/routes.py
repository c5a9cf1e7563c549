"""The dashboard's pages (server-rendered), their live-update stream, and the JSON API with the same data."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from urllib.parse import parse_qs, urlencode

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Query, Request
from fastapi.responses import HTMLResponse, RedirectResponse, StreamingResponse
from jinja2 import Environment, PackageLoader, select_autoescape
from pydantic import BaseModel
from starlette.concurrency import run_in_threadpool

from bot.domain import trust
from bot.domain.bisect.model import Status
from bot.ports import CloneReads
from bot.ports.store import PHASES, DashboardReads, FlakeCounts, HoldLog, ParkedJobs
from bot.service.describe import aware
from bot.web import auth
from bot.web.chart import render_svg
from bot.web.detail import collapse_untested, detail
from bot.web.models import BisectionDetail, BisectionPage, BisectionSummary
from bot.web.trust_views import TrustReportView, trust_view
from bot.web.views import matches, summary, version_text

PER_PAGE = 50
EVENT_INTERVAL_S = 1.0
EVENT_STREAM_MAX_S = 6 * 3600  # a browser left open reconnects after this; nothing streams forever
# After a bisection ends the bot still writes to it (the revert PR and its body, a refusal): an open page follows
# until the row has been quiet this long.
EVENT_SETTLE_S = 120.0
STATES = ["running", *PHASES, *(s.value for s in Status)]

_templates = Environment(
    loader=PackageLoader("bot.web", "templates"),
    autoescape=select_autoescape(["j2", "html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)


class Detail(BaseModel):
    detail: str


ERRORS = {
    401: {"model": Detail, "description": "not on loopback and no valid token"},
    403: {"model": Detail, "description": "not on loopback and no dashboard token configured"},
}


def page_of(
    store: DashboardReads,
    now: datetime,
    repository: str | None,
    state: str | None,
    test: str | None,
    page: int,
    per_page: int = PER_PAGE,
) -> tuple[list[BisectionSummary], bool]:
    """A page of summaries, newest first, and whether there is a next one."""
    rows = store.newest(
        state, lambda r: matches(summary(r, now), repository, None, test), (page - 1) * per_page, per_page + 1
    )
    items = [summary(r, now) for r in rows]
    return items[:per_page], len(items) > per_page


def version_of(store: DashboardReads, bisection_id: int, now: datetime, settle_s: float) -> tuple[str, bool] | None:
    """(version_text, settled: finished and unwritten for settle_s): what the live update polls every second."""
    p = store.progress(bisection_id)
    if p is None:
        return None
    quiet = (now - aware(p.updated_at)).total_seconds() if p.updated_at else settle_s
    return version_text(
        p.finished, p.steps, p.phase, p.status, p.updated_at
    ), p.status is not None and quiet >= settle_s


def trust_report(request: Request) -> trust.TrustReport:
    rows = _store(request).finished()
    clones = request.app.state.relanded
    reverts = clones.reverts(trust.ranges(rows))
    return trust.build(rows, clones(trust.revert_bases(rows, reverts)), reverts)


def _store(request: Request) -> DashboardReads:
    return request.app.state.dashboard


def _now() -> datetime:
    return datetime.now(UTC)


def _age(when: datetime | None) -> str:
    if when is None:
        return "-"
    seconds = max(0, int((_now() - aware(when)).total_seconds()))
    return f"{seconds // 60} min {seconds % 60} s" if seconds >= 60 else f"{seconds} s"


def _clean(value: str | None) -> str | None:
    value = (value or "").strip()
    return value or None


pages = APIRouter(dependencies=[Depends(auth.require_access)], include_in_schema=False)
api = APIRouter(prefix="/api", tags=["dashboard"], dependencies=[Depends(auth.require_access)], responses=ERRORS)
login = APIRouter(include_in_schema=False)


def _html(name: str, status_code: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(_templates.get_template(name).render(**context), status_code=status_code)


@pages.get("/", response_class=HTMLResponse)
def list_page(
    request: Request,
    repository: str | None = None,
    state: str | None = None,
    test: str | None = None,
    page: int = Query(1, ge=1),
) -> HTMLResponse:
    repository, state, test = _clean(repository), _clean(state), _clean(test)
    items, has_next = page_of(_store(request), _now(), repository, state, test, page)
    filters = {k: v for k, v in (("repository", repository), ("state", state), ("test", test)) if v}
    parked_total, parked = request.app.state.queue.parked()
    return _html(
        "list.html.j2",
        parked_total=parked_total,
        parked=[(job, _age(job.parked_at)) for job in parked],
        items=items,
        has_next=has_next,
        page=page,
        filters=filters,
        qs=urlencode(filters),
        states=STATES,
        repository=repository or "",
        state=state or "",
        test=test or "",
    )


@pages.get("/trust", response_class=HTMLResponse)
def trust_page(request: Request) -> HTMLResponse:
    state = request.app.state
    return _html("trust.html.j2", t=trust_view(trust_report(request), state.holds.recent(), state.flakes.per_test()))


@pages.get("/bisections/{bisection_id}", response_class=HTMLResponse)
def detail_page(request: Request, bisection_id: int) -> HTMLResponse:
    row = _store(request).get(bisection_id)
    if row is None:
        return _html("not_found.html.j2", status_code=404, bisection_id=bisection_id)
    view = detail(row, _now())
    labels = {e.position: f"#{e.position} {e.sha[:12]}" for e in view.timeline}
    return _html(
        "detail.html.j2",
        d=view,
        s=view.summary,
        chart_svg=render_svg(view.chart, labels),
        timeline_rows=collapse_untested(view.timeline),
    )


@pages.get("/bisections/{bisection_id}/events")
async def events(request: Request, bisection_id: int) -> StreamingResponse:
    """Server-sent events: `version` every second while the bisection runs (and until what the bot records after
    it has settled), then `done`."""
    store = _store(request)
    first = await run_in_threadpool(version_of, store, bisection_id, _now(), EVENT_SETTLE_S)
    if first is None:
        raise HTTPException(404, f"no bisection #{bisection_id}")

    async def stream():
        yield "retry: 2000\n\n"
        loop = asyncio.get_running_loop()
        start, now = loop.time(), first
        while loop.time() - start < EVENT_STREAM_MAX_S:
            if now is None:
                return
            text, settled = now
            if settled:
                yield f"event: done\ndata: {text}\n\n"
                return
            yield f"event: version\ndata: {text}\n\n"
            await asyncio.sleep(EVENT_INTERVAL_S)
            if await request.is_disconnected():
                return
            now = await run_in_threadpool(version_of, store, bisection_id, _now(), EVENT_SETTLE_S)

    return StreamingResponse(
        stream(), media_type="text/event-stream", headers={"Cache-Control": "no-cache", "X-Accel-Buffering": "no"}
    )


def _login(request: Request, token: str) -> RedirectResponse:
    configured = auth.configured_token(request)
    if configured is None:
        if auth.is_loopback(request.client.host if request.client else None):
            return RedirectResponse("/", status_code=303)
        raise HTTPException(403, auth.NOT_CONFIGURED)
    if not auth.token_matches(token, configured):
        raise HTTPException(401, auth.NEEDS_TOKEN)
    response = RedirectResponse("/", status_code=303)
    response.set_cookie(
        auth.COOKIE,
        auth.cookie_value(configured),
        httponly=True,
        samesite="strict",
        secure=request.url.scheme == "https",
        max_age=30 * 86400,
    )
    return response


@login.get("/login", response_model=None)
def login_with_token(request: Request, token: str = "") -> RedirectResponse | HTMLResponse:
    """`?token=` sets the session cookie (an HMAC of the token) and goes to the list; without it, a form
    that POSTs the token (so it stays out of access logs and browser history)."""
    if not token:
        return _html("login.html.j2")
    return _login(request, token)


@login.post("/login")
async def login_with_form(request: Request) -> RedirectResponse:
    fields = parse_qs((await request.body()).decode("utf-8", "replace"))
    return _login(request, (fields.get("token") or [""])[0])


@api.get("/bisections", response_model=BisectionPage)
def api_list(
    request: Request,
    repository: str | None = None,
    state: str | None = None,
    test: str | None = None,
    page: int = Query(1, ge=1),
    per_page: int = Query(PER_PAGE, ge=1, le=200),
) -> BisectionPage:
    items, has_next = page_of(_store(request), _now(), _clean(repository), _clean(state), _clean(test), page, per_page)
    return BisectionPage(items=items, page=page, per_page=per_page, has_next=has_next)


@api.get(
    "/bisections/{bisection_id}",
    response_model=BisectionDetail,
    responses={404: {"model": Detail, "description": "no such bisection"}},
)
def api_detail(request: Request, bisection_id: int) -> BisectionDetail:
    row = _store(request).get(bisection_id)
    if row is None:
        raise HTTPException(404, f"no bisection #{bisection_id}")
    return detail(row, _now())


@api.get("/trust", response_model=TrustReportView)
def api_trust(request: Request) -> TrustReportView:
    """Per repository: reverts opened and how many were re-landed unchanged (false positives), culprits confirmed
    against inconclusive bisections, reverts the guards refused, by reason, and what the kill switch held back."""
    return trust_view(trust_report(request), request.app.state.holds.recent(), request.app.state.flakes.per_test())


def install(
    app: FastAPI,
    dashboard: DashboardReads,
    queue: ParkedJobs,
    holds: HoldLog,
    flakes: FlakeCounts,
    relanded: CloneReads,
) -> None:
    """Mount the dashboard (/, /bisections/..., /trust), /login and the JSON API on the app, reading the store
    through its ports (bot.ports.store; the app factory passes bot.adapters.store's) and whether reverted culprits
    were re-landed through `relanded` (the app factory passes bot.adapters.git.relanded's, over the bot's clones).

    The JSON API is /api/bisections and /api/trust.
    """
    app.state.dashboard = dashboard
    app.state.queue = queue  # jobs parked while GitHub does not answer, shown above the list
    app.state.holds = holds
    app.state.flakes = flakes
    app.state.relanded = relanded
    app.include_router(login)
    app.include_router(pages)
    app.include_router(api)
