"""What a run's jobs, log and artifacts say about a test: the one reader of CI's results, for the red run (which
watched tests failed, their cases and metric: `failed_tests`) and for the earlier runs (one job's word on a test:
`read_job`; the run's artifacts: `read_artifacts`; a run's readings combined: `combine`).

A job's log is read for the test: SGLang's run_suite report first (the TIMINGS block, which holds the result after
the runner's own retry, else the PASSED / FAILED sections, bot.domain.suite_log), else the policy's
`results.log.failed` regex; a job named by `tests[].jobs` whose log has no per-test report speaks for the test by
its conclusion; otherwise the test did not run there: no signal. A run's JUnit or metrics artifact, when the policy
names one and the run has it, is read instead. The metric comes from the test's own output in the log (run_suite's
Begin/End frame around the file), matched with `results.log.metric`. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from xml.etree import ElementTree

from bot.domain.case import assertion_line
from bot.domain.cases import failures
from bot.domain.joblog import plain
from bot.domain.policy import Direction, Policy, Test
from bot.domain.signals import JobInfo, Outcome, Reading
from bot.domain.suite_log import SuiteReport, parse


def named(test: Test, name: str) -> bool:
    return re.search(test.match, name) is not None


def for_name(test: Test, name: str) -> Test | None:
    """The test a failed (or retried) name stands for: `test` when it matches; for a selector, the test of that one
    file (bot.domain.policy.Test.selected), when the file lies below its cwd."""
    if not named(test, name):
        return None
    if not test.selects:
        return test
    file = test.selected_name(name)
    return test.selected(file) if file is not None else None


@dataclass(frozen=True)
class FailedTest:
    test: Test
    name: str  # as the log spells it
    metric: float | None = None
    threshold: float | None = None
    cases: tuple[str, ...] = ()  # the file's failed cases (bot.domain.cases): what each bisect step runs
    line: str = ""  # the failing check's line as the log printed it (bot.domain.case.assertion_line)


@dataclass(frozen=True)
class Results:
    """What a run left behind: its log, and the artifacts the policy names when the run has them.

    `log` is the text the policy's regexes read: a job log with GitHub's per-line timestamps and `##[...]`
    markers already taken off (bot.domain.joblog.plain, applied once by whoever reads the log from GitHub;
    `from_github` does it). A bare string given to the functions below is a raw job log: they take the
    decorations off it, once, before any regex."""

    log: str
    junit: tuple[str, ...] = ()  # JUnit XML documents
    metrics: dict | None = None  # a metrics JSON: {"metric": {"name", "value", "threshold"}}
    # run_suite's report of `log`, when whoever read the log parsed it already (bot.domain.run_reading): not again
    report: SuiteReport | None = field(default=None, compare=False, repr=False)

    @classmethod
    def from_github(cls, raw_log: str, junit: tuple[str, ...] = (), metrics: dict | None = None) -> Results:
        return cls(plain(raw_log), junit, metrics)

    def suite(self) -> SuiteReport:
        """run_suite's report of the log (bot.domain.suite_log)."""
        return self.report if self.report is not None else parse(self.log)


def as_results(results: Results | str) -> Results:
    return Results.from_github(results) if isinstance(results, str) else results


def _testcases(documents: Sequence[str]) -> Iterator[tuple[str, ElementTree.Element]]:
    """Every <testcase> of the JUnit documents that parse, with its full name (`classname.name`, else `name`)."""
    for text in documents:
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError:
            continue
        for case in root.iter("testcase"):
            name = case.get("name", "")
            yield (f"{case.get('classname')}.{name}" if case.get("classname") else name), case


def _failed(case: ElementTree.Element) -> bool:
    return case.find("failure") is not None or case.find("error") is not None


def junit_failures(documents: Sequence[str]) -> list[str]:
    """`classname.name` (and `name`) of every testcase with a <failure> or <error>."""
    return [full for full, case in _testcases(documents) if _failed(case)]


def _metric_from_json(data: dict | None) -> dict | None:
    metric = (data or {}).get("metric")
    if isinstance(metric, dict) and isinstance(metric.get("value"), (int, float)):
        return {"value": metric["value"], "threshold": metric.get("threshold")}
    return None


def _frames(test: Test, report: SuiteReport) -> list[str]:
    """The test file's own output in run_suite's report: the Begin/End frames of the files it matches, both
    attempts."""
    return [text for file, text in report.outputs.items() if named(test, file)]


def _own_output(test: Test, report: SuiteReport, log: str) -> str:
    """The test file's own output in the log (its frames in the log's report), else the whole log."""
    frames = _frames(test, report)
    return "\n".join(frames) if frames else log


def failed_tests(policy: Policy, results: Results | str) -> list[FailedTest]:
    """Watched tests that failed (JUnit when the run has it, else the log), each with its failed cases and its
    metric reading: the metrics artifact when present, else the failing case's own (the first failure that printed
    one), else the log's last match."""
    results = as_results(results)
    log = results.log
    report = results.suite()
    patterns = policy.results.log
    if results.junit:  # `classname.name`, and the classname alone (a file's path, for a regex anchored at `.py$`)
        names = [n for full in junit_failures(results.junit) for n in (full, full.rsplit(".", 1)[0])]
    else:
        names = [m.group("test") for m in re.finditer(patterns.failed, log)] if patterns.failed else []
    readings = [m.groupdict() for m in re.finditer(patterns.metric, log)] if patterns.metric else []
    artifact = _metric_from_json(results.metrics)
    out: list[FailedTest] = []
    for name in dict.fromkeys(names):
        for test in (t for t in map(lambda t: for_name(t, name), policy.tests) if t is not None):
            if all(f.test.id != test.id for f in out):
                found = failures(_own_output(test, report, log)) if test.probe.name != "command" else []
                own = [
                    m.groupdict() for f in found for m in re.finditer(patterns.metric or "(?!)", f.block) if test.metric
                ][:1]
                reading = [artifact] if artifact is not None else own or readings[-1:]
                value = threshold = None
                if test.metric and reading:
                    value = float(reading[0]["value"])
                    given = reading[0].get("threshold")
                    threshold = float(given) if given is not None else test.metric.threshold
                prefer = None if value is None else repr(value)  # the case whose reading is reported
                said = assertion_line([*(f.block for f in found), _own_output(test, report, log)], prefer) or ""
                out.append(FailedTest(test, name, value, threshold, tuple(f.case for f in found), said))
                break
    return out


def _metric(policy: Policy, text: str) -> float | None:
    pattern = policy.results.log.metric
    found = list(re.finditer(pattern, text)) if pattern else []
    try:
        return float(found[-1].group("value")) if found else None
    except (IndexError, ValueError):
        return None


def read_job(policy: Policy, test: Test, log: str, job: JobInfo, report: SuiteReport | None = None) -> Reading:
    """The test's result in one job's log, the log already undone of GitHub's decorations (joblog.plain); `report`:
    run_suite's report of that log when it is parsed already."""
    report = report if report is not None else parse(log)
    where = f"job {job.name!r}"
    output = next(iter(_frames(test, report)), None)
    retried = any(named(test, r.file) and r.result == "passed" for r in report.retried)
    timings = [t for t in report.timings if named(test, t.file)]
    passed: bool | None
    if timings:
        passed = timings[-1].passed
    elif any(named(test, file) for file, _ in report.failed):
        passed = False
    elif any(named(test, file) for file in report.passed):
        passed = True
    elif report.listed:
        passed = None  # run_suite listed what it ran, and this test is not among it (another partition's)
    else:
        pattern = policy.results.log.failed
        names = [m.group("test") for m in re.finditer(pattern, log)] if pattern else []
        if any(named(test, n) for n in names):
            passed = False
        elif test.jobs is not None and job.conclusion in ("success", "failure"):
            passed = job.conclusion == "success"
            where += f" ({job.conclusion}, no per-test report)"
        else:
            passed = None
    if passed is None:
        return Reading(Outcome.NONE, f"{test.id} did not run in {where}", job=job.name)
    metric = None
    if output is not None and not passed:  # the failing case's own reading (its unittest report), not the file's last
        metric = next((m for f in failures(output) if (m := _metric(policy, f.block)) is not None), None)
    if metric is None and output is not None:
        metric = _metric(policy, output)
    if metric is None and not passed and output is None:
        metric = _metric(policy, log)
    outcome = Outcome.PASSED if passed else Outcome.FAILED
    return Reading(outcome, f"{outcome} in {where}", metric, retried and passed, job.name)


def _junit(test: Test, documents: Sequence[str]) -> bool | None:
    verdict = None
    for full, case in _testcases(documents):
        if not any(named(test, n) for n in (full, case.get("classname") or "", case.get("name", ""))):
            continue
        if case.find("skipped") is not None:
            continue
        verdict = False if _failed(case) else verdict if verdict is False else True
    return verdict


def read_artifacts(test: Test, junit: Sequence[str], metrics: dict | None) -> Reading | None:
    """The test's result in a run's JUnit documents, else its metrics JSON ({"metric": {"value", "threshold"}});
    None when neither speaks of it (a benchmark's metrics JSON without a threshold does not: no cut to read it by)."""
    verdict = _junit(test, junit)
    metric = (metrics or {}).get("metric")
    value = metric.get("value") if isinstance(metric, dict) else None
    value = float(value) if isinstance(value, (int, float)) else None
    if verdict is not None:
        outcome = Outcome.PASSED if verdict else Outcome.FAILED
        return Reading(outcome, f"{outcome} in the run's JUnit report", value)
    if value is not None and test.metric is not None:
        threshold = metric.get("threshold") if isinstance(metric, dict) else None
        limit = float(threshold) if isinstance(threshold, (int, float)) else test.metric.threshold
        if limit is None:  # a benchmark: no cut makes one reading a pass or a failure; the jobs speak for the run
            return None
        worse = value > limit if test.metric.direction is Direction.HIGHER_IS_WORSE else value < limit
        outcome = Outcome.FAILED if worse else Outcome.PASSED
        return Reading(outcome, f"{outcome} in the run's metrics ({test.metric.name}={value:g})", value)
    return None


def combine(readings: Sequence[Reading], none_why: str = "no job ran it") -> Reading:
    """One run's word on the test from its jobs' readings: a failure anywhere, else a pass, else no signal."""
    for outcome in (Outcome.FAILED, Outcome.PASSED):
        found = [r for r in readings if r.outcome is outcome]
        if found:
            return found[0]
    whys = "; ".join(dict.fromkeys(r.why for r in readings)) or none_why
    return Reading(Outcome.NONE, whys)
