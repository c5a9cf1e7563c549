"""A test's word in one job of a run (bot.domain.signals), from job logs as SGLang's CI writes them."""

from pathlib import Path

import pytest

from bot.adapters.policy_files import load
from bot.domain.ci_results import combine, named, read_artifacts, read_job
from bot.domain.joblog import plain
from bot.domain.signals import JobInfo, Outcome, Reading, Signal, fetchable, good, latest_jobs
from tests.support.suite_logs import CHECKOUT, KL_TEST, File, kl_output, partition_log

ROOT = Path(__file__).resolve().parents[2]
POLICY = load(ROOT / "policies" / "sglang.yaml")
KL = POLICY.tests[0]
REGISTERED = [
    line
    for line in (ROOT / "tests/fixtures/sglang/registered_qwen3_tests.txt").read_text().splitlines()
    if line and not line.startswith("#")
]
MTP = "test/registered/models_e2e/test_qwen3_next_models_mtp.py"
GSM = "test/registered/models_e2e/test_glm4_moe_models.py"


def job(
    name="base-c-test-4-gpu-h100 / base-c-test-4-gpu-h100 (2)", conclusion="success", attempt=1, status="completed"
):
    return JobInfo(7, name, status, conclusion, attempt)


def reading(files, j=None) -> Reading:
    return read_job(POLICY, KL, plain(partition_log(files)), j or job())


def test_the_selector_picks_test_qwen3_next_models_alone_among_sglangs_registered_files():
    """Item 7: `match` against the names run_suite prints -- repo-relative in TIMINGS, absolute in the sections."""
    assert len(REGISTERED) > 50 and KL_TEST in REGISTERED
    for printed in (REGISTERED, [f"{CHECKOUT}/{name}" for name in REGISTERED]):
        chosen = [name for name in printed if named(KL, name)]
        assert [c.removeprefix(f"{CHECKOUT}/") for c in chosen] == [KL_TEST]
    old = KL.model_copy(update={"match": r"test_qwen3_next.*\.py"})  # the selector before: its siblings too
    assert {n.rsplit("/", 1)[-1] for n in REGISTERED if named(old, n)} >= {
        "test_qwen3_next_models_mtp.py",
        "test_qwen3_next_models_fp4.py",
        "test_qwen3_next_deterministic.py",
    }


def test_a_pass_and_its_metric_are_read_from_the_timings_block_and_the_tests_own_output():
    found = reading([File(GSM, [True], ["avg_kl_div=0.9"]), File(KL_TEST, [True], kl_output(0.0004))])
    assert found.outcome is Outcome.PASSED and found.metric == pytest.approx(0.0004)  # not the other file's 0.9
    assert not found.retried_passed


def test_a_failure_carries_its_metric():
    found = reading([File(GSM, [True]), File(KL_TEST, [False], kl_output(0.0065))], job(conclusion="failure"))
    assert found.outcome is Outcome.FAILED and found.metric == pytest.approx(0.0065)


def test_a_partition_that_did_not_run_the_test_gives_no_signal_even_when_green():
    found = reading([File(GSM, [True]), File(MTP, [True])])
    assert found.outcome is Outcome.NONE and "did not run" in found.why


def test_the_suite_runners_own_retry_that_passed_is_a_pass_marked_as_a_flake():
    found = reading([File(KL_TEST, [False, True], kl_output(0.0031) + ["accuracy"])])
    assert found.outcome is Outcome.PASSED and found.retried_passed
    failed_twice = reading([File(KL_TEST, [False, False], kl_output(0.0065))], job(conclusion="failure"))
    assert failed_twice.outcome is Outcome.FAILED and not failed_twice.retried_passed


def test_skipped_cancelled_unfinished_and_other_jobs_are_not_downloaded():
    assert fetchable(KL, job()) is None
    assert "skipped" in fetchable(KL, job(conclusion="skipped"))
    assert "cancelled" in fetchable(KL, job(conclusion="cancelled"))
    assert "did not finish" in fetchable(KL, job(conclusion=None, status="in_progress"))
    assert "does not run" in fetchable(KL, job(name="base-c-test-8-gpu-h200 / base-c-test-8-gpu-h200 (0)"))
    assert "does not run" in fetchable(KL, job(name="base-b-test-1-gpu-small / base-b-test-1-gpu-small (3)"))


def test_a_job_named_by_the_policy_speaks_by_its_conclusion_only_without_a_per_test_report():
    example = load(ROOT / "policies" / "example.yaml")
    test = example.tests[0]
    green = read_job(
        example, test, plain("avg_kl_div=0.0001 threshold=0.002\nTest Summary: 1/1 passed\n"), job("accuracy")
    )
    assert green.outcome is Outcome.PASSED
    red = read_job(example, test, "FAILED: test_decode_cache_hit\n", job("accuracy", "failure"))
    assert red.outcome is Outcome.FAILED
    # a job the policy does not name says nothing of the test by its conclusion
    loose = example.model_copy(update={"tests": [test.model_copy(update={"jobs": None})]})
    assert read_job(loose, loose.tests[0], "Test Summary: 1/1 passed\n", job("accuracy")).outcome is Outcome.NONE


def test_the_newest_execution_of_each_job_counts():
    jobs = [job("a", "failure", 1), job("b", "success", 1), job("a", "success", 2)]
    assert sorted((j.name, j.run_attempt, j.conclusion) for j in latest_jobs(jobs)) == [
        ("a", 2, "success"),
        ("b", 1, "success"),
    ]


def test_a_run_fails_when_any_job_failed_it_and_good_is_the_newest_pass():
    none = Reading(Outcome.NONE, "job x was skipped")
    assert combine([none, Reading(Outcome.PASSED, "p"), Reading(Outcome.FAILED, "f")]).outcome is Outcome.FAILED
    assert combine([none]).why == "job x was skipped" and combine([]).outcome is Outcome.NONE
    signals = [Signal(9, "c", Outcome.NONE, ""), Signal(8, "b", Outcome.FAILED, ""), Signal(7, "a", Outcome.PASSED, "")]
    assert good(signals).run_id == 7 and good(signals[:2]) is None


def test_artifacts_speak_for_the_test_when_the_policy_names_them():
    junit = (
        '<testsuite><testcase classname="test/registered/models_e2e/test_qwen3_next_models.py" name="test_kl"/>'
        '<testcase classname="x.py" name="t"><failure/></testcase></testsuite>'
    )
    assert read_artifacts(KL, (junit,), None).outcome is Outcome.PASSED
    assert read_artifacts(KL, (), {"metric": {"name": "avg_kl_div", "value": 0.0065}}).outcome is Outcome.FAILED
    assert read_artifacts(KL, (), {"metric": {"name": "avg_kl_div", "value": 0.0004}}).metric == 0.0004
    assert read_artifacts(KL, ("<broken",), {"metric": "x"}) is None
