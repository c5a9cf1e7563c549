"""A benchmark's series as a CSV file: columns `sha`, `time` and one per metric, one row per run, oldest first."""

from __future__ import annotations

import csv
import math
from dataclasses import dataclass
from pathlib import Path

REQUIRED = ("sha", "time")
MISSING = {"", "nan", "na", "n/a", "none", "null", "-"}  # a run without this metric's reading: a skipped point


class SeriesError(Exception):
    """The file cannot be read as a series; the message names the file, and the row and column when there is one."""


@dataclass(frozen=True)
class Series:
    shas: list[str]
    times: list[str]
    metrics: dict[str, list[float | None]]


def read_series(path: Path) -> Series:
    try:
        text = path.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise SeriesError(f"{path}: cannot be read ({exc})") from None
    rows = list(csv.reader(text.splitlines()))
    while rows and not any(cell.strip() for cell in rows[-1]):
        rows.pop()
    if not rows:
        raise SeriesError(f"{path}: the file is empty (expected a header `sha,time,<metric>,...` and a row per run)")
    header = [cell.strip() for cell in rows[0]]
    for name in REQUIRED:
        if name not in header:
            raise SeriesError(f"{path}: no column {name!r} (the header has: {', '.join(header) or 'nothing'})")
    repeated = sorted({name for name in header if header.count(name) > 1})
    if repeated:
        raise SeriesError(f"{path}: column {repeated[0]!r} appears more than once in the header")
    names = [name for name in header if name not in REQUIRED]
    if not names or "" in names:
        raise SeriesError(
            f"{path}: "
            + ("a column has no name in the header" if "" in names else "no metric column besides sha and time")
        )
    series = Series([], [], {name: [] for name in names})
    for line, row in enumerate(rows[1:], start=2):
        if not any(cell.strip() for cell in row):
            continue
        number = len(series.shas)  # the run's index, 0-based, as the change points name it
        if len(row) != len(header):
            raise SeriesError(f"{path}: row {number} (line {line}) has {len(row)} cells, the header {len(header)}")
        cells = dict(zip(header, (cell.strip() for cell in row)))
        if not cells["sha"]:
            raise SeriesError(f"{path}: row {number} (line {line}), column 'sha': empty")
        series.shas.append(cells["sha"])
        series.times.append(cells["time"])
        for name in names:
            series.metrics[name].append(_reading(path, number, line, name, cells[name]))
    if not series.shas:
        raise SeriesError(f"{path}: a header and no rows (one row per run is expected)")
    return series


def _reading(path: Path, number: int, line: int, column: str, cell: str) -> float | None:
    if cell.lower() in MISSING:
        return None
    try:
        value = float(cell)
    except ValueError:
        raise SeriesError(f"{path}: row {number} (line {line}), column {column!r}: {cell!r} is not a number") from None
    return value if math.isfinite(value) else None
