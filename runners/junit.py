"""A JUnit XML report (what `pytest --junitxml`, Go's gotestsum, Maven's surefire write): a verdict per test case.

Each `<testcase>` is one test, named `classname.name` (`name` alone when the class name is empty); a `<failure>`
or `<error>` child makes it bad (how, runners.failure: an <error> errored), a `<skipped>` child a skip, none good.
A case reported twice (a re-run plugin) takes its last word. `<testsuites>` or a lone `<testsuite>` may be the
root; suites may nest.
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path

from runners import failure
from runners.spec import CaseResult

GOOD, BAD, SKIP = "good", "bad", "skip"


class ReportError(ValueError):
    """The report is missing or is not JUnit XML: the run said nothing about its tests (an infra result)."""


def read(path: Path, shown: str) -> tuple[CaseResult, ...]:
    """The cases of the report at `path` (`shown`: its name as the user gave it, for errors)."""
    try:
        root = ET.parse(path).getroot()
    except FileNotFoundError:
        raise ReportError(
            f"the JUnit report {shown} was not written (the command must write it there, "
            "e.g. `pytest --junitxml=$REVERT_BISECT_JUNIT`)"
        ) from None
    except (ET.ParseError, OSError) as exc:
        raise ReportError(f"the JUnit report {shown} is not XML: {exc}") from None
    if root.tag not in ("testsuites", "testsuite"):
        raise ReportError(f"the JUnit report {shown} is not JUnit XML: its root is <{root.tag}>")
    cases: dict[str, CaseResult] = {}
    for case in root.iter("testcase"):
        name = case.get("name")
        if not name:
            raise ReportError(f"the JUnit report {shown} has a <testcase> without a name")
        classname = case.get("classname") or ""
        test = f"{classname}.{name}" if classname else name
        cases.pop(test, None)  # the last word is the one kept, and it goes last
        cases[test] = CaseResult(test, _outcome(case), why=_why(case), failure=_failure(case))
    return tuple(cases.values())


def _outcome(case: ET.Element) -> str:
    if case.find("failure") is not None or case.find("error") is not None:
        return BAD
    if case.find("skipped") is not None:
        return SKIP
    return GOOD


def _failure(case: ET.Element) -> str | None:
    """An <error> is an error; a <failure> (pytest writes every failing test body as one) is an assertion unless its
    message names another exception (an out-of-memory error raised inside the test)."""
    if case.find("error") is not None:
        return failure.ERROR
    found = case.find("failure")
    return None if found is None else failure.of_text(f"{found.get('message') or ''}\n{found.text or ''}")


def _why(case: ET.Element) -> str | None:
    """What a failure, error or skip says of itself: its message, else its text's first line, else its tag."""
    for tag in ("failure", "error", "skipped"):
        found = case.find(tag)
        if found is not None:
            said = (found.get("message") or found.text or "").strip()
            return said.splitlines()[0][:200] if said else tag
    return None
