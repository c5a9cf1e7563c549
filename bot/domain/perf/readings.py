"""A test's metrics in one CI job log, read: {metric name: value}. Pure.

Each metric of the test (`tests[].metrics`, bot.domain.policy.Series) is read its own way:

- `pattern`: a regex with a named group `value`; its last match in the log is the reading (as `results.log.metric`
  is read today);
- `table`: a cell of a Markdown table the test prints (SGLang's perf report: a `### <model> [<GPU config>]` line, a
  header row, a `| --- |` row, then one row per batch size, python/sglang/test/nightly_bench_utils.py): the cell of
  `column` in the last row whose cells match `row`, in the first table after the last line `after` matches (and
  before the next Markdown heading), else in any table of the log.

A test without `metrics` reads its `metric` with the policy's `results.log.metric`, the reading the bisection judges.

The log is read as the test's own output when run_suite framed it (`Begin (i/n):` ... `End (i/n):` around the files
its `match` names, bot.domain.suite_log), else whole: another file's `avg_kl_div=` in the same job is not this test's.
GitHub's per-line timestamps are taken off first (bot.domain.joblog.plain; a log without them is unchanged).

A metric the log does not hold -- the run crashed before its report, a batch size the KV cache could not hold was
skipped, the cell says `n/a`, the number is not finite -- is left out of the result: never a zero, never an error.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.domain.ci_results import named
from bot.domain.joblog import plain
from bot.domain.policy import Policy, Series, TableCell, Test
from bot.domain.suite_log import parse

SEPARATOR_CELL = re.compile(r"^:?-+:?$")
PIPE = re.compile(r"(?<!\\)\|")  # a cell boundary: GFM escapes a pipe inside a cell as \|
HEADING = re.compile(r"^\s*#")


@dataclass(frozen=True)
class Table:
    """A Markdown table as printed: the line its header row is on (0-based), its headers and its rows' cells, all
    with spaces trimmed."""

    line: int
    header: tuple[str, ...]
    rows: tuple[tuple[str, ...], ...]


def series_of(policy: Policy, test: Test) -> list[Series]:
    """The metrics read for the test: its own `metrics`, else its `metric` read with `results.log.metric` (the
    policy-wide default, what the bisection reads), else none."""
    if test.metrics:
        return list(test.metrics)
    if test.metric is not None and policy.results.log.metric:
        return [Series(name=test.metric.name, pattern=policy.results.log.metric, direction=test.metric.direction)]
    return []


def read(policy: Policy, test: Test, log: str) -> dict[str, float]:
    """{metric name: value} for every metric of the test the log holds a number for, in the policy's order."""
    text = own_output(test, plain(log))
    found: dict[str, float] = {}
    tables: list[Table] | None = None
    for series in series_of(policy, test):
        value = None
        if series.pattern is not None:
            value = by_pattern(series.pattern, text)
        elif series.table is not None:  # a Series has one of the two
            tables = markdown_tables(text) if tables is None else tables
            value = by_table(series.table, text, tables)
        if value is not None:
            found[series.name] = value
    return found


def own_output(test: Test, log: str) -> str:
    """The output of the files the test's `match` names, where run_suite framed each file's output; else the log."""
    frames = [text for file, text in parse(log).outputs.items() if named(test, file)]
    return "\n".join(frames) if frames else log


def number(text: str) -> float | None:
    """A cell's or a group's text as a finite number; None for `n/a`, `NA`, an empty cell, nan or inf."""
    try:
        value = float(text.strip())
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def by_pattern(pattern: str, text: str) -> float | None:
    matches = list(re.finditer(pattern, text))
    if not matches:
        return None
    value = matches[-1].groupdict().get("value")
    return number(value) if value is not None else None


def _cells(line: str) -> tuple[str, ...] | None:
    """A table row's cells (`| a | b |` -> ('a', 'b')), or None for a line that is not one."""
    stripped = line.strip()
    if not stripped.startswith("|"):
        return None
    inner = stripped[1:]
    if inner.endswith("|") and not inner.endswith("\\|"):
        inner = inner[:-1]
    return tuple(cell.strip().replace("\\|", "|") for cell in PIPE.split(inner))


def markdown_tables(text: str) -> list[Table]:
    """Every table in the text: a row of cells, a row of `---` cells under it, then rows while lines are rows."""
    lines = text.split("\n")
    out: list[Table] = []
    k = 0
    while k + 1 < len(lines):
        header, rule = _cells(lines[k]), _cells(lines[k + 1])
        if header is None or rule is None or not all(SEPARATOR_CELL.match(c) for c in rule):
            k += 1
            continue
        rows = []
        end = k + 2
        while end < len(lines) and (row := _cells(lines[end])) is not None:
            rows.append(row)
            end += 1
        out.append(Table(k, header, tuple(rows)))
        k = end
    return out


def _key(text: str) -> str:
    return " ".join(text.split()).casefold()


def _in_section(cell: TableCell, text: str, tables: Sequence[Table]) -> list[Table]:
    """The tables `cell.after` points to: the first one after the last line it matches, unless a Markdown heading
    comes between (another section's table is never read in its place); every table without `after`."""
    if cell.after is None:
        return list(tables)
    lines = text.split("\n")
    marks = [k for k, line in enumerate(lines) if re.search(cell.after, line)]
    if not marks:
        return []
    after = marks[-1]
    for table in tables:
        if table.line > after:
            between = lines[after + 1 : table.line]
            return [] if any(HEADING.match(line) for line in between) else [table]
    return []


def by_table(cell: TableCell, text: str, tables: Sequence[Table] | None = None) -> float | None:
    """The cell of `cell.column` in the last row whose cells match `cell.row` (headers and cells compared with case
    and runs of spaces aside), in the tables `cell.after` points to."""
    value: float | None = None
    for table in _in_section(cell, text, markdown_tables(text) if tables is None else tables):
        headers = [_key(h) for h in table.header]
        wanted = _key(cell.column)
        selectors = {_key(h): _key(v) for h, v in cell.row.items()}
        if wanted not in headers or any(h not in headers for h in selectors):
            continue
        column = headers.index(wanted)
        at = {h: headers.index(h) for h in selectors}
        for row in table.rows:
            if column < len(row) and all(at[h] < len(row) and _key(row[at[h]]) == v for h, v in selectors.items()):
                value = number(row[column])  # the last matching row wins, `n/a` included: it says no reading
    return value
