"""What a run of the watched workflow gives the benchmarks' series (bot.domain.perf.run_series): which runs are read
(this repository's, its branch and events, completed, each at its newest attempt, not read already), which jobs'
logs and in what order (fetched by a loop over a dict standing for GitHub, so the fetches are what is asserted), and
each metric's reading, a missing one None; and the series' own pieces: a test's metrics tested together with a
floor each (bot.domain.perf.per_metric), a change point's two sides (bot.domain.perf.bands)."""

from __future__ import annotations

import math
import random
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from bot.adapters.policy_files import load
from bot.domain.perf import per_metric
from bot.domain.perf.bands import sides
from bot.domain.perf.changes import ChangeSettings, find_changes
from bot.domain.perf.run_series import metric_tests, runs_to_read, values, wanted
from bot.domain.run_reading import JobsOf, LogOf, RunReading, with_log
from bot.domain.scope import RunInfo
from bot.domain.signals import JobInfo
from tests.support.perf_logs import outputs_of, perf_suite
from tests.support.suite_logs import github_log

ROOT = Path(__file__).resolve().parents[2]
PERF = load(ROOT / "policies" / "sglang-perf.yaml")
ACCURACY = load(ROOT / "policies" / "sglang.yaml")
REPO = PERF.repository
WATCH = PERF.watch[0]
PATH = WATCH.workflow
PERF_JOB = "nightly-test-text-perf-2-gpu-h100"


def run(id: int, attempt: int = 1, event="schedule", branch="main", head=REPO, status="completed", path=PATH):
    return RunInfo(id, "Nightly Test (Nvidia)", path, branch, f"{id:040x}", event, "success", head, attempt, status)


def test_only_the_policys_tests_with_metrics_keep_series():
    assert [t.id for t in metric_tests(PERF)] == ["text-models-perf"]
    assert metric_tests(ACCURACY) == []  # its KL check has a threshold and no `metrics`: no series


def test_runs_to_read_are_this_repositorys_completed_scheduled_runs_not_read_at_their_newest_attempt():
    runs = [
        run(9),
        run(8, attempt=2),  # re-run: its attempt 2 is newer than the 1 read
        run(8, attempt=1),  # the same run listed at its older attempt (a webhook's payload): the newer kept
        run(7),  # read already
        run(6, head="forker/sglang"),  # a fork's run from its own `main`
        run(5, event="pull_request"),
        run(4, branch="release"),
        run(3, status="in_progress"),
        run(2, path=".github/workflows/pr-test.yml"),
        run(1),
    ]
    chosen = runs_to_read(PERF, WATCH, runs, {7: 1, 8: 1, 1: 1})
    assert [(r.id, r.run_attempt) for r in chosen] == [(8, 2), (9, 1)]  # oldest first
    assert [r.id for r in runs_to_read(PERF, WATCH, runs, {}, history=2)] == [8, 9]  # the newest two runs only
    assert runs_to_read(PERF, WATCH, runs, {9: 1, 8: 2, 7: 1, 1: 1}) == []


class GitHub:
    """An attempt's jobs and their logs; what the loop fetches, in order."""

    def __init__(self, jobs: list[tuple[str, str, str | None]]):
        self.jobs = [JobInfo(k + 1, name, "completed", conclusion) for k, (name, conclusion, _) in enumerate(jobs)]
        self.logs = {k + 1: log for k, (_, _, log) in enumerate(jobs)}
        self.asked: list[object] = []

    def read(self, which: RunInfo) -> RunReading:
        tests = metric_tests(PERF)
        read = RunReading(which)
        while (want := wanted(PERF, tests, read)) is not None:
            self.asked.append(want)
            if isinstance(want, JobsOf):
                read = read.with_jobs(want, self.jobs)
            else:
                assert isinstance(want, LogOf)
                read = with_log(PERF, read, want, self.logs[want.job.id], "expired")
        return read


def log_of(outputs) -> str:
    passed, lines = perf_suite(outputs)
    return github_log(lines, not passed)


def test_the_perf_jobs_log_alone_is_read_and_every_metric_is_a_series():
    outputs = outputs_of(1.0)
    github = GitHub(
        [
            ("nightly-test-general-1-gpu-runner", "success", "no table here"),
            ("nightly-test-vlm-perf-2-gpu-h100", "skipped", None),
            (PERF_JOB, "success", log_of(outputs)),
        ]
    )
    read = github.read(run(9, attempt=2))
    assert github.asked == [JobsOf(2), LogOf(2, github.jobs[2])]  # that attempt's jobs; the test's job alone
    found = values(PERF, metric_tests(PERF), read)["text-models-perf"]
    assert found["llama-3.1-8b_bs64_output_throughput"] == outputs["llama-3.1-8b"][64]
    assert len(found) == 8 and all(v is not None for v in found.values())


def test_a_crash_and_a_skipped_batch_size_read_none_and_every_candidate_job_is_tried():
    crashed = outputs_of(1.0)
    del crashed["qwen2-57b-a14b"]
    del crashed["llama-3.1-8b"][16]
    rerun = dict(crashed)
    # the test may run in either of two jobs (`tests[].jobs` matches both): the first's log lacks some metrics
    policy = PERF.model_copy(update={"tests": [PERF.tests[0].model_copy(update={"jobs": f"^{PERF_JOB}"})]})
    github = GitHub([(PERF_JOB, "failure", log_of(crashed)), (f"{PERF_JOB}-retry", "success", log_of(rerun))])
    tests = metric_tests(policy)
    read = RunReading(run(9))
    while (want := wanted(policy, tests, read)) is not None:
        read = (
            read.with_jobs(want, github.jobs)
            if isinstance(want, JobsOf)
            else with_log(policy, read, want, github.logs[want.job.id], "expired")
        )
        github.asked.append(want)
    assert [type(w) for w in github.asked] == [JobsOf, LogOf, LogOf]  # both logs: neither holds every metric
    found = values(policy, tests, read)["text-models-perf"]
    assert found["llama-3.1-8b_bs16_output_throughput"] is None  # never a zero
    assert all(v is None for k, v in found.items() if k.startswith("qwen"))
    assert found["llama-3.1-8b_bs64_output_throughput"] == crashed["llama-3.1-8b"][64]


def test_an_expired_log_reads_none_and_is_not_asked_for_again():
    github = GitHub([(PERF_JOB, "success", None)])  # past the retention: GitHub has no log
    read = github.read(run(9))
    assert github.asked == [JobsOf(1), LogOf(1, github.jobs[0])]
    assert set(values(PERF, metric_tests(PERF), read)["text-models-perf"].values()) == {None}


def noisy(n: int, shifts: dict[int, float], seed: int, noise: float = 0.01) -> list[float]:
    rng = random.Random(seed)
    level = 100.0
    out = []
    for i in range(n):
        level *= shifts.get(i, 1.0)
        out.append(level * (1 + rng.gauss(0, noise)))
    return out


def test_each_metric_keeps_the_change_points_its_own_floor_lets_through():
    metrics = {"small": noisy(40, {20: 0.97}, 1), "big": noisy(40, {20: 0.90}, 2), "flat": noisy(40, {}, 3)}
    shas = [f"{i:040x}" for i in range(40)]
    ways = dict.fromkeys(metrics, "lower")
    floors = {"small": 0.05, "big": 0.05, "flat": None}
    found = per_metric.changes(shas, metrics, ways, floors)
    assert [(c.metric, c.index) for c in found] == [("big", 20)]
    everything = find_changes(shas, metrics, ways, ChangeSettings(min_effect=0.02))
    assert {(c.metric, c.index) for c in everything} == {("big", 20), ("small", 20)}
    # a floor only drops a change point: the same as the search with that floor for every metric
    assert per_metric.changes(shas, metrics, ways, dict.fromkeys(metrics, 0.02)) == everything
    assert all(c.level == 0.01 / 3 for c in everything)  # the three tested together


def test_a_change_points_two_sides_are_the_readings_its_effect_was_measured_on():
    values_ = noisy(30, {15: 0.94}, 4)
    gappy: list[float | None] = list(values_)
    gappy[5] = gappy[22] = None  # crashed runs
    [change] = find_changes([f"{i:040x}" for i in range(30)], {"m": gappy}, {"m": "lower"})
    before, after = sides(gappy, change)
    assert (before.first, before.last, before.runs, after.first, after.last, after.runs) == (0, 14, 14, 15, 29, 14)
    for side, mean in ((before, change.mean_before), (after, change.mean_after)):
        kept = [v for v in gappy[side.first : side.last + 1] if v is not None]
        assert math.isclose(side.mean, mean) and math.isclose(side.mean, float(np.mean(kept)))
        assert side.low < side.mean < side.high
    wider = sides(gappy, change, confidence=0.99)[0]
    assert wider.low < before.low and wider.high > before.high  # the interval is the stated confidence's


def test_a_side_of_one_reading_is_its_value():
    series = noisy(30, {15: 0.94}, 4)
    [change] = find_changes([f"{i:040x}" for i in range(30)], {"m": series}, {"m": "lower"})
    before, _ = sides(series, replace(change, runs_before=1))
    assert (before.first, before.runs, before.low, before.mean, before.high) == (
        14,
        1,
        series[14],
        series[14],
        series[14],
    )


@pytest.mark.parametrize("bad", [[], [1.0], [1.0, 1.0, 1.0, 1.0, 1.0, 1.0], [None] * 8])
def test_no_change_point_in_an_empty_single_constant_or_unread_series(bad):
    assert per_metric.changes([f"{i:040x}" for i in range(len(bad))], {"m": bad}, {"m": "lower"}, {}) == []
