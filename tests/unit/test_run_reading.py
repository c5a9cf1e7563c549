"""A run read once, as values (bot.domain.run_reading), and what the red-test intake and a test's word in an earlier
run ask of it (bot.domain.red_run.wanted, bot.domain.earlier_run.word): SGLang-shaped jobs and logs, fetched by a
loop over a dict standing for GitHub, so the order and the number of fetches are what is asserted."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.policy_files import load
from bot.domain import red_run
from bot.domain.earlier_run import word
from bot.domain.joblog import plain
from bot.domain.run_reading import ArtifactsOf, JobsOf, LogOf, RunReading, Wanted, with_log
from bot.domain.scope import RunInfo
from bot.domain.signals import JobInfo, Outcome, Signal
from bot.domain.suite_log import merge, parse
from tests.support.suite_logs import CHECKOUT, KL_TEST, File, kl_output, partition_log

ROOT = Path(__file__).resolve().parents[2]
POLICY = load(ROOT / "policies" / "sglang.yaml")
KL = POLICY.tests[0]
STAGE = "base-c-test-4-gpu-h100"
GLM = "test/registered/models_e2e/test_glm4_moe_models.py"
MTP = "test/registered/models_e2e/test_qwen3_next_models_mtp.py"
PATH = ".github/workflows/pr-test.yml"
REPO = POLICY.repository


def run(id=40, attempt=1, conclusion="failure") -> RunInfo:
    return RunInfo(id, "PR Test Base", PATH, "main", "09" * 20, "schedule", conclusion, REPO, attempt)


class GitHub:
    """Jobs lists and logs by (attempt, job): what the loop fetches, counted."""

    def __init__(self):
        self.jobs: dict[int | None, list[JobInfo]] = {}
        self.logs: dict[int, str | None] = {}
        self.asked: list[Wanted] = []

    def add(self, attempt, k, files, newest=True):
        verdict = "success" if all(f.attempts[-1] for f in files) else "failure"
        job = JobInfo(100 * attempt + k, f"{STAGE} / {STAGE} ({k})", "completed", verdict, attempt)
        self.logs[job.id] = partition_log(files, k)
        self.jobs.setdefault(attempt, []).append(job)
        if newest:
            self.jobs.setdefault(None, []).append(job)
        return job

    def read(self, read: RunReading, ask) -> RunReading:
        while not isinstance(want := ask(read), Signal) and want is not None:
            self.asked.append(want)
            if isinstance(want, JobsOf):
                read = read.with_jobs(want, self.jobs[None if want.newest else want.attempt])
            elif isinstance(want, LogOf):
                read = with_log(POLICY, read, want, self.logs[want.job.id], "expired")
            else:
                read = read.with_artifacts((), None)
        return read


def test_a_red_runs_reading_holds_its_failed_jobs_logs_parsed_and_the_metric_values_found():
    github = GitHub()
    github.add(1, 0, [File(GLM, [False], ["score 0.61 < 0.62"])])
    github.add(1, 1, [File(MTP, [True])])
    failed = github.add(1, 2, [File(KL_TEST, [False], kl_output(0.0065))])
    read = github.read(RunReading(run()), lambda r: red_run.wanted(POLICY, r))
    # the jobs once, then the failed jobs' logs (the policy names no artifact): never the green partition's
    assert [type(w) for w in github.asked] == [JobsOf, LogOf, LogOf]
    assert set(read.final.logs) == {f"{STAGE} / {STAGE} (0)", failed.name}
    assert read.final.logs[failed.name].report.failed == ((f"{CHECKOUT}/{KL_TEST}", "exit code 1"),)
    assert read.metrics == {KL.id: {"avg_kl_div": pytest.approx(0.0065)}}
    [failure] = red_run.failing(POLICY, read)
    assert failure.test.id == KL.id and failure.metric == pytest.approx(0.0065)
    assert red_run.needs_history(POLICY, read) == [(failure.test, failed.name)]
    assert not red_run.reproduced(POLICY, read) and red_run.flakes(POLICY, read) == []


def test_a_retry_that_failed_again_reproduces_and_one_that_passed_is_a_flake():
    for attempts, reproduced, flaky in (([False, False], True, []), ([False, True], False, [KL.id])):
        github = GitHub()
        github.add(1, 0, [File(KL_TEST, attempts, kl_output(0.0065)), File(MTP, [False])])
        read = github.read(RunReading(run()), lambda r: red_run.wanted(POLICY, r))
        assert red_run.reproduced(POLICY, read) is reproduced
        assert [f.test for f in red_run.flakes(POLICY, read)] == flaky


def test_a_rerun_is_read_attempt_by_attempt_and_a_jobs_log_only_where_a_watched_test_failed_before():
    github = GitHub()
    # attempt 1: an unrelated file failed in partition 0, the KL test in partition 2
    github.add(1, 0, [File(GLM, [False])], newest=False)
    github.add(1, 1, [File(MTP, [True])])
    github.add(1, 2, [File(KL_TEST, [False], kl_output(0.0065))], newest=False)
    # attempt 2 re-ran the failed jobs: both passed
    github.add(2, 0, [File(GLM, [True])])
    kl_now = github.add(2, 2, [File(KL_TEST, [True], kl_output(0.0004))])
    read = github.read(RunReading(run(attempt=2, conclusion="success")), lambda r: red_run.wanted(POLICY, r))
    assert [(type(w).__name__, w.attempt, w.job.id if isinstance(w, LogOf) else None) for w in github.asked] == [
        ("JobsOf", 2, None),  # the newest attempt's jobs (a green attempt: none of its logs for themselves)
        ("JobsOf", 1, None),
        ("LogOf", 1, 100),
        ("LogOf", 1, 102),
        ("LogOf", 2, kl_now.id),  # where the KL test failed before; not partition 0, where only GLM did
    ]
    assert read.metrics == {KL.id: {"avg_kl_div": pytest.approx(0.0004)}}  # the newest attempt's, not the first's
    [flake] = red_run.flakes(POLICY, read)
    assert (flake.test, flake.how) == (KL.id, "failed, then passed on re-run attempt 2")
    assert red_run.intake(POLICY, red_run.RedReading(read, {})).flakes == (flake,)


def test_a_log_that_expired_is_kept_as_such_and_not_asked_for_again():
    github = GitHub()
    github.add(1, 0, [File(KL_TEST, [False], kl_output(0.0065))], newest=False)
    kl_now = github.add(2, 0, [File(KL_TEST, [True], kl_output(0.0004))])
    github.logs[kl_now.id] = None
    read = github.read(RunReading(run(attempt=2, conclusion="success")), lambda r: red_run.wanted(POLICY, r))
    assert read.final.unread == {kl_now.name: "expired"} and red_run.wanted(POLICY, read) is None
    assert red_run.flakes(POLICY, read) == []  # no word of the re-run: not called a flake


def test_an_earlier_run_is_read_up_to_the_job_that_speaks_the_red_runs_job_first():
    github = GitHub()
    github.add(1, 0, [File(MTP, [True])])
    github.add(1, 1, [File(GLM, [True])])
    github.add(1, 2, [File(KL_TEST, [True], kl_output(0.0004))])
    read = RunReading(run(34, conclusion="success"))
    first = f"{STAGE} / {STAGE} (1)"  # where the test failed on the red run: read first, here it did not run
    read = github.read(read, lambda r: word(POLICY, KL, r, first))
    assert [w.job.id for w in github.asked if isinstance(w, LogOf)] == [101, 100, 102]
    signal = word(POLICY, KL, read, first)
    assert isinstance(signal, Signal) and (signal.outcome, signal.metric) == (Outcome.PASSED, pytest.approx(0.0004))
    # another test's word in the same run: from what is read already, nothing fetched again
    mtp = KL.model_copy(update={"id": "mtp", "match": r"(?:^|/)test_qwen3_next_models_mtp\.py$"})
    again = word(POLICY, mtp, read, first)
    assert isinstance(again, Signal) and again.outcome is Outcome.PASSED


def test_an_earlier_runs_artifacts_are_read_first_when_the_policy_names_them():
    policy = POLICY.model_copy(update={"results": POLICY.results.model_copy(update={"junit_artifact": "junit"})})
    assert word(policy, KL, RunReading(run(34)), None) == ArtifactsOf()
    assert word(policy, KL, RunReading(run(34)).with_artifacts((), None), None) == JobsOf(1, newest=True)


def test_reports_merged_are_the_report_of_the_logs_read_together():
    a = plain(partition_log([File(GLM, [False], ["score 0.61"]), File(KL_TEST, [False, True], kl_output(0.003))]))
    b = plain(partition_log([File(MTP, [False], ["avg_kl_div=0.01"])], 1))
    assert merge([parse(a), parse(b)]) == parse(a + "\n" + b)
    # a job that died inside a file: its output kept (in one text the next log's first file would drop it)
    died = a.split(".\nEnd (")[0]
    assert merge([parse(died), parse(b)]).outputs[f"{CHECKOUT}/{GLM}"] == parse(died).outputs[f"{CHECKOUT}/{GLM}"]
    assert f"{CHECKOUT}/{GLM}" not in parse(died + "\n" + b).outputs


def test_a_test_the_rerun_still_fails_wants_no_log_of_the_job_it_passed_in_now():
    github = GitHub()
    github.add(1, 1, [File(KL_TEST, [False], kl_output(0.0065))], newest=False)
    github.add(2, 0, [File(KL_TEST, [False], kl_output(0.0066))])  # failed again, in another partition
    green = github.add(2, 1, [File(MTP, [True])])
    read = github.read(RunReading(run(attempt=2)), lambda r: red_run.wanted(POLICY, r))
    assert green.id not in [w.job.id for w in github.asked if isinstance(w, LogOf)]
    assert red_run.flakes(POLICY, read) == [] and read.metrics == {KL.id: {"avg_kl_div": pytest.approx(0.0066)}}
