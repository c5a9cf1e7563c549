"""The repository's own test, run as its CI runs it, and its verdict read per test case from its own output.

    unittest: python3 <file> -v [args] Class.method ...      from `cwd` (SGLang: test/, run_suite's `python3 <file>`)
    pytest:   python3 -m pytest -v -rA [args] <file>::Class::method ...

The test is the commit's: its file, its flags, its fixtures. What the runner adds is `-v` (unittest's and pytest's
per-test lines, which do not change what runs) and the selection of the cases that failed on the red run. A file or
class the commit does not have makes the commit untestable for it (exit 125 and why), unless the policy transplants
the file from another commit (`transplant_from`). Pure apart from reading the tree and `git show`.
"""

from __future__ import annotations

import ast
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runners import failure
from runners.spec import CaseResult, Needs, TestRun

GOOD, BAD, SKIP, INFRA = "good", "bad", "skip", "infra"


@dataclass(frozen=True)
class Plan:
    argv: list[str]
    cwd: Path
    missing: str | None = None  # why this commit cannot run the test (untestable), else None
    transplanted: bool = False


def _top_level_names(source: str) -> set[str] | None:
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return None  # the commit's own file does not parse: running it says so (a failure of the commit)
    names = set()
    for node in tree.body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            names.update(t.id for t in node.targets if isinstance(t, ast.Name))
    return names


def case_owner(run: TestRun, case: str) -> str:
    """The top-level name a case lives under: `Class` of `Class.method` (unittest), of `Class::method` (pytest)."""
    return re.split(r"::|\.", case, maxsplit=1)[0].split("[", 1)[0]


def absent(run: TestRun, source: str | None) -> str | None:
    """Why `source` (the test file's text, None when the file is missing) cannot run the selected cases."""
    if source is None:
        return f"{_path(run)} does not exist at this commit"
    names = _top_level_names(source)
    if names is None:
        return None
    lacking = [c for c in run.cases if case_owner(run, c) not in names]
    if lacking:
        return f"{_path(run)} has no {', '.join(sorted({case_owner(run, c) for c in lacking}))} at this commit"
    return None


def _path(run: TestRun) -> str:
    return str(Path(run.cwd) / run.file) if run.cwd not in ("", ".") else run.file


def _git_show(tree: Path, rev: str, path: str) -> str | None:
    done = subprocess.run(["git", "show", f"{rev}:{path}"], cwd=tree, capture_output=True, text=True)
    return done.stdout if done.returncode == 0 else None


def argv_of(run: TestRun) -> list[str]:
    if run.framework == "pytest":
        targets = [f"{run.file}::{c}" for c in run.cases] or [run.file]
        return [run.python, "-m", "pytest", "-v", "-rA", *run.args, *targets]
    return [run.python, run.file, "-v", *run.args, *run.cases]


def plan(run: TestRun, tree: Path) -> Plan:
    """What runs at the commit checked out in `tree`; a missing file or class is taken from `run.transplant_from`
    (written into the tree) when the policy transplants and that commit has it."""
    cwd = tree / run.cwd
    target = cwd / run.file
    source = target.read_text(errors="replace") if target.is_file() else None
    why = absent(run, source)
    moved = False
    if why and run.transplant_from:
        other = _git_show(tree, run.transplant_from, _path(run))
        if other is not None and absent(run, other) is None:
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(other)
            why, moved = None, True
        else:
            why += f" (nor can {run.transplant_from[:12]}'s copy stand in)"
    return Plan(argv_of(run), cwd, why, moved)


def env_of(run: TestRun, needs: Needs | None = None) -> dict[str, str]:
    """What the step adds to the runner's environment: CI's variables for the test, unbuffered output (the test's
    own lines stay in order with unittest's), and the hub offline when the test needs models from the cache."""
    env = {"PYTHONUNBUFFERED": "1", **dict(run.env)}
    if needs is not None and (needs.hf_models or needs.hf_datasets):
        env["HF_HUB_OFFLINE"] = "1"
    if needs is not None and needs.hf_datasets:
        env["HF_DATASETS_OFFLINE"] = "1"
    return env


# -- reading the output --

_UT_START = re.compile(r"^(?P<method>\w+) \((?P<where>[\w.]+)\)(?= \.\.\. |\n)", re.M)
_UT_PROBLEM = re.compile(r"^(?P<kind>FAIL|ERROR): (?P<method>\w+) \((?P<where>[\w.]+)\)$", re.M)
_UT_END = re.compile(r"^(?:={70}|-{70})$", re.M)
_UT_RAN = re.compile(r"^Ran \d+ tests? in ", re.M)
_UT_SKIPPED = re.compile(r" \.\.\. skipped ", re.M)
_FAILED_LOAD = "unittest.loader._FailedTest"
ENDED = "did not run: the test process ended before it"


def _ut_name(method: str, where: str) -> str:
    """`Class.method` from unittest's `method (module.Class.method)` (3.11+) or `method (module.Class)`."""
    if where.endswith("." + method):
        where = where[: -len(method) - 1]
    return f"{where.rsplit('.', 1)[-1]}.{method}"


@dataclass(frozen=True)
class _Seen:
    started: dict[str, str]  # Class.method -> its stretch of the output
    failed: dict[str, tuple[str, str]]  # Class.method -> how it failed (runners.failure), and its last line
    class_errors: dict[str, str]  # Class -> the error line of its setUpClass/tearDownClass
    not_loaded: dict[str, str]  # the last part of a name unittest could not load -> why
    skipped: set[str]
    reported: bool  # unittest's `Ran N tests` line: the run got as far as its report


def _last_line(text: str) -> str:
    lines = [ln.strip() for ln in text.strip().splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def _unittest(output: str) -> _Seen:
    starts = list(_UT_START.finditer(output))
    report = _UT_END.search(output, starts[-1].end()) if starts else _UT_END.search(output)
    stop = report.start() if report else len(output)
    started, skipped, class_errors, not_loaded = {}, set(), {}, {}
    for i, m in enumerate(starts):
        end = starts[i + 1].start() if i + 1 < len(starts) else stop
        method, where = m.group("method"), m.group("where")
        if where.startswith(_FAILED_LOAD):
            continue
        if method in ("setUpClass", "tearDownClass"):
            continue
        name = _ut_name(method, where)
        started[name] = output[m.start() : end]
        if _UT_SKIPPED.search(output[m.start() : end]):
            skipped.add(name)
    failed = {}
    problems = list(_UT_PROBLEM.finditer(output))
    for i, m in enumerate(problems):
        body_end = problems[i + 1].start() if i + 1 < len(problems) else len(output)
        body = output[m.end() : body_end].split("\n" + "-" * 70 + "\nRan ", 1)[0]
        method, where = m.group("method"), m.group("where")
        if where.startswith(_FAILED_LOAD):
            not_loaded[method] = _last_line(body)
        elif method in ("setUpClass", "tearDownClass"):
            class_errors[where.rsplit(".", 1)[-1]] = f"{method} failed: {_last_line(body)}"
        else:  # unittest's FAIL is the test's own check (failureException); ERROR any other exception
            kind = failure.ASSERTION if m.group("kind") == "FAIL" else failure.ERROR
            failed[_ut_name(method, where)] = (kind, _last_line(body))
    return _Seen(started, failed, class_errors, not_loaded, skipped, bool(_UT_RAN.search(output)))


_PT_LINE = re.compile(r"^(?P<node>\S+::\S+) (?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS)\b", re.M)
_PT_SUMMARY = re.compile(r"^(?P<outcome>PASSED|FAILED|ERROR|SKIPPED|XFAIL|XPASS) (?P<node>\S+::\S+)", re.M)
_PT_SECTION = re.compile(r"^_{3,} (?P<name>\S+?)(?: \[\S+\])? _{3,}$", re.M)
_PT_BANNER = re.compile(r"^={3,} .* ={3,}$", re.M)
_PT_NOT_FOUND = re.compile(r"^ERROR: (?:not found|file or directory not found): (?P<what>.+)$", re.M)
_PT_RAN = re.compile(r"^=+ .*\b(?:passed|failed|error|errors|skipped|no tests ran)\b.* in [\d.]+s", re.M)


def _pytest(output: str, run: TestRun) -> _Seen:
    outcomes: dict[str, str] = {}
    for m in list(_PT_LINE.finditer(output)) + list(_PT_SUMMARY.finditer(output)):
        outcomes[m.group("node").split("::", 1)[1]] = m.group("outcome")
    stretches: dict[str, str] = {}
    for m in _PT_SECTION.finditer(output):
        # a test's section ends at the next one, or at pytest's next `=== ... ===` banner (the short summary, whose
        # lines quote other tests' messages in full on CI)
        ends = [x.start() for x in (_PT_SECTION.search(output, m.end()), _PT_BANNER.search(output, m.end())) if x]
        stretches[m.group("name").replace(".", "::")] = output[m.end() : min(ends, default=len(output))]
    started = {case: stretches.get(case, "") for case in outcomes}
    # pytest's ERROR is a fixture's (setup, teardown); a FAILED test failed its check unless it raised another exception
    kinds = {"ERROR": failure.ERROR, "XPASS": failure.ASSERTION}
    failed = {
        c: (kinds.get(o) or failure.of_text(stretches.get(c)), _last_line(stretches.get(c, "")))
        for c, o in outcomes.items()
        if o in ("FAILED", "ERROR", "XPASS")
    }
    skipped = {c for c, o in outcomes.items() if o in ("SKIPPED", "XFAIL")}
    not_loaded = {}
    for m in _PT_NOT_FOUND.finditer(output):
        what = m.group("what").strip()
        not_loaded[what.split("::")[-1].split(" ")[0]] = f"pytest: not found: {what}"
    return _Seen(started, failed, {}, not_loaded, skipped, bool(_PT_RAN.search(output)))


def _metric(text: str, regex: re.Pattern[str] | None) -> float | None:
    if regex is None:
        return None
    value = None
    for m in regex.finditer(text):
        raw = m.group("value") if "value" in regex.groupindex else m.group(1) if regex.groups else m.group(0)
        try:
            value = float(raw)
        except (TypeError, ValueError):
            continue
    return value


def _mine(name: str, case: str, sep: str) -> bool:
    """Is the run case `name` (Class.method) what the selected `case` asked for (the method, or its whole class)?"""
    return name == case or name.startswith(case + sep)


def cases_of(run: TestRun, output: str, metric: re.Pattern[str] | None) -> list[CaseResult]:
    """The verdict of each test method that ran for the selected cases (a selected class: each of its methods), or
    of the selected case itself when none of it ran; each with its own metric reading: the last match in that
    method's own stretch of the output (CI's retry inside the method reads again), never the file's last line."""
    sep = "::" if run.framework == "pytest" else "."
    seen = _pytest(output, run) if run.framework == "pytest" else _unittest(output)
    wanted = list(run.cases) or list(dict.fromkeys([*(n.split(sep)[0] for n in seen.started), *seen.class_errors]))
    results = []
    for case in wanted:
        owner = case_owner(run, case)
        mine = [n for n in seen.started if _mine(n, case, sep)]
        for name in mine:
            value = _metric(seen.started[name], metric)
            if name in seen.failed:
                results.append(_failed(name, value, *seen.failed[name]))
            elif name in seen.skipped:
                results.append(CaseResult(name, SKIP, None, "skipped by the test itself"))
            else:
                results.append(CaseResult(name, GOOD, value, None))
        failed_unstarted = [n for n in seen.failed if _mine(n, case, sep) and n not in seen.started]
        results += [_failed(n, None, *seen.failed[n]) for n in failed_unstarted]
        if mine or failed_unstarted:
            continue
        leaf = case.split(sep)[-1]
        if owner in seen.class_errors:
            # the class's fixture (its server) failed: a class the red run failed as a whole fails so again;
            # a method under it never ran, which says nothing of the method
            why = f"{owner}.{seen.class_errors[owner]}"
            results.append(CaseResult(case, BAD if case == owner else INFRA, None, why, failure.ERROR))
        elif leaf in seen.not_loaded:
            results.append(CaseResult(case, SKIP, None, f"not at this commit: {seen.not_loaded[leaf]}"))
        else:
            results.append(CaseResult(case, INFRA, None, ENDED if not seen.reported else "did not run"))
    return results


def _failed(name: str, value: float | None, kind: str, last: str) -> CaseResult:
    """A failed case; an error says what was raised (its traceback's last line), an assertion only that it failed."""
    return CaseResult(name, BAD, value, last or "failed" if kind == failure.ERROR else "failed", kind)


def verdict(cases: Iterable[CaseResult], exit_code: int | None) -> tuple[int | None, str | None]:
    """The step's one exit code (git bisect run's meanings) and infra reason, from its cases: a failed case is a
    failure; else a case that could not run makes the commit infra (retried) or untestable; else the process's."""
    cases = list(cases)
    if exit_code is None or exit_code >= 128 or exit_code < 0:
        return exit_code, None  # a timeout or a signal: the caller's infra reason stands
    if any(c.outcome == BAD for c in cases):
        return 1, None
    infra = [c for c in cases if c.outcome == INFRA]
    if infra and exit_code > 0 and all(c.why == ENDED for c in infra):
        return exit_code, None  # the commit's test file died before its tests (an import error, say): its failure
    if infra:
        return None, "; ".join(f"{c.case}: {c.why}" for c in infra)
    skips = [c for c in cases if c.outcome == SKIP]
    if skips:
        return 125, None
    if not cases:  # no per-case report at all: the process's own exit status is the test's word
        return exit_code, None
    return 0, None


def worst(cases: Iterable[CaseResult], higher_is_worse: bool) -> float | None:
    values = [c.metric for c in cases if c.metric is not None]
    if not values:
        return None
    return max(values) if higher_is_worse else min(values)
