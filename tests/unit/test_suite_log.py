"""SGLang's run_suite report read from a job log as GitHub serves it (bot.domain.suite_log)."""

from bot.domain.joblog import plain
from bot.domain.suite_log import Retried, Timing, parse
from tests.support.suite_logs import CHECKOUT, KL_TEST, File, kl_output, partition_log

OTHER = "test/registered/models_e2e/test_qwen3_next_models_mtp.py"
FLAKY = "test/registered/attention/test_qwen3_next_deterministic.py"


def test_sections_timings_and_each_files_output_are_read():
    log = partition_log(
        [
            File(KL_TEST, [False], kl_output(0.0065)),
            File(OTHER, [True], ["ok"]),
            File(FLAKY, [False, True], ["score 0.71 < 0.72: accuracy"]),
        ]
    )
    report = parse(plain(log))
    assert report.summary == (2, 3)
    assert report.passed == (f"{CHECKOUT}/{OTHER}", f"{CHECKOUT}/{FLAKY}")
    assert report.failed == ((f"{CHECKOUT}/{KL_TEST}", "exit code 1"),)
    assert report.retried == (Retried(f"{CHECKOUT}/{FLAKY}", 2, "passed"),)
    assert report.timings == (Timing(KL_TEST, False, 250), Timing(OTHER, True, 250), Timing(FLAKY, True, 250))
    assert "avg_kl_div=0.0065 > threshold=0.002" in report.outputs[f"{CHECKOUT}/{KL_TEST}"]
    assert "avg_kl_div" not in report.outputs[f"{CHECKOUT}/{OTHER}"]
    assert report.listed


def test_the_raw_log_is_not_read_until_githubs_stamps_are_off():
    log = partition_log([File(KL_TEST, [True], kl_output(0.0004))])
    assert not parse(log).listed and parse(log).timings == ()  # every line behind a timestamp
    assert parse(plain(log)).timings == (Timing(KL_TEST, True, 250),)


def test_a_log_without_run_suite_has_no_report():
    report = parse("Running tests\nall good\nTest Summary: 1/1 passed\n")
    assert report.summary == (1, 1) and not report.listed and report.outputs == {}
    assert not parse("").listed


def test_a_broken_timings_line_is_skipped_not_fatal():
    text = (
        "========== TIMINGS BEGIN ==========\n"
        '{"file": "test/a.py", "passed": true, "elapsed": 3}\n'
        "{not json\n"
        '{"file": "test/b.py", "passed": "yes"}\n'
        "========== TIMINGS END ==========\n"
    )
    assert parse(text).timings == (Timing("test/a.py", True, 3.0),)
