"""A slowdown's metrics bisected together (bot.service.slowdowns, bot.domain.bisect.group), through the real driver,
the local runner and real git: one benchmark prints a table of output throughput per batch size; in the same nightly
range, commit 21 makes batch size 1 5% slower and commit 23 batch size 64. The nightly series sees both shift at one
run; the bisection has a member per metric, each step runs the benchmark once and reads both metrics from that one
run, and each metric ends with its own culprit, each proven by its own A/B (HEAD against HEAD + revert)."""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.dispatch.local_pool import LocalPool
from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import reverter_for
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import Kind, Status
from bot.domain.perf.slowdowns import SeriesTable, assess, ci_readings
from bot.domain.perf.step_metric import step_regex
from bot.domain.policy import Series, TableCell
from bot.domain.requests import JudgedMetric, StartRequest
from bot.service import setup
from bot.service.conclude import culprits
from bot.service.config import BisectConfig, measured_by
from bot.service.driver import Driver
from scenarios.synthetic import build

SLOW_1, SLOW_64 = 21, 23  # the commits that slow batch size 1 and batch size 64
NIGHTS = range(0, 61, 4)  # the commits the nightly ran at: 20 and 24 are the nights either side of both
SPREAD = 0.01

BENCH = """#!/usr/bin/env python3
import os, pathlib, random
tree = pathlib.Path.cwd()
with open(os.environ["RUN_LOG"], "a") as log:
    log.write(os.environ.get("REVERT_BISECT_SHA", "") + "\\n")
rng = random.Random(os.environ.get("REVERT_BISECT_STEP_ID", "") + os.environ.get("REVERT_BISECT_SHA", ""))
slow_1 = "BROKEN = True" in (tree / "service" / "config.py").read_text()
slow_64 = (tree / "notes" / "change_23.txt").exists()
print("### bench-model [cpu-1]")
print("| batch size | output throughput (tok/s) |")
print("|---|---|")
for batch, base, slow in ((1, 1000.0, slow_1), (64, 20000.0, slow_64)):
    print(f"| {batch} | {base * (0.95 if slow else 1.0) * (1 + SPREAD * rng.gauss(0, 1)):.2f} |")
""".replace("SPREAD", repr(SPREAD))


def metric(batch: int) -> Series:
    cell = TableCell(column="output throughput (tok/s)", row={"batch size": str(batch)}, after=r"^### bench-model\b")
    return Series(name=f"bs{batch}_output_throughput", table=cell, direction="lower_is_worse", min_effect=0.02)


SPECS = {s.name: s for s in (metric(1), metric(64))}
NIGHT_LOG = """\
### bench-model [cpu-1]
| batch size | output throughput (tok/s) |
|---|---|
| 1 | 950.1 |
| 64 | 19000 |
"""


class Reading:
    """One night's reading of a metric, as the series store keeps it."""

    def __init__(self, night: int, sha: str, value: float):
        self.run_id, self.run_attempt, self.sha, self.value = 100 + night, 1, sha, value
        self.started_at = datetime(2026, 11, 1, tzinfo=UTC) + timedelta(days=night)
        self.url = f"https://ci/{100 + night}"


def nightly_series(shas: list[str]) -> tuple[SeriesTable, str]:
    """The nightly's readings at each night's commit (the model the benchmark draws from), and its log of the night
    after the shift (the table's header a step's regex is made from)."""
    rng = random.Random(3)
    points: dict[str, list[Reading]] = {name: [] for name in SPECS}
    for night, i in enumerate(NIGHTS):
        for name, base, slow in (
            ("bs1_output_throughput", 1000.0, SLOW_1),
            ("bs64_output_throughput", 20000.0, SLOW_64),
        ):
            level = base * (0.95 if i >= slow else 1.0) * (1 + SPREAD * rng.gauss(0, 1))
            points[name].append(Reading(night, shas[i], level))
    return SeriesTable.of(points), NIGHT_LOG


@pytest.fixture
def history(tmp_path: Path):
    repo = build(tmp_path / "repo", 60, SLOW_1)  # commit 21 flips BROKEN; commit 23 adds notes/change_23.txt
    bench = tmp_path / "bench.py"
    bench.write_text(BENCH)
    bench.chmod(0o755)
    return repo, bench


def test_two_metrics_slowed_in_one_nightly_range_by_two_commits_each_get_their_own_culprit(
    history, tmp_path, monkeypatch
):
    repo, bench = history
    shas = [repo.good, *repo.shas]  # position i: commit i (0: GOOD)
    series, night_log = nightly_series(shas)
    (slowdown,) = assess("bench", series, SPECS).to_bisect  # both shifted at one run: one slowdown
    assert {s.metric for s in slowdown.shifts} == set(SPECS)
    assert shas.index(slowdown.good.sha) <= 20 and shas.index(slowdown.bad.sha) >= 24
    # as bot.service.slowdowns asks for it: a member per metric, its regex from CI's log, CI's readings of it
    metrics = tuple(
        JudgedMetric(s.metric, step_regex(SPECS[s.metric], night_log) or "", False, ci_readings(series, slowdown, s))
        for s in slowdown.shifts
    )
    assert all(m.regex for m in metrics)
    work = StartRequest(
        "o/bench",
        None,
        None,
        None,
        "bench",
        slowdown.good.sha,
        slowdown.bad.sha,
        None,
        False,
        run=1,
        metrics=metrics,
        onto=repo.bad,
    )
    config = measured_by(BisectConfig(command=(str(bench),), workers=2, verify_revert=True), metrics, work.onto)
    monkeypatch.setenv("RUN_LOG", str(tmp_path / "runs.log"))
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    git = GitRepo(repo.path)
    loaded = setup.create(store, git, work.good, work.bad, config, members=work.group, test=work.test)
    pool = LocalPool(git, 2, tmp_path / "wt")
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, pool, reverter=reverter_for(git)).run()

    row = store.get(loaded.id)
    told = {e.test: e for e in entries(row.tests)}
    assert set(told) == set(SPECS)  # the ledger's entries are the metrics
    assert told["bs1_output_throughput"].culprit == shas[SLOW_1], told["bs1_output_throughput"].told.message
    assert told["bs64_output_throughput"].culprit == shas[SLOW_64], told["bs64_output_throughput"].told.message
    for e in told.values():
        assert e.status is Status.FOUND and e.told.ab is not None and e.told.ab.passed, e.told.message
        assert e.ci  # CI's readings of its own metric, kept with it
    assert culprits(row) == {shas[SLOW_1]: ("bs1_output_throughput",), shas[SLOW_64]: ("bs64_output_throughput",)}
    assert outcome.status is Status.FOUND and outcome.culprit is None  # two culprits: the bisection names neither
    # each step is one run of the benchmark, however many metrics it read: steps carrying both read two readings
    ran = len((tmp_path / "runs.log").read_text().splitlines())
    done = [s for s in row.steps if s.state == "done"]
    assert len(done) <= ran <= len(row.steps)
    both = [s for s in done if len(s.results or {}) == 2]
    assert both and any(s.kind == Kind.SEARCH.value for s in both)


def test_a_bisection_stored_judging_one_metric_alone_still_runs_to_its_culprit(history, tmp_path, monkeypatch):
    """Stored before a slowdown's metrics were members (bot.service.config.judged_by then): the one judged metric's
    regex as the config's own, one test named by the test, the whole step its reading. It reads and drives as then."""
    repo, bench = history
    shas = [repo.good, *repo.shas]
    series, night_log = nightly_series(shas)
    (slowdown,) = assess("bench", series, SPECS).to_bisect
    shift = next(s for s in slowdown.shifts if s.metric == "bs1_output_throughput")
    regex = step_regex(SPECS[shift.metric], night_log)
    stored = dict(
        command=[str(bench)], workers=2, metric_regex=regex, threshold=None, higher_is_worse=False, verify_revert=True
    )
    config = BisectConfig.from_json(stored)  # as a row written then reads now
    assert config.whole_step and config.metrics is None
    monkeypatch.setenv("RUN_LOG", str(tmp_path / "runs.log"))
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    git = GitRepo(repo.path)
    ci = ci_readings(series, slowdown, shift)
    loaded = setup.create(store, git, slowdown.good.sha, slowdown.bad.sha, config, ci=ci, test="bench")
    pool = LocalPool(git, 2, tmp_path / "wt")
    outcome = Driver(store, loaded.id, loaded.problem, loaded.config, pool, reverter=reverter_for(git)).run()
    assert outcome.status is Status.FOUND and outcome.culprit == shas[SLOW_1], outcome.message
    (entry,) = entries(store.get(loaded.id).tests)
    assert entry.test == "bench" and entry.told.ab is not None and entry.told.ab.passed
