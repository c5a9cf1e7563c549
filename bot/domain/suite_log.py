"""SGLang's suite runner output, read: which test files passed, failed, were retried, and each file's own output.

`python/sglang/test/ci/ci_utils.py` (`run_unittest_files`, called by `test/run_suite.py`) prints, through a logger
whose format is the bare message, after the files ran:

    Test Summary: <passed>/<total> passed
    [Retries: <n> test(s) were retried]
    ============================================================
    ✓ PASSED:
      <file>
    <blank>
    ✗ FAILED:
      <file> (<reason>)                     reason: `exit code 1`, `timeout after 1800s`
    <blank>
    ↻ RETRIED:
      <file> (<n> attempts, passed|failed|timeout)
    ============================================================
    ========== TIMINGS BEGIN ==========
    {"file": "<repo-relative path>", "passed": true|false, "elapsed": <s>}   one per file that ran
    ========== TIMINGS END ==========

`<file>` in the sections is the path run_suite ran (absolute: `/…/sglang/test/registered/…/test_x.py`); the TIMINGS
block names it relative to the repository (`test/registered/…/test_x.py`) and holds the result after the runner's
own retry. While a file runs, its output sits between `Begin (<i>/<n>):` + `python3 <full path>` and
`End (<i>/<n>):` + `filename='<file>', elapsed=…`, each marker line framed by `.` lines.

`parse` reads a log already undone of GitHub's decorations (bot.domain.joblog.plain). Pure.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

SUMMARY = re.compile(r"^Test Summary: (?P<passed>\d+)/(?P<total>\d+) passed\s*$")
SECTIONS = {"✓ PASSED:": "passed", "✗ FAILED:": "failed", "↻ RETRIED:": "retried"}
ENTRY = re.compile(r"^  (?P<file>\S.*?)(?: \((?P<note>[^()]*)\))?\s*$")
RETRY_NOTE = re.compile(r"^(?P<attempts>\d+) attempts, (?P<result>passed|failed|timeout)$")
TIMINGS_BEGIN, TIMINGS_END = "========== TIMINGS BEGIN ==========", "========== TIMINGS END =========="
BEGIN = re.compile(r"^Begin \((?P<i>\d+)/(?P<n>\d+)\):\s*$")
END = re.compile(r"^End \((?P<i>\d+)/(?P<n>\d+)\):\s*$")
RUN_LINE = re.compile(r"^python3 (?P<path>\S+\.py)")


@dataclass(frozen=True)
class Retried:
    file: str
    attempts: int
    result: str  # passed | failed | timeout


@dataclass(frozen=True)
class Timing:
    file: str  # repo-relative
    passed: bool
    elapsed: float | None


@dataclass(frozen=True)
class SuiteReport:
    """One run_suite invocation's report (or several, merged, when a job ran the runner more than once)."""

    summary: tuple[int, int] | None = None  # (passed, total)
    passed: tuple[str, ...] = ()
    failed: tuple[tuple[str, str], ...] = ()  # (file, reason)
    retried: tuple[Retried, ...] = ()
    timings: tuple[Timing, ...] = ()
    outputs: dict[str, str] = field(default_factory=dict)  # file as run (absolute) -> its output

    @property
    def listed(self) -> bool:
        """Did the log list the files run_suite ran (its PASSED / FAILED sections or its TIMINGS block)?"""
        return bool(self.passed or self.failed or self.timings)


def _timing(line: str) -> Timing | None:
    try:
        data = json.loads(line)
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("file"), str) or not isinstance(data.get("passed"), bool):
        return None
    elapsed = data.get("elapsed")
    return Timing(data["file"], data["passed"], float(elapsed) if isinstance(elapsed, (int, float)) else None)


def _outputs(lines: list[str]) -> dict[str, str]:
    """Each file's output: from its `Begin (i/n):` / `python3 <path>` lines to its `End (i/n):` line."""
    out: dict[str, str] = {}
    current: str | None = None
    body: list[str] = []
    for k, line in enumerate(lines):
        if BEGIN.match(line) and k + 1 < len(lines) and (run := RUN_LINE.match(lines[k + 1])):
            current, body = run["path"], []
            continue
        if current is not None and END.match(line):
            out[current] = out.get(current, "") + "\n".join(body)  # a retried file: both attempts' output
            current = None
            continue
        if current is not None:
            body.append(line)
    if current is not None:  # the job died inside the file
        out[current] = out.get(current, "") + "\n".join(body)
    return out


def parse(log: str) -> SuiteReport:
    lines = log.split("\n")
    summary = None
    passed: list[str] = []
    failed: list[tuple[str, str]] = []
    retried: list[Retried] = []
    timings: list[Timing] = []
    section: str | None = None
    in_timings = False
    for line in lines:
        stripped = line.strip()
        if in_timings:
            if stripped == TIMINGS_END:
                in_timings = False
            elif (timing := _timing(stripped)) is not None:
                timings.append(timing)
            continue
        if stripped == TIMINGS_BEGIN:
            in_timings, section = True, None
            continue
        if found := SUMMARY.match(stripped):
            summary, section = (int(found["passed"]), int(found["total"])), None
            continue
        if stripped in SECTIONS:
            section = SECTIONS[stripped]
            continue
        entry = ENTRY.match(line) if section else None
        if entry is None:
            section = None  # a blank line, the `====` rule or anything else ends a section
            continue
        note = entry["note"] or ""
        if section == "passed":
            passed.append(stripped)
        elif section == "failed":
            failed.append((entry["file"], note))
        elif (retry := RETRY_NOTE.match(note)) is not None:
            retried.append(Retried(entry["file"], int(retry["attempts"]), retry["result"]))
    return SuiteReport(summary, tuple(passed), tuple(failed), tuple(retried), tuple(timings), _outputs(lines))


def merge(reports: Iterable[SuiteReport]) -> SuiteReport:
    """Several logs' reports as one (a run's failed jobs, read together): their sections and timings in order, the
    last summary, and a file's output in two of them joined, as one log holding both would be parsed -- except that a
    job that died inside a file keeps that file's output (in one log, the next job's first `Begin` would drop it)."""
    summary = None
    passed: list[str] = []
    failed: list[tuple[str, str]] = []
    retried: list[Retried] = []
    timings: list[Timing] = []
    outputs: dict[str, str] = {}
    for report in reports:
        summary = report.summary if report.summary is not None else summary
        passed += report.passed
        failed += report.failed
        retried += report.retried
        timings += report.timings
        for file, text in report.outputs.items():
            outputs[file] = outputs.get(file, "") + text
    return SuiteReport(summary, tuple(passed), tuple(failed), tuple(retried), tuple(timings), outputs)
