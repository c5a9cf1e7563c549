"""Scoping a red scheduled run from its log, with SGLang's policy and run_suite's log format (bot.domain.scope).

Every log here is a job log as GitHub serves it (GET .../actions/jobs/{id}/logs): every line stamped with a
7-digit-fraction UTC time, the step's script and env inside ##[group]Run ... ##[endgroup], its output after, the
failure as ##[error] (REALITY.md, "GitHub: logs"); run_suite's report as ci_utils.py prints it
(tests/support/suite_logs.py)."""

import json
import re
from pathlib import Path

from bot.adapters.policy_files import load
from bot.domain.ci_results import failed_tests
from bot.domain.scope import (
    RunInfo,
    Scoped,
    Unscoped,
    earlier_runs,
    ranged,
    run_info,
    scope,
    watched,
)
from bot.domain.signals import Outcome, Signal
from tests.support.suite_logs import CHECKOUT, KL_TEST, File, kl_output, partition_log

ROOT = Path(__file__).resolve().parents[2]
POLICY = load(ROOT / "policies" / "sglang.yaml")
KL = "qwen3-next-models"
OTHER = "test/registered/models_e2e/test_glm4_moe_models.py"
LOG = partition_log([File(OTHER, [True]), File(KL_TEST, [False], kl_output(0.0065))])
REPO = "sgl-project/sglang"


def stamped(text: str) -> str:
    """`text` as GitHub's runner writes it into a job log: each line behind a 7-digit-fraction UTC stamp."""
    lines = text.removesuffix("\n").split("\n")
    return "".join(f"2026-11-29T03:12:{i % 60:02d}.{1234567 + i:07d}Z {line}\n" for i, line in enumerate(lines))


def run(id, sha, conclusion, branch="main", event="schedule", head_repository=REPO, name="PR Test Base"):
    return RunInfo(id, name, ".github/workflows/pr-test.yml", branch, sha, event, conclusion, head_repository)


def passed(run_id, sha, metric=0.0005):
    return Signal(run_id, sha, Outcome.PASSED, "passed in job 'base-c-test-4-gpu-h100 / ... (1)'", metric)


def test_good_is_the_newest_earlier_run_the_test_passed_in_though_no_run_was_ever_green():
    """PR Test Base almost never succeeds as a whole: every earlier run here failed (other tests), and GOOD is
    the newest in which the KL test ran and passed; the runs between are the range's CI evidence."""
    red = run(40, "b" * 40, "failure")
    history = {
        KL: [
            Signal(39, "d" * 40, Outcome.NONE, "job 'base-c-test-4-gpu-h100 / ... (1)' was skipped"),
            Signal(38, "c" * 40, Outcome.FAILED, "failed in job ...", 0.0061),
            passed(37, "a" * 40),
        ]
    }
    [scoped] = scope(POLICY, red, LOG, history)
    assert (scoped.good, scoped.bad, scoped.good_run, scoped.bad_run) == ("a" * 40, "b" * 40, 37, 40)
    assert scoped.test.metric == 0.0065 and scoped.test.threshold == 0.002 and scoped.test.test.id == KL
    assert [s.run_id for s in scoped.history] == [39, 38]  # between GOOD and BAD, newest first
    assert scoped.good_signal == history[KL][2] and scoped.good_signal.metric == 0.0005


def test_no_earlier_pass_says_what_was_read():
    red = run(40, "b" * 40, "failure")
    history = {KL: [Signal(39, "c" * 40, Outcome.FAILED, ""), Signal(38, "d" * 40, Outcome.NONE, "")]}
    reason = scope(POLICY, red, LOG, history).reason
    assert "none of the 2 earlier run(s) read shows it run and passed (1 failed, 1 no signal)" in reason
    assert f"/revert-bisect {KL} good=<sha>" in reason
    assert "a flake" in scope(POLICY, red, LOG, {KL: [passed(39, "b" * 40)]}).reason  # passed on BAD's own sha


def test_watched_by_path_or_name_only_from_this_repository_its_events_and_branch():
    assert watched(POLICY, run(40, "b" * 40, "failure")) is POLICY.watch[0]
    # the workflow was renamed ("PR Test" -> "PR Test Base"): the path still matches
    assert watched(POLICY, run(40, "b" * 40, "failure", name="PR Test")) is POLICY.watch[0]
    by_name = POLICY.model_copy(update={"watch": [POLICY.watch[0].model_copy(update={"workflow": "PR Test Base"})]})
    assert watched(by_name, run(40, "b" * 40, "failure")) is by_name.watch[0]
    assert watched(by_name, run(40, "b" * 40, "failure", name="PR Test")) is None
    # a fork's pull request from its own `main`: head_branch main, but neither this repository nor the event
    fork = run(41, "f" * 40, "failure", event="pull_request", head_repository="someone/sglang")
    assert watched(POLICY, fork) is None
    reason = scope(POLICY, fork, LOG, {}).reason
    assert "is not from sgl-project/sglang" in reason and "someone/sglang" in reason
    # even a fork run of the watched event would not count
    assert watched(POLICY, run(42, "f" * 40, "failure", head_repository="someone/sglang")) is None
    assert watched(POLICY, run(43, "f" * 40, "failure", head_repository=None)) is None  # its fork was deleted
    assert watched(POLICY, run(44, "f" * 40, "failure", head_repository="SGL-Project/SGLang")) is not None
    assert "not watched" in scope(POLICY, run(45, "b" * 40, "failure", branch="release/v1"), LOG, {}).reason
    assert "not watched" in scope(POLICY, run(46, "b" * 40, "failure", event="push"), LOG, {}).reason
    assert "nothing to bisect" in scope(POLICY, run(47, "b" * 40, "success"), LOG, {}).reason


def test_history_is_earlier_completed_runs_of_the_same_watch_from_this_repository_at_most_n():
    red = run(50, "b" * 40, "failure")
    runs = [
        red,
        run(49, "1" * 40, "failure", head_repository="someone/sglang"),  # a fork's
        run(48, "2" * 40, "success", event="pull_request"),
        run(47, "3" * 40, "success", event="workflow_dispatch"),
        run(46, "4" * 40, "failure", branch="release/v1"),
        *[run(45 - k, f"{k:040d}", "failure") for k in range(40)],
        run(60, "5" * 40, "failure"),  # a later run
    ]
    kept = earlier_runs(POLICY, POLICY.watch[0], red, runs)
    assert [r.id for r in kept] == list(range(45, 45 - POLICY.watch[0].history, -1))
    assert POLICY.watch[0].history == 30


def test_the_recorded_workflow_run_payload_maps_to_run_info():
    payload = json.loads((ROOT / "tests/fixtures/github/webhooks/workflow_run.completed.json").read_text())[
        "workflow_run"
    ]
    info = run_info(payload)
    assert (info.id, info.workflow_path, info.head_branch, info.event, info.conclusion) == (
        payload["id"],
        ".github/workflows/test.yml",
        "master",
        "repository_dispatch",
        "success",
    )
    assert info.head_repository == payload["head_repository"]["full_name"] == "octo-org/octo-repo"
    assert info.run_attempt == 1 and info.status == "completed" and info.updated_at.isoformat().startswith("2020-10-05")
    assert "concluded success" in scope(POLICY, info, LOG, {}).reason


def test_the_selector_and_the_failed_regex_find_the_test_in_a_timestamped_log():
    """Every line of a real job log starts with `2026-07-17T03:12:45.1242306Z `: the policy's `^\\s+` regexes match
    only once the stamp is taken off (bot.domain.joblog.plain, applied once by Results)."""
    assert not re.search(POLICY.results.log.failed, LOG)  # the raw log: `^\\s+` meets the timestamp
    [failure] = failed_tests(POLICY, LOG)
    assert failure.name == f"{CHECKOUT}/{KL_TEST}" and failure.metric == 0.0065 and failure.threshold == 0.002
    # the old selector's siblings fail: not the watched test
    mtp = partition_log([File("test/registered/models_e2e/test_qwen3_next_models_mtp.py", [False])])
    assert failed_tests(POLICY, mtp) == []


JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="nightly">
  <testcase classname="test/registered/models_e2e/test_qwen3_next_models.py" name="test_kl"><failure message="kl"/></testcase>
  <testcase classname="test_other.py" name="test_ok"/>
</testsuite></testsuites>"""  # noqa: E501  (a JUnit report test vector, kept verbatim)


def test_junit_and_metrics_artifacts_take_precedence_over_the_log():
    from bot.domain.ci_results import Results, junit_failures

    assert junit_failures([JUNIT, "<not xml"]) == ["test/registered/models_e2e/test_qwen3_next_models.py.test_kl"]
    results = Results.from_github(
        stamped("no useful log lines"),
        junit=(JUNIT,),
        metrics={"metric": {"name": "avg_kl_div", "value": 0.0071, "threshold": 0.002}},
    )
    [failure] = failed_tests(POLICY, results)
    assert failure.test.id == KL and failure.metric == 0.0071 and failure.threshold == 0.002
    # a malformed metrics artifact falls back to the log
    [failure] = failed_tests(POLICY, Results.from_github(LOG, metrics={"metric": "broken"}))
    assert failure.metric == 0.0065


def test_a_log_without_the_summary_line_is_a_job_that_died_not_a_test_failure():
    """`results.log.summary`: run_suite prints its summary once the suite ran; a red run without it died first
    (runner lost, OOM, a setup step), even when a FAILED line was printed before the end."""
    from bot.domain.ci_results import Results

    red = run(40, "b" * 40, "failure")
    history = {KL: [passed(38, "a" * 40)]}
    died = "".join(LOG.splitlines(keepends=True)[:12]) + stamped(
        f"✗ FAILED: {CHECKOUT}/{KL_TEST} returned exit code 1\n  {CHECKOUT}/{KL_TEST} (exit code 1)\n"
        "##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped"
    )
    result = scope(POLICY, red, died, history)
    assert isinstance(result, Unscoped) and "failed before its test summary" in result.reason
    assert "the job died" in result.reason
    assert scope(POLICY, red, LOG, history)[0].test.test.id == KL  # the same log with the summary: scoped
    assert isinstance(scope(POLICY, red, Results.from_github(died, junit=(JUNIT,)), history), list)  # JUnit
    from bot.domain.policy import LogPatterns

    no_summary = POLICY.model_copy(
        update={"results": POLICY.results.model_copy(update={"log": LogPatterns(failed=POLICY.results.log.failed)})}
    )
    assert isinstance(scope(no_summary, red, died, history), list)


def test_a_suite_that_ran_says_how_many_failed():
    red = run(40, "b" * 40, "failure")
    log = partition_log([File(OTHER, [False]), File("test/registered/x/test_y.py", [True])])
    reason = scope(POLICY, red, log, {}).reason
    assert "the suite ran: 1 of 2 tests failed" in reason and "names none of the watched tests" in reason


def test_ranged_keeps_only_earlier_runs():
    red = run(40, "b" * 40, "failure")
    [failure] = failed_tests(POLICY, LOG)
    assert isinstance(ranged(red, failure, [passed(41, "e" * 40)]), Unscoped)  # a later run is no GOOD
    assert ranged(red, failure, [passed(41, "e" * 40), passed(30, "a" * 40)]) == Scoped(
        failure, "a" * 40, "b" * 40, 30, 40, (), passed(30, "a" * 40)
    )
