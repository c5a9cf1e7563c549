"""Scoping a red scheduled run from its log, with SGLang's policy and run_suite's log format."""

import json
from pathlib import Path

from bot.adapters.policy_files import load
from bot.domain.scope import RunInfo, Scoped, Unscoped, failed_tests, scope

ROOT = Path(__file__).resolve().parents[2]
POLICY = load(ROOT / "policies" / "sglang.yaml")
# A job log as GitHub serves it (GET .../actions/jobs/{id}/logs): every line stamped with a 7-digit-fraction
# UTC time, the step's script and env inside ##[group]Run ... ##[endgroup], its output after, the failure
# as ##[error] (REALITY.md, "GitHub: logs").
LOG = """\ufeff2026-11-29T03:11:58.0181553Z Current runner version: '2.329.0'
2026-11-29T03:11:58.0213872Z ##[group]Run python3 run_suite.py --suite per-commit-4-gpu-h100
2026-11-29T03:11:58.0214550Z python3 run_suite.py --suite per-commit-4-gpu-h100
2026-11-29T03:11:58.0215111Z shell: /usr/bin/bash -e {0}
2026-11-29T03:11:58.0215397Z env:
2026-11-29T03:11:58.0215702Z   CUDA_VISIBLE_DEVICES: 0,1,2,3
2026-11-29T03:11:58.0216011Z ##[endgroup]
2026-11-29T03:12:01.4471230Z [2026-11-29 03:12:01] Running test_qwen3_next_decode_cache_hit.py
2026-11-29T03:12:45.1234567Z AssertionError: avg_kl_div=0.0065 > threshold=0.002 for Qwen/Qwen3-Next decode_cache_hit
2026-11-29T03:12:45.1240012Z ============================================================
2026-11-29T03:12:45.1240388Z Test Summary: 11/12 passed
2026-11-29T03:12:45.1240731Z ============================================================
2026-11-29T03:12:45.1241049Z ✓ PASSED:
2026-11-29T03:12:45.1241362Z   test_other.py
2026-11-29T03:12:45.1241680Z
2026-11-29T03:12:45.1241994Z ✗ FAILED:
2026-11-29T03:12:45.1242306Z   test_qwen3_next_decode_cache_hit.py (exit code 1)
2026-11-29T03:12:45.1398000Z ##[error]Process completed with exit code 1.
2026-11-29T03:12:45.1490123Z Cleaning up orphan processes
"""


def stamped(text: str) -> str:
    """`text` as GitHub's runner writes it into a job log: each line behind a 7-digit-fraction UTC stamp."""
    lines = text.removesuffix("\n").split("\n")
    return "".join(f"2026-11-29T03:12:{i % 60:02d}.{1234567 + i:07d}Z {line}\n" for i, line in enumerate(lines))


def run(id, sha, conclusion, branch="main", event="schedule"):
    return RunInfo(id, "PR Test", ".github/workflows/pr-test.yml", branch, sha, event, conclusion)


def test_a_red_nightly_scopes_to_last_green_run():
    red = run(40, "b" * 40, "failure")
    history = [red, run(39, "c" * 40, "failure"), run(38, "a" * 40, "success"), run(30, "9" * 40, "success")]
    result = scope(POLICY, red, LOG, history)
    assert result == [Scoped(failed_tests(POLICY, LOG)[0], "a" * 40, "b" * 40, 38, 40)]
    assert result[0].test.metric == 0.0065 and result[0].test.threshold == 0.002
    assert result[0].test.test.id == "qwen3-next-decode-cache-hit"


def test_unscopable_failures_say_why():
    red = run(40, "b" * 40, "failure")
    assert "no earlier green run" in scope(POLICY, red, LOG, [red]).reason
    assert (
        "names none of the watched tests"
        in scope(POLICY, red, stamped("Test Summary: 0/1 passed\n✗ FAILED:\n  test_x.py (exit code 1)\n"), [red]).reason
    )
    assert "not watched" in scope(POLICY, run(41, "b" * 40, "failure", branch="release/v1"), LOG, []).reason
    assert "not watched" in scope(POLICY, run(42, "b" * 40, "failure", event="pull_request"), LOG, []).reason
    assert "nothing to bisect" in scope(POLICY, run(43, "b" * 40, "success"), LOG, []).reason
    assert "a flake" in scope(POLICY, red, LOG, [run(39, "b" * 40, "success")]).reason
    assert isinstance(scope(POLICY, red, LOG, [red]), Unscoped)


def test_the_recorded_workflow_run_payload_maps_to_run_info():
    payload = json.loads((ROOT / "tests/fixtures/github/webhooks/workflow_run.completed.json").read_text())[
        "workflow_run"
    ]
    info = RunInfo(
        payload["id"],
        payload["name"],
        payload["path"],
        payload["head_branch"],
        payload["head_sha"],
        payload["event"],
        payload["conclusion"],
    )
    assert "concluded success" in scope(POLICY, info, LOG, []).reason


JUNIT = """<?xml version="1.0"?>
<testsuites><testsuite name="nightly">
  <testcase classname="test_qwen3_next_decode_cache_hit.py" name="test_kl"><failure message="avg_kl_div too high"/></testcase>
  <testcase classname="test_other.py" name="test_ok"/>
</testsuite></testsuites>"""  # noqa: E501  (a JUnit report test vector, kept verbatim)


def test_junit_and_metrics_artifacts_take_precedence_over_the_log():
    from bot.domain.scope import Results, junit_failures

    assert junit_failures([JUNIT, "<not xml"]) == ["test_qwen3_next_decode_cache_hit.py.test_kl"]
    results = Results(
        stamped("no useful log lines"),
        junit=(JUNIT,),
        metrics={"metric": {"name": "avg_kl_div", "value": 0.0071, "threshold": 0.002}},
    )
    [failure] = failed_tests(POLICY, results)
    assert failure.test.id == "qwen3-next-decode-cache-hit" and failure.metric == 0.0071 and failure.threshold == 0.002
    # a malformed metrics artifact falls back to the log
    [failure] = failed_tests(POLICY, Results(LOG, metrics={"metric": "broken"}))
    assert failure.metric == 0.0065


def test_a_log_without_the_summary_line_is_a_job_that_died_not_a_test_failure():
    """`results.log.summary`: run_suite prints its summary once the suite ran; a red run without it died first
    (runner lost, OOM, a setup step), even when a FAILED line was printed before the end."""
    from bot.domain.scope import Results

    red, green = run(40, "b" * 40, "failure"), run(38, "a" * 40, "success")
    died = "".join(LOG.splitlines(keepends=True)[:8]) + stamped(  # up to the test's start
        "✗ FAILED:\n  test_qwen3_next_decode_cache_hit.py (exit code 1)\n"
        "##[error]The runner has received a shutdown signal. This can happen when the runner service is stopped"
    )
    result = scope(POLICY, red, died, [red, green])
    assert (
        isinstance(result, Unscoped)
        and "failed before its test summary" in result.reason
        and "the job died" in result.reason
    )
    # the same log with the summary is a test failure, scoped
    assert scope(POLICY, red, LOG, [red, green])[0].test.test.id == "qwen3-next-decode-cache-hit"
    # JUnit results are read instead of the log: no summary line needed
    assert isinstance(scope(POLICY, red, Results(died, junit=(JUNIT,)), [red, green]), list)
    # a policy without the key scopes the FAILED lines as before
    from bot.domain.policy import LogPatterns

    no_summary = POLICY.model_copy(
        update={"results": POLICY.results.model_copy(update={"log": LogPatterns(failed=POLICY.results.log.failed)})}
    )
    assert isinstance(scope(no_summary, red, died, [red, green]), list)


def test_a_suite_that_ran_says_how_many_failed():
    red = run(40, "b" * 40, "failure")
    log = stamped("Test Summary: 9/12 passed\n✗ FAILED:\n  test_x.py (exit code 1)\n")
    reason = scope(POLICY, red, log, [red]).reason
    assert "the suite ran: 3 of 12 tests failed" in reason and "names none of the watched tests" in reason


def test_the_policy_regex_finds_a_failed_test_in_a_timestamped_log():
    """Every line of a real job log starts with `2026-11-29T03:12:45.1242306Z `: the policy's `^\\s+` regexes match
    only once the stamp is taken off (bot.domain.joblog.plain, applied once by Results)."""
    import re

    assert not re.search(POLICY.results.log.failed, LOG)  # the raw log: `^\\s+` meets the timestamp
    [failure] = failed_tests(POLICY, LOG)
    assert failure.name == "test_qwen3_next_decode_cache_hit.py" and failure.metric == 0.0065
    red = run(40, "b" * 40, "failure")
    [scoped] = scope(POLICY, red, LOG, [red, run(38, "a" * 40, "success")])
    assert scoped.test.test.id == "qwen3-next-decode-cache-hit" and (scoped.good, scoped.bad) == ("a" * 40, "b" * 40)
