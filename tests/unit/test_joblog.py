"""bot.domain.joblog.plain: a job log as GitHub writes it, read as the policy's regexes expect."""

import re

from bot.domain.joblog import plain

# The layout of GET /repos/{o}/{r}/actions/jobs/{id}/logs (REALITY.md, "GitHub: logs"): a byte-order mark,
# every line behind `<UTC time, 7 fractional digits>Z `, a `run:` step's header inside ##[group]/##[endgroup],
# its output after, the failure as ##[error].
REAL = (
    "\ufeff2026-07-17T03:12:40.0000001Z Current runner version: '2.329.0'\n"
    "2026-07-17T03:12:40.5512345Z ##[group]Run python3 -m runners.step --spec-env STEP_SPEC\n"
    "2026-07-17T03:12:40.5513001Z python3 -m runners.step --spec-env STEP_SPEC\n"
    "2026-07-17T03:12:40.5513402Z shell: /usr/bin/bash -e {0}\n"
    "2026-07-17T03:12:40.5513800Z ##[endgroup]\n"
    "2026-07-17T03:12:45.1234567Z ✗ FAILED:\n"
    "2026-07-17T03:12:45.1234999Z   /work/test/test_qwen3_next_models.py (exit code 1)\n"
    "2026-07-17T03:12:45.1235100Z \n"
    "2026-07-17T03:12:45.1290000Z ##[error]Process completed with exit code 1.\n"
)


def test_plain_takes_off_the_stamps_and_markers_and_keeps_each_lines_text():
    assert plain(REAL).split("\n") == [
        "Current runner version: '2.329.0'",
        "Run python3 -m runners.step --spec-env STEP_SPEC",
        "python3 -m runners.step --spec-env STEP_SPEC",
        "shell: /usr/bin/bash -e {0}",
        "✗ FAILED:",
        "  /work/test/test_qwen3_next_models.py (exit code 1)",  # its two leading spaces kept
        "",
        "Process completed with exit code 1.",
        "",
    ]


def test_a_regex_anchored_at_the_line_start_matches_only_after_plain():
    failed = r"(?m)^\s+(?P<test>\S+\.py) \("
    assert re.search(failed, REAL) is None
    assert [m.group("test") for m in re.finditer(failed, plain(REAL))] == ["/work/test/test_qwen3_next_models.py"]


def test_a_log_without_decorations_is_unchanged_and_plain_is_idempotent():
    local = "Test Summary: 1/2 passed\n✗ FAILED:\n  test_x.py (exit code 1)\n"
    assert plain(local) == local
    assert plain(plain(REAL)) == plain(REAL)


def test_only_a_stamp_at_the_line_start_goes_and_crlf_lines_are_read_too():
    text = "2026-07-17T03:12:45.1234567Z seen at 2026-07-17T03:12:45.1234567Z here\r\n2026-07-17T03:12:46.0000000Z"
    assert plain(text) == "seen at 2026-07-17T03:12:45.1234567Z here\n"
    assert plain("##[warning]No files were found") == "No files were found"
    assert plain("a line mentioning ##[error] in the middle") == "a line mentioning ##[error] in the middle"
