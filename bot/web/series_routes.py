"""The benchmarks' series on the dashboard: `/series` (the watched metrics), `/series/<owner>/<name>/<test>/<metric>`
(one metric: its chart, change points and bisections), and their JSON twins under `/api/series`."""

from __future__ import annotations

from collections.abc import Mapping

from fastapi import APIRouter, Depends, FastAPI, HTTPException, Request
from fastapi.responses import HTMLResponse
from jinja2 import Environment, PackageLoader, select_autoescape

from bot.domain.perf.address import unsegment
from bot.domain.repo_policies import RepoPolicies
from bot.ports.store import SeriesBisections, SeriesLog
from bot.web import auth
from bot.web.routes import ERRORS, Detail
from bot.web.series_chart import render_series_svg
from bot.web.series_views import SeriesDetail, SeriesIndex, declared, detail, summary

_templates = Environment(
    loader=PackageLoader("bot.web", "templates"),
    autoescape=select_autoescape(["j2", "html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)

pages = APIRouter(dependencies=[Depends(auth.require_access)], include_in_schema=False)
api = APIRouter(prefix="/api", tags=["series"], dependencies=[Depends(auth.require_access)], responses=ERRORS)


def _html(name: str, status_code: int = 200, **context) -> HTMLResponse:
    return HTMLResponse(_templates.get_template(name).render(**context), status_code=status_code)


def _series(request: Request) -> SeriesLog:
    return request.app.state.series


def _policies(request: Request) -> Mapping[str, RepoPolicies]:
    return request.app.state.series_policies


def index_of(request: Request) -> SeriesIndex:
    store, policies = _series(request), _policies(request)
    return SeriesIndex(
        items=[summary(r, t, m, store.series(r, t, m), declared(policies, r, t, m)) for r, t, m in store.watched()]
    )


def detail_of(request: Request, owner: str, name: str, test: str, metric: str) -> SeriesDetail | None:
    """The metric's page, or None when no series of that name is kept."""
    repository, test, metric = f"{owner}/{name}", unsegment(test), unsegment(metric)
    store, policies = _series(request), _policies(request)
    triples = store.watched()
    if (repository, test, metric) not in triples:
        return None
    names = [m for r, t, m in triples if (r, t) == (repository, test)]
    series = {m: store.series(repository, test, m) for m in names}
    specs = {m: declared(policies, repository, test, m) for m in names}
    origins: SeriesBisections = request.app.state.series_bisections
    return detail(repository, test, metric, series, specs, origins.of_series(repository, test, metric))


@pages.get("/series", response_class=HTMLResponse)
def index_page(request: Request) -> HTMLResponse:
    return _html("series_index.html.j2", index=index_of(request))


@pages.get("/series/{owner}/{name}/{test}/{metric}", response_class=HTMLResponse)
def series_page(request: Request, owner: str, name: str, test: str, metric: str) -> HTMLResponse:
    view = detail_of(request, owner, name, test, metric)
    if view is None:
        what = f"{owner}/{name} {unsegment(test)} {unsegment(metric)}"
        return _html("series_missing.html.j2", status_code=404, what=what)
    return _html("series.html.j2", d=view, chart_svg=render_series_svg(view))


@api.get("/series", response_model=SeriesIndex)
def api_index(request: Request) -> SeriesIndex:
    """Every watched benchmark metric with runs read: its runs, readings and newest reading, and where its series
    is."""
    return index_of(request)


@api.get(
    "/series/{owner}/{name}/{test}/{metric}",
    response_model=SeriesDetail,
    responses={404: {"model": Detail, "description": "no series of that repository, test and metric is kept"}},
)
def api_series(request: Request, owner: str, name: str, test: str, metric: str) -> SeriesDetail:
    """One metric's runs (oldest first; a run without a reading has value null), its change points with the effect,
    its interval and each side's mean and interval, and the bisections they led to. A `/` in a test id or a metric
    name is written `~`."""
    view = detail_of(request, owner, name, test, metric)
    if view is None:
        raise HTTPException(404, f"no series {unsegment(metric)} of {unsegment(test)} in {owner}/{name}")
    return view


def install(
    app: FastAPI, series: SeriesLog, bisections: SeriesBisections, policies: Mapping[str, RepoPolicies]
) -> None:
    """Mount the series' pages and API, reading the points and the bisections through their ports, and which way
    each metric is worse (and its smallest effect) from the loaded `policies`."""
    app.state.series = series
    app.state.series_bisections = bisections
    app.state.series_policies = policies
    app.include_router(pages)
    app.include_router(api)
