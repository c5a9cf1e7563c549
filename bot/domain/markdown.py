"""Text from elsewhere (PR titles, commit subjects, error messages) made safe inside GitHub Markdown.

Pure functions. `text` is for running text and table cells; `code` for a code span; `fence` for a fenced
block. HTML entities are never used: GitHub shows `&gt;` literally inside code and the reader of the raw
Markdown sees them everywhere; a backslash escape renders as the character itself.
"""

from __future__ import annotations

import re

# CommonMark lets any ASCII punctuation be backslash-escaped; these are the ones that start markup
# inline (emphasis, code, links and images, autolinks and HTML, GFM tables, strikethrough, entities).
# `text` is for the middle of a line: block markers (`#`, `-`, `1.` at a line's start) are left alone.
SPECIAL = re.compile(r"([\\`*_\[\]<>|~&])")
# GitHub's @mention: not after a letter or digit (an e-mail address), a login (alphanumerics and
# single hyphens), maybe /team.
MENTION = re.compile(r"(?<![A-Za-z0-9])@[A-Za-z0-9](?:[A-Za-z0-9]|-(?=[A-Za-z0-9]))*(?:/[A-Za-z0-9][A-Za-z0-9_.-]*)?")
# A bare URL stays as it is, so GitHub still links it (a backslash inside would become part of the link).
URL = re.compile(r"https?://[^\s<>()\[\]|`*]+")
VERBATIM = re.compile(f"(?P<mention>{MENTION.pattern})|(?P<url>{URL.pattern})")
WHITESPACE = re.compile(r"\s+")


def _one_line(value: str) -> str:
    """Newlines would end a table row or a list item: one line, runs of whitespace as one space."""
    return WHITESPACE.sub(" ", value).strip()


def text(value: str) -> str:
    """Inline text that reads back as itself: markup characters escaped, on one line (so it is also a valid
    table cell: `|` is escaped too), every @mention in a code span so it shows but pings no one, URLs as they are."""
    value = _one_line(value)
    out, pos = [], 0
    for match in VERBATIM.finditer(value):
        out.append(SPECIAL.sub(r"\\\1", value[pos : match.start()]))
        out.append(code(match.group()) if match.group("mention") else match.group())
        pos = match.end()
    out.append(SPECIAL.sub(r"\\\1", value[pos:]))
    return "".join(out)


def code(value: str, *, in_table: bool = False) -> str:
    """A code span holding `value` exactly (CommonMark: the fence is one backtick longer than the longest run
    inside; a space pads content that starts or ends with a backtick or is wrapped in spaces). In a table
    cell a `|` must still be escaped: GitHub splits cells before it parses code spans."""
    value = re.sub(r"\r?\n", " ", value) or " "  # a line ending is a space in a code span, and would end a table row
    longest = max((len(run) for run in re.findall(r"`+", value)), default=0)
    ticks = "`" * (longest + 1)
    pad = " " if value[0] == "`" or value[-1] == "`" or (value[0] == value[-1] == " " and value.strip()) else ""
    span = f"{ticks}{pad}{value}{pad}{ticks}"
    return span.replace("|", r"\|") if in_table else span


def fence(value: str, info: str = "") -> str:
    """A fenced code block holding `value` (lines kept): the fence is longer than any backtick run inside."""
    longest = max((len(run) for run in re.findall(r"`{3,}", value)), default=2)
    ticks = "`" * (longest + 1)
    return f"{ticks}{info}\n{value}\n{ticks}"
