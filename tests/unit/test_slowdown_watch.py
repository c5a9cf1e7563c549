"""One job at a time works on a repository's slowdowns (bot.service.slowdowns.Slowdowns.watch): a delivery that comes
while another job assesses or bisects them skips instead of starting or driving the same bisection twice, and the
repository is free again once that job ends, however it ends."""

from __future__ import annotations

import threading
from pathlib import Path
from types import SimpleNamespace

import pytest

from bot.adapters.policy_files import load
from bot.service.slowdowns import Slowdowns

POLICY = load(Path(__file__).resolve().parents[2] / "policies" / "perf" / "example-perf.yaml")


class Series:
    """A series log whose first read waits until `go` is set (a job busy on the repository's slowdowns)."""

    def __init__(self, fail: bool = False):
        self.reading, self.go, self.fail, self.reads = threading.Event(), threading.Event(), fail, 0

    def series(self, repository: str, test: str, metric: str) -> list:
        self.reads += 1
        self.reading.set()
        self.go.wait(10)
        if self.fail:
            raise RuntimeError("the store went away")
        return []


class Origins:
    def of_series(self, repository: str, test: str, metric: str) -> list:
        return []


def slowdowns(series: Series) -> Slowdowns:
    bisections = SimpleNamespace(store=None, conclusions=None)
    return Slowdowns(bisections, series, Origins())  # type: ignore[arg-type]


def test_a_second_job_skips_while_the_first_is_on_the_repositorys_slowdowns():
    series = Series()
    watch = slowdowns(series)
    first = threading.Thread(target=watch.watch, args=(None, POLICY))
    first.start()
    assert series.reading.wait(10)
    reads = series.reads
    assert watch.watch(None, POLICY) == [] and series.reads == reads  # skipped: read nothing
    series.go.set()
    first.join(10)
    assert watch.watch(None, POLICY) == [] and series.reads > reads  # free again: assessed (a flat, empty series)


def test_the_repository_is_free_again_after_a_job_that_failed():
    series = Series(fail=True)
    series.go.set()
    watch = slowdowns(series)
    with pytest.raises(RuntimeError):
        watch.watch(None, POLICY)
    series.fail = False
    reads = series.reads
    assert watch.watch(None, POLICY) == [] and series.reads > reads
