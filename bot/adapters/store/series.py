"""The benchmarks' series (bot.adapters.store.models.SeriesPointRow): one point per (repository, test, metric, run),
the newest attempt's reading kept; and the bisections started from a series' change point (their origin's
`series`)."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from bot.adapters.store.models import BisectionRow, SeriesPointRow
from bot.domain.trust import repository_of
from bot.ports.store import SeriesBisection, SeriesPoint

FIELDS = ("run_attempt", "sha", "started_at", "value", "url")


def _aware(when: datetime) -> datetime:
    """SQLite gives back naive datetimes: they were written in UTC."""
    return when if when.tzinfo is not None else when.replace(tzinfo=UTC)


def _point(row: SeriesPointRow) -> SeriesPoint:
    return SeriesPoint(
        row.repository,
        row.test,
        row.metric,
        row.run_id,
        row.run_attempt,
        row.sha,
        _aware(row.started_at),
        row.value,
        row.url or "",
    )


class SeriesPoints:
    """bot.ports.store.SeriesLog over SQLAlchemy."""

    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def record(self, points: Iterable[SeriesPoint]) -> int:
        """A point replaces the stored one of its (repository, test, metric, run) when its attempt is as new or newer;
        the number written. Another replica inserting the same point first: the whole batch is tried once more."""
        batch = list(points)
        try:
            return self._record(batch)
        except IntegrityError:
            return self._record(batch)

    def _record(self, points: list[SeriesPoint]) -> int:
        written = 0
        with self._session.begin() as s:
            for p in points:
                row = s.scalar(
                    select(SeriesPointRow).where(
                        SeriesPointRow.repository == p.repository,
                        SeriesPointRow.test == p.test,
                        SeriesPointRow.metric == p.metric,
                        SeriesPointRow.run_id == p.run_id,
                    )
                )
                if row is None:
                    s.add(SeriesPointRow(**{**p.__dict__, "url": p.url or None}))
                    s.flush()  # a duplicate in the same batch is found by the next select
                elif row.run_attempt <= p.run_attempt:
                    for name in FIELDS:
                        setattr(row, name, getattr(p, name) if name != "url" else p.url or None)
                else:
                    continue  # an older attempt's reading never replaces a newer one's
                written += 1
        return written

    def series(self, repository: str, test: str, metric: str) -> list[SeriesPoint]:
        with self._session() as s:
            rows = s.scalars(
                select(SeriesPointRow)
                .where(
                    SeriesPointRow.repository == repository,
                    SeriesPointRow.test == test,
                    SeriesPointRow.metric == metric,
                )
                .order_by(SeriesPointRow.started_at, SeriesPointRow.run_id)
            )
            return [_point(r) for r in rows]

    def watched(self) -> list[tuple[str, str, str]]:
        with self._session() as s:
            rows = s.execute(
                select(SeriesPointRow.repository, SeriesPointRow.test, SeriesPointRow.metric).distinct()
            ).all()
        return sorted((r, t, m) for r, t, m in rows)

    def runs_read(self, repository: str, test: str, metric: str) -> dict[int, int]:
        with self._session() as s:
            rows = s.execute(
                select(SeriesPointRow.run_id, SeriesPointRow.run_attempt).where(
                    SeriesPointRow.repository == repository,
                    SeriesPointRow.test == test,
                    SeriesPointRow.metric == metric,
                )
            ).all()
        return {run_id: attempt for run_id, attempt in rows}


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _series_of(origin: dict | None) -> list[dict]:
    """The origin's `series`: one change point ({"test", "metric", "run_before", "run_after", ...}) or a list of them (a
    bisection of several metrics that shifted at the same run)."""
    found = (origin or {}).get("series")
    items = found if isinstance(found, list) else [found]
    return [item for item in items if isinstance(item, dict)]


class SeriesOrigins:
    """bot.ports.store.SeriesBisections: the bisections whose origin names a change point of a series."""

    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def of_series(self, repository: str, test: str, metric: str) -> list[SeriesBisection]:
        with self._session() as s:
            rows = s.execute(
                select(
                    BisectionRow.id,
                    BisectionRow.repo,
                    BisectionRow.origin,
                    BisectionRow.status,
                    BisectionRow.phase,
                )
                .where(BisectionRow.origin.is_not(None))
                .order_by(BisectionRow.id.desc())
            ).all()
        out = []
        for row in rows:
            if repository_of(row).lower() != repository.lower():
                continue
            for item in _series_of(row.origin):
                before, after = _int(item.get("run_before")), _int(item.get("run_after"))
                if item.get("test") == test and item.get("metric") == metric and before is not None and after:
                    good, bad = _int(item.get("run_good")), _int(item.get("run_bad"))
                    span = (good, bad) if good is not None and bad is not None else (before, after)
                    out.append(SeriesBisection(row.id, row.status, row.phase, test, metric, before, after, *span))
        return out
