"""The series' job beside the red-test intake (bot.ingress.jobs.series): the intake runs and decides whatever the
series' sync did, its waits (NotYet) and errors are its own; the sync run at start only when its handler is wired;
and the page's view of a long series: every run drawn, the newest WINDOW searched (bot.web.series_views)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta

import pytest

from bot.domain.patience import NotYet
from bot.domain.perf.address import segment, series_path, unsegment
from bot.domain.policy import Series
from bot.ingress.jobs.series import SYNC_AT_START, Alongside, at_start
from bot.ports.store import ClaimedJob, SeriesBisection, SeriesPoint
from bot.web import series_views
from bot.web.series_views import detail

JOB = ClaimedJob(1, "nightly_failure", "d-1", "workflow_run", {}, 1)


def test_the_intake_runs_whatever_the_series_sync_did():
    seen = []

    def failing(job):
        seen.append("series")
        raise ConnectionError("GitHub went away mid-sync")

    Alongside(failing, lambda job: seen.append("intake"))(JOB)
    assert seen == ["series", "intake"]


def test_the_intakes_wait_and_failure_are_its_own():
    def waits(job):
        raise NotYet(60, "re-runs may still start")

    synced = []
    with pytest.raises(NotYet):
        Alongside(lambda job: synced.append(job.id), waits)(JOB)
    assert synced == [1]  # the series was read before the intake's wait

    def breaks(job):
        raise RuntimeError("the intake's own error: retried by the worker")

    with pytest.raises(RuntimeError):
        Alongside(lambda job: None, breaks)(JOB)


def test_the_sync_runs_once_at_start_on_its_own_thread_only_when_wired():
    assert at_start({"command": lambda job: None}) is None
    seen = []
    thread = at_start({SYNC_AT_START: lambda job: seen.append((job.handler, job.payload))})
    assert thread is not None
    thread.join(5)
    assert seen == [(SYNC_AT_START, {})]

    def fails(job):
        raise ConnectionError("GitHub does not answer")

    thread = at_start({SYNC_AT_START: fails})  # logged, never the bot's start
    assert thread is not None
    thread.join(5)
    assert not thread.is_alive()


@pytest.mark.parametrize("name", ["text-models-perf", "a/b:c", "decode/bs64/x"])
def test_a_slash_in_a_test_or_metric_is_written_tilde_in_the_address(name):
    assert unsegment(segment(name)) == name and "/" not in segment(name)
    assert series_path("o/r", name, name).count("/") == 5


def test_a_long_series_is_drawn_whole_and_searched_over_its_newest_window(monkeypatch):
    monkeypatch.setattr(series_views, "WINDOW", 40)
    rng = random.Random(3)
    t0 = datetime(2026, 1, 1, tzinfo=UTC)
    # an old shift (run 10), outside the window, and a recent one (run 50), inside it
    levels = [100.0 if k < 10 else 90.0 if k < 50 else 80.0 for k in range(70)]
    points = [
        SeriesPoint("o/r", "t", "m", 1000 + k, 1, f"{k:040x}", t0 + timedelta(days=k), v * (1 + rng.gauss(0, 0.01)))
        for k, v in enumerate(levels)
    ]
    view = detail("o/r", "t", "m", {"m": points}, {"m": None}, [])
    assert len(view.points) == 70 and view.searched_from == 30
    [change] = view.changes
    assert (change.index, change.run_before, change.run_after) == (50, 1049, 1050)
    assert (change.before.first, change.before.last, change.after.first, change.after.last) == (30, 49, 50, 69)
    assert change.regression is None  # no policy says which way is worse


def test_the_page_says_a_recovered_slowdown_and_links_a_bisection_whose_range_holds_the_change_point():
    rng = random.Random(3)
    t0 = datetime(2026, 9, 1, tzinfo=UTC)
    levels = [100.0 if k < 15 else 92.0 if k < 30 else 100.0 for k in range(45)]  # 8% slower, then back
    points = [
        SeriesPoint("o/r", "t", "m", 1000 + k, 1, f"{k:040x}", t0 + timedelta(days=k), v * (1 + rng.gauss(0, 0.01)))
        for k, v in enumerate(levels)
    ]
    spec = Series(name="m", pattern=r"m=(?P<value>[0-9.]+)", direction="lower_is_worse")
    # started when the change point read a run earlier (1013/1014); its range, runs 1010..1016, holds it still
    moved = SeriesBisection(7, "found", "done", "t", "m", 1013, 1014, 1010, 1016)
    elsewhere = SeriesBisection(8, None, "searching", "t", "m", 1002, 1003, 1001, 1004)
    view = detail("o/r", "t", "m", {"m": points}, {"m": spec}, [moved, elsewhere])
    slower, back = view.changes
    assert (slower.run_after, slower.regression, back.run_after, back.regression) == (1015, True, 1030, False)
    assert slower.recovered_at == 1030 and back.recovered_at is None
    assert [b.id for b in slower.bisections] == [7] and back.bisections == []
