"""A GitHub Actions job log as the policy's regexes read it: the runner's decorations taken off, once.

GitHub writes every line of a job log as `<UTC time with 7 fractional digits>Z <text>`
(`2026-07-17T03:12:45.1234567Z   test_x.py (exit code 1)`), opens a step with
`##[group]Run <first line of its script>` (the script, its shell and env follow) and closes the header
with `##[endgroup]`, and writes failures as `##[error]Process completed with exit code 1.`; a log may
begin with a byte-order mark. A regex anchored at `^` (`(?m)^\\s+(?P<test>\\S+\\.py) \\(`) matches none
of those lines until they are undone. `plain` undoes them: the timestamp and the one space after it
go, `##[endgroup]` lines go, and a `##[name]` marker leaves its text (`##[error]Process completed ...`
-> `Process completed ...`). The rest of each line, its leading spaces included, is kept as written.
A log without the decorations (a local run's) comes back unchanged. Pure.
"""

from __future__ import annotations

import re

STAMP = re.compile(r"^\ufeff?\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(?:\.\d{1,9})?Z(?: |$)")
MARKER = re.compile(r"^##\[(group|endgroup|error|warning|notice|debug|command|section)\]", re.IGNORECASE)


def plain(log: str) -> str:
    """The log's text without GitHub's per-line timestamps, ##[group]/##[endgroup] lines' markers and
    ##[error]-style prefixes (see the module's docstring)."""
    out = []
    for line in log.removeprefix("\ufeff").split("\n"):
        line = STAMP.sub("", line.removesuffix("\r"), count=1)
        marker = MARKER.match(line)
        if marker is not None:
            if marker.group(1).lower() == "endgroup":
                continue
            line = line[marker.end() :]
        out.append(line)
    return "\n".join(out)
