"""The benchmarks' series as the dashboard and the JSON API give them: the index of watched metrics, and one metric's
runs, its change points (bot.domain.perf.changes, the test's metrics tested together: bot.domain.perf.per_metric)
with each side's mean and interval (bot.domain.perf.bands), and the bisection each change point led to.

A page's address: `/series/<owner>/<name>/<test>/<metric>`, a `/` inside a test id or a metric name written `~`
(bot.domain.perf.address).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime
from functools import lru_cache

from pydantic import BaseModel, Field

from bot.domain.perf.address import series_path
from bot.domain.perf.bands import Side, sides
from bot.domain.perf.changes import Change, ChangeSettings
from bot.domain.perf.changes import Direction as Way
from bot.domain.perf.per_metric import changes
from bot.domain.perf.readings import series_of
from bot.domain.perf.recovery import recovery
from bot.domain.policy import Direction, Series
from bot.domain.repo_policies import RepoPolicies
from bot.ports.store import SeriesBisection, SeriesPoint

SETTINGS = ChangeSettings()  # the false-alarm rate and interval the page states; a metric's floor is its policy's
# The newest runs searched for change points (all runs are drawn): 100 of SGLang's every-other-day nightlies are
# 200 days, searched in about half a second for a test's 8 metrics; every run searched would take 3.3 s at 200 runs and
# 13.6 s at 400 (bench/series_bench.py, docs/benchmarks.md)
WINDOW = 100


class SeriesRef(BaseModel):
    repository: str
    test: str
    metric: str
    page: str = Field(description="the metric's page on the dashboard")
    api: str = Field(description="the metric's series in this API")


def ref(repository: str, test: str, metric: str) -> SeriesRef:
    path = series_path(repository, test, metric)
    return SeriesRef(repository=repository, test=test, metric=metric, page=path, api="/api" + path)


class SeriesSummary(SeriesRef):
    direction: str | None = Field(
        None, description="lower_is_worse or higher_is_worse, as the policy says; None: no policy loaded declares it"
    )
    runs: int = Field(description="runs read")
    readings: int = Field(description="runs that reported the metric")
    last_value: float | None = Field(None, description="the newest run's reading (None: it reported none)")
    last_run: int | None = None
    last_started_at: datetime | None = None


class SeriesIndex(BaseModel):
    items: list[SeriesSummary]


class RunPoint(BaseModel):
    run_id: int
    run_attempt: int = Field(description="the attempt read: a re-run attempt's reading replaces the older one's")
    sha: str
    started_at: datetime = Field(description="when the run was created: the series' order")
    value: float | None = Field(description="None: the run reported no reading (a crash, a skipped batch size)")
    url: str = ""


class Band(BaseModel):
    """One side of a change point: its readings' mean and the interval of that mean."""

    first: int = Field(description="its first run's position in `points`")
    last: int = Field(description="its last run's position in `points`")
    first_run: int
    last_run: int
    runs: int = Field(description="readings on this side")
    mean: float
    low: float
    high: float


class BisectionLink(BaseModel):
    id: int
    status: str | None = Field(None, description="None while it runs")
    phase: str
    page: str


class ChangeView(BaseModel):
    index: int = Field(description="the first run after the shift: its position in `points`")
    run_before: int = Field(description="the last run before the shift")
    run_after: int = Field(description="the first run after it")
    url_before: str = ""
    url_after: str = ""
    sha_before: str
    sha_after: str
    effect: float = Field(description="mean after / mean before - 1")
    low: float = Field(description="the effect's interval at `confidence`")
    high: float
    effect_text: str = Field(description='e.g. "-4.1% (-5.0% to -3.2%)"')
    p_value: float
    level: float = Field(description="the level this metric was tested at: false_alarm_rate / metrics tested")
    regression: bool | None = Field(
        description="the effect goes the metric's worse way; None: no policy loaded says which way that is"
    )
    before: Band
    after: Band
    bisections: list[BisectionLink] = Field(
        description="the bisections started from this change point: those whose range (the runs of their GOOD and "
        "BAD, in their origin's `series`) holds its runs, also when a later night placed it a run or more away"
    )
    recovered_at: int | None = Field(
        None,
        description="a slowdown that a later change point brought back within `min_effect` of its level before (or "
        "better): that change point's first run after. A recovered slowdown is reported, never bisected",
    )


class SeriesDetail(SeriesRef):
    direction: str | None = None
    min_effect: float = Field(description="the smallest effect reported (the policy's `min_effect`, else the default)")
    false_alarm_rate: float = Field(description="per night, all the test's metrics together")
    confidence: float = Field(description="of the effects' and the bands' intervals")
    metrics_tested: int = Field(description="the test's metrics tested together (each at false_alarm_rate / this)")
    searched_from: int = Field(description="the first run searched for change points: its position in `points`")
    points: list[RunPoint] = Field(description="every run read, oldest first")
    changes: list[ChangeView]


def declared(policies: Mapping[str, RepoPolicies], repository: str, test: str, metric: str) -> Series | None:
    """The metric as a loaded policy declares it, if one does."""
    found = policies.get(repository)
    policy = found.for_test(test) if found is not None else None
    spec = policy.test(test) if policy is not None else None
    if policy is None or spec is None:
        return None
    return next((s for s in series_of(policy, spec) if s.name == metric), None)


def _way(spec: Series | None) -> Way:
    return "lower" if spec is not None and spec.direction is Direction.LOWER_IS_WORSE else "higher"


def summary(
    repository: str, test: str, metric: str, points: Sequence[SeriesPoint], spec: Series | None
) -> SeriesSummary:
    last = points[-1] if points else None
    return SeriesSummary(
        **ref(repository, test, metric).model_dump(),
        direction=spec.direction.value if spec is not None else None,
        runs=len(points),
        readings=sum(p.value is not None for p in points),
        last_value=last.value if last else None,
        last_run=last.run_id if last else None,
        last_started_at=last.started_at if last else None,
    )


def pct(value: float) -> str:
    return f"{value * 100:+.1f}%"


def _band(side: Side, points: Sequence[SeriesPoint]) -> Band:
    return Band(
        first=side.first,
        last=side.last,
        first_run=points[side.first].run_id,
        last_run=points[side.last].run_id,
        runs=side.runs,
        mean=side.mean,
        low=side.low,
        high=side.high,
    )


def _runs(series: Mapping[str, Sequence[SeriesPoint]]) -> list[SeriesPoint]:
    """One point per run across the test's metrics (its newest attempt), in the series' order."""
    runs: dict[int, SeriesPoint] = {}
    for points in series.values():
        for p in points:
            if p.run_id not in runs or p.run_attempt > runs[p.run_id].run_attempt:
                runs[p.run_id] = p
    return sorted(runs.values(), key=lambda p: (p.started_at, p.run_id))


@lru_cache(maxsize=64)
def _changes(
    shas: tuple[str, ...],
    metrics: tuple[tuple[str, tuple[float | None, ...]], ...],
    directions: tuple[tuple[str, Way], ...],
    min_effects: tuple[tuple[str, float | None], ...],
    settings: ChangeSettings,
) -> tuple[Change, ...]:
    """The test's change points, kept for the same series (a page viewed again, its API twin): the search over a few
    hundred runs takes seconds."""
    return tuple(changes(shas, dict(metrics), dict(directions), dict(min_effects), settings))


def detail(
    repository: str,
    test: str,
    metric: str,
    series: Mapping[str, Sequence[SeriesPoint]],
    specs: Mapping[str, Series | None],
    bisections: Sequence[SeriesBisection],
    settings: ChangeSettings = SETTINGS,
) -> SeriesDetail:
    """`metric`'s page: `series` holds every metric of the test (tested together), `specs` each one's declaration."""
    runs = _runs(series)
    at = {p.run_id: k for k, p in enumerate(runs)}
    values: dict[str, list[float | None]] = {name: [None] * len(runs) for name in series}
    for name, points in series.items():
        for p in points:
            values[name][at[p.run_id]] = p.value
    start = max(0, len(runs) - WINDOW)
    found = _changes(
        tuple(p.sha for p in runs[start:]),
        tuple((name, tuple(v[start:])) for name, v in sorted(values.items())),
        tuple((name, _way(specs.get(name))) for name in sorted(series)),
        tuple((name, spec.min_effect if spec is not None else None) for name, spec in sorted(specs.items())),
        settings,
    )
    spec = specs.get(metric)
    own = {p.run_id: p for p in series[metric]}
    points = [
        own.get(r.run_id)
        or SeriesPoint(repository, test, metric, r.run_id, r.run_attempt, r.sha, r.started_at, None, r.url)
        for r in runs
    ]
    views = []
    floor = spec.min_effect if spec is not None and spec.min_effect is not None else settings.min_effect
    own_changes = [c for c in found if c.metric == metric]
    ranges = [(b, at.get(b.run_good), at.get(b.run_bad)) for b in bisections]
    for change in own_changes:
        undone = recovery(change, own_changes, floor) if spec is not None and change.regression else None
        before, after = (
            replace(side, first=side.first + start, last=side.last + start)
            for side in sides(values[metric][start:], change, settings.confidence)
        )
        change = replace(change, index=change.index + start, before=change.before + start)
        run_before, run_after = runs[change.before].run_id, runs[change.index].run_id
        views.append(
            ChangeView(
                index=change.index,
                run_before=run_before,
                run_after=run_after,
                url_before=runs[change.before].url,
                url_after=runs[change.index].url,
                sha_before=change.sha_before,
                sha_after=change.sha_after,
                effect=change.effect,
                low=change.low,
                high=change.high,
                effect_text=f"{pct(change.effect)} ({pct(change.low)} to {pct(change.high)})",
                p_value=change.p_value,
                level=change.level,
                regression=change.regression if spec is not None else None,
                before=_band(before, points),
                after=_band(after, points),
                bisections=[
                    BisectionLink(id=b.id, status=b.status, phase=b.phase, page=f"/bisections/{b.id}")
                    for b, good, bad in ranges
                    if (b.run_before, b.run_after) == (run_before, run_after)
                    or (good is not None and bad is not None and good <= change.before and change.index <= bad)
                ],
                recovered_at=runs[undone.index + start].run_id if undone is not None else None,
            )
        )
    return SeriesDetail(
        **ref(repository, test, metric).model_dump(),
        direction=spec.direction.value if spec is not None else None,
        min_effect=spec.min_effect if spec is not None and spec.min_effect is not None else settings.min_effect,
        false_alarm_rate=settings.false_alarm_rate,
        confidence=settings.confidence,
        metrics_tested=len(series),
        searched_from=start,
        points=[
            RunPoint(
                run_id=p.run_id,
                run_attempt=p.run_attempt,
                sha=p.sha,
                started_at=p.started_at,
                value=p.value,
                url=p.url,
            )
            for p in points
        ],
        changes=views,
    )
