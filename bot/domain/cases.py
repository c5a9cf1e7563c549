"""The test cases a red run failed, read from one test file's output in CI's log: what each bisect step runs.

CI runs SGLang's test files as `python3 <file> -f` (unittest, no -v): a failure shows only in unittest's report,

    ======================================================================
    FAIL: test_x (__main__.TestClass.test_x)        (Python < 3.11: `(__main__.TestClass)`)
    ----------------------------------------------------------------------
    Traceback ... AssertionError: avg_kl_div=0.0065 > threshold=0.002 for ...

`ERROR: setUpClass (__main__.TestClass)` fails the class as a whole (its server did not start): the case is the
class. A name unittest could not load (`unittest.loader._FailedTest`) is no case. pytest's short summary names node
ids (`FAILED path/test_x.py::TestClass::test_x - ...`): the case is the part after the file. Each failure keeps its
own block of the log, so its metric is the failing case's, never the log's last reading. Pure.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

_RULE = re.compile(r"^(?:={70}|-{70})\s*$", re.M)
_UNITTEST = re.compile(r"^(?P<kind>FAIL|ERROR): (?P<method>\w+) \((?P<where>[\w.]+)\)\s*$", re.M)
_PYTEST = re.compile(r"^(?:FAILED|ERROR) (?P<node>\S+?\.py)::(?P<case>\S+)(?: - (?P<msg>.*))?$", re.M)
_PYTEST_SECTION = re.compile(r"^_{3,} (?P<name>\S+?)(?: \[\S+\])? _{3,}\s*$", re.M)
_BANNER = re.compile(r"^={3,} .* ={3,}\s*$", re.M)


@dataclass(frozen=True)
class Failure:
    case: str  # Class.method, Class (its setUpClass failed), or a pytest node id below the file
    block: str  # its part of the log: the traceback and assertion message


def _case(method: str, where: str) -> str | None:
    if where.startswith("unittest.loader._FailedTest"):
        return None
    if method in ("setUpClass", "tearDownClass", "setUpModule", "tearDownModule"):
        return where.rsplit(".", 1)[-1] if "Class" in method else None
    if where.endswith("." + method):
        where = where[: -len(method) - 1]
    return f"{where.rsplit('.', 1)[-1]}.{method}"


def failures(text: str) -> list[Failure]:
    """The failed cases of one test file's output (unittest's report, else pytest's summary), in order, once each."""
    found: dict[str, str] = {}
    for m in _UNITTEST.finditer(text):
        case = _case(m.group("method"), m.group("where"))
        if case is None:
            continue
        body = text[m.end() :]
        rules = [r for r in _RULE.finditer(body) if r.start() > 0]
        # the block ends at the next `====` rule (the next failure) or the `----` before `Ran N tests`
        end = next(
            (r.start() for r in rules if body[r.start()] == "=" or "\nRan " in body[r.end() : r.end() + 6]), None
        )
        found[case] = found.get(case, "") + body[: end if end is not None else len(body)]
    if found:
        return [Failure(c, b) for c, b in found.items()]
    sections = {m.group("name").replace(".", "::"): m for m in _PYTEST_SECTION.finditer(text)}
    for m in _PYTEST.finditer(text):
        case = m.group("case")
        block = m.group("msg") or ""
        if (section := sections.get(case.split("[", 1)[0])) is not None:
            # up to the next test's section or pytest's next `=== ... ===` banner (the short summary quotes others)
            ends = [
                x.start()
                for x in (_PYTEST_SECTION.search(text, section.end()), _BANNER.search(text, section.end()))
                if x
            ]
            block = text[section.end() : min(ends, default=len(text))] + "\n" + block
        found.setdefault(case, block)
    return [Failure(c, b) for c, b in found.items()]
