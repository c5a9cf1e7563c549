"""The benchmarks' series in the store (bot.adapters.store.series), on SQLite and PostgreSQL: a point per
(repository, test, metric, run), a re-run attempt's reading replacing the older attempt's and never the other way,
a missing reading kept as NULL, the series oldest first by when its runs started, the watched triples, the runs read,
and the bisections whose origin names a change point."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from bot.adapters.store.db import connect
from bot.adapters.store.series import SeriesOrigins, SeriesPoints
from bot.adapters.store.store import NewBisection, Store
from bot.domain.requests import SeriesChange
from bot.ports.store import SeriesPoint

REPO = "sgl-project/sglang"
TEST = "text-models-perf"
T0 = datetime(2026, 8, 1, 14, 0, tzinfo=UTC)
BIG_RUN = 17_000_000_123  # GitHub's run ids are past 2**31


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def engine(request, tmp_path):
    url = f"sqlite:///{tmp_path / 'series.db'}" if request.param == "sqlite" else request.getfixturevalue("pg_url")
    return connect(url)


def point(
    run: int, value: float | None, metric: str = "bs64", attempt: int = 1, day: int = 0, sha: str = "a"
) -> SeriesPoint:
    return SeriesPoint(
        REPO,
        TEST,
        metric,
        run,
        attempt,
        sha * 40,
        T0 + timedelta(days=day),
        value,
        f"https://github.com/{REPO}/actions/runs/{run}",
    )


def test_points_are_kept_one_per_run_oldest_first_with_gaps(engine):
    log = SeriesPoints(engine)
    # recorded out of order; the series' order is when each run started, not the id or the insertion
    assert log.record([point(BIG_RUN, 4281.36, day=4), point(11, 4300.0, day=0), point(12, None, day=2, sha="b")]) == 3
    series = log.series(REPO, TEST, "bs64")
    assert [(p.run_id, p.value) for p in series] == [(11, 4300.0), (12, None), (BIG_RUN, 4281.36)]
    assert series[1].sha == "b" * 40 and series[2].url.endswith(f"/runs/{BIG_RUN}")
    assert series[0].started_at == T0  # timezone-aware, as written
    assert log.runs_read(REPO, TEST, "bs64") == {11: 1, 12: 1, BIG_RUN: 1}
    assert log.runs_read(REPO, TEST, "bs8") == {} and log.series("other/repo", TEST, "bs64") == []


def test_a_rerun_attempt_replaces_the_older_reading_never_the_reverse(engine):
    log = SeriesPoints(engine)
    log.record([point(21, None, attempt=1)])  # the benchmark crashed in attempt 1
    assert log.record([point(21, 4100.0, attempt=2)]) == 1  # its re-run reported
    assert [(p.run_attempt, p.value) for p in log.series(REPO, TEST, "bs64")] == [(2, 4100.0)]
    assert log.record([point(21, None, attempt=1)]) == 0  # an older attempt read late changes nothing
    assert log.record([point(21, 4100.0, attempt=2)]) == 1  # the same attempt read again: the same row
    assert [(p.run_attempt, p.value) for p in log.series(REPO, TEST, "bs64")] == [(2, 4100.0)]
    assert log.runs_read(REPO, TEST, "bs64") == {21: 2}


def test_watched_triples_and_a_batch_with_the_same_point_twice(engine):
    log = SeriesPoints(engine)
    log.record([point(31, 1.0, "bs8"), point(31, 2.0, "bs64"), point(31, 3.0, "bs64", attempt=2)])
    assert log.watched() == [(REPO, TEST, "bs64"), (REPO, TEST, "bs8")]
    assert [(p.run_attempt, p.value) for p in log.series(REPO, TEST, "bs64")] == [(2, 3.0)]


def test_bisections_started_from_a_change_point_are_found_by_their_origin(engine):
    store, origins = Store(engine), SeriesOrigins(engine)

    def bisection(origin: dict) -> int:
        return store.create(
            NewBisection("/clones/sglang", "g", "b", "g" * 40, "b" * 40, ["true"], {}, origin=origin), "searching"
        )

    change = {"test": TEST, "metric": "bs64", "run_before": 11, "run_after": BIG_RUN}
    first = bisection({"repo": REPO, "series": change})
    group = bisection({"repo": REPO, "series": [{**change, "metric": "bs8"}, change]})  # several metrics at one run
    bisection({"repo": REPO, "series": {**change, "metric": "bs16"}})  # another metric
    bisection({"repo": "other/repo", "series": change})  # another repository
    bisection({"repo": REPO, "test": TEST})  # a red run's bisection: no series
    bisection({"repo": REPO, "series": {"test": TEST, "metric": "bs64", "run_before": "x"}})  # not a change point
    found = origins.of_series(REPO, TEST, "bs64")
    assert [(b.id, b.run_before, b.run_after, b.status, b.phase) for b in found] == [
        (group, 11, BIG_RUN, None, "searching"),
        (first, 11, BIG_RUN, None, "searching"),
    ]
    assert origins.of_series(REPO, TEST, "bs1") == []
    # stored before a bisection's GOOD and BAD runs were: its change point's two runs stand for its range
    assert [(b.run_good, b.run_bad) for b in found] == [(11, BIG_RUN), (11, BIG_RUN)]


def test_a_bisections_range_is_found_with_its_change_point(engine):
    store, origins = Store(engine), SeriesOrigins(engine)
    change = SeriesChange(TEST, "bs64", 11, 12, run_good=8, run_bad=BIG_RUN)
    origin = {"repo": REPO, "series": change.as_json()}
    made = store.create(NewBisection("/clones/sglang", "g", "b", "g" * 40, "b" * 40, ["true"], {}, origin=origin), "x")
    (found,) = origins.of_series(REPO, TEST, "bs64")
    assert (found.id, found.run_before, found.run_after, found.run_good, found.run_bad) == (made, 11, 12, 8, BIG_RUN)
