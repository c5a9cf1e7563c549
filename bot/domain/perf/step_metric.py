"""How a bisect step reads a series' metric from the test's output: the one regex a step applies (its last match's
`value`, runners.metric), made from the metric's declaration. Pure.

- `pattern`: the regex itself.
- `table`: a cell of a Markdown table. A regex cannot find a column by its header, so the header comes from CI's
  own log of the test (the table as the nightly printed it, bot.domain.perf.readings): the regex then matches the
  `after` line, any lines up to the next Markdown heading, and the row whose selector cells match, capturing the
  column's cell. Its last match is the reading, as `readings.by_table` reads the last table `after` points to.
"""

from __future__ import annotations

import re

from bot.domain.joblog import plain
from bot.domain.perf.readings import _in_section, _key, markdown_tables
from bot.domain.policy import Series, TableCell

CELL = r"[ \t]*(?P<value>[^|\n]*?)[ \t]*\|"
ANY_CELL = r"[^|\n]*\|"


def step_regex(series: Series, log: str | None = None) -> str | None:
    """The regex a step reads `series` with; for a table cell, built from the header of the table `log` (CI's log of
    the test) prints where the cell is; None when the log has no such table (or none was given)."""
    if series.pattern is not None:
        return series.pattern
    if series.table is None or log is None:
        return None
    header = _header(series.table, plain(log))
    return None if header is None else cell_regex(series.table, header)


def _header(cell: TableCell, text: str) -> tuple[str, ...] | None:
    wanted = {_key(cell.column), *(_key(h) for h in cell.row)}
    for table in reversed(_in_section(cell, text, markdown_tables(text))):
        if wanted <= {_key(h) for h in table.header}:
            return table.header
    return None


def cell_regex(cell: TableCell, header: tuple[str, ...]) -> str | None:
    """The regex of `cell` in a table whose header row is `header` (its cells as printed); None when the header lacks
    the column or a selector's column."""
    keys = [_key(h) for h in header]
    column = _key(cell.column)
    selectors = {_key(h): _key(v) for h, v in cell.row.items()}
    if column not in keys or any(h not in keys for h in selectors):
        return None
    cells = []
    for k, key in enumerate(keys):
        if k == keys.index(column):
            cells.append(CELL)
        elif key in selectors and k == keys.index(key):
            words = [re.escape(w) for w in selectors[key].split(" ")]
            cells.append(r"[ \t]*(?i:" + r"[ \t]+".join(words) + r")[ \t]*\|")
        else:
            cells.append(ANY_CELL)
    row = r"[ \t]*\|" + "".join(cells)
    if cell.after is None:
        return r"(?m)^" + row
    # the `after` line, then lines that are no Markdown heading, up to the row (another section's table never read)
    return r"(?m)(?:" + cell.after + r")[^\n]*\n(?:(?![ \t]*#)[^\n]*\n)*?" + row
