"""A unified diff's hunks read by their line numbers, never by their headers (pure).

What a hunk header says after its second `@@` is whatever git's diff driver printed: with git's default driver, the
last unindented line above the hunk (`class Scheduler:` for every method of the class), so it says nothing reliable
about which function changed. The line numbers are exact: they place each changed line in the file's text.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

HEADER = re.compile(r"^@@ -(\d+)(?:,(\d+))? \+(\d+)(?:,(\d+))? @@")


class PatchMismatch(ValueError):
    """A patch that does not fit the text it was said to produce (another version of the file)."""


@dataclass(frozen=True)
class Hunk:
    old_start: int
    new_start: int
    new_count: int
    lines: tuple[str, ...]  # the body, each line with its ` `, `-` or `+`


def hunks(patch: str) -> list[Hunk]:
    """The hunks of one file's patch (GitHub's `patch` field: hunks only, no `diff --git` header)."""
    out: list[Hunk] = []
    for line in patch.splitlines():
        if m := HEADER.match(line):
            count = int(m.group(4)) if m.group(4) is not None else 1
            out.append(Hunk(int(m.group(1)), int(m.group(3)), count, ()))
        elif out and line[:1] in (" ", "-", "+", ""):  # `\ No newline at end of file` is not a line of the file
            last = out[-1]
            out[-1] = Hunk(last.old_start, last.new_start, last.new_count, (*last.lines, line or " "))
    return out


def changed_lines(patch: str) -> tuple[frozenset[int], frozenset[int]]:
    """The old file's line numbers of the removed lines and the new file's of the added ones; blank lines left out (a
    blank line between two functions changes neither)."""
    old: set[int] = set()
    new: set[int] = set()
    for h in hunks(patch):
        o, n = h.old_start, h.new_start
        for line in h.lines:
            kind, text = line[0], line[1:]
            if kind == "-":
                old.update([o] if text.strip() else [])
                o += 1
            elif kind == "+":
                new.update([n] if text.strip() else [])
                n += 1
            else:
                o, n = o + 1, n + 1
    return frozenset(old), frozenset(new)


def old_text(new: str, patch: str) -> str:
    """The file before `patch`, from the file after it: each hunk's new lines put back as its old ones (the context
    and added lines are checked against `new`: PatchMismatch when they differ)."""
    after = new.splitlines()
    before: list[str] = []
    at = 0  # index into `after`
    for h in hunks(patch):
        start = h.new_start - 1 if h.new_count else h.new_start  # an empty side names the line before it
        if start < at or start > len(after):
            raise PatchMismatch(f"a hunk at +{h.new_start} lies outside the file's {len(after)} lines")
        before += after[at:start]
        at = start
        for line in h.lines:
            kind, text = line[0], line[1:]
            if kind == "-":
                before.append(text)
                continue
            if at >= len(after) or after[at] != text:
                raise PatchMismatch(f"line {at + 1} is not the patch's {text!r}")
            if kind == " ":
                before.append(text)
            at += 1
    before += after[at:]
    return "\n".join(before) + ("\n" if before else "")


DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")


def headed_definitions(patch: str | None) -> frozenset[str]:
    """The bare names of the functions and classes a patch changes, read from its hunk headers and `def`/`class`
    lines: only for a diff made with git's python driver (the bot's own clone sets it: bot.adapters.git.repo); a
    blank changed line is credited to nothing."""
    found: set[str] = set()
    enclosing: str | None = None
    for line in (patch or "").splitlines():
        if m := HEADER.match(line):
            header = DEFINITION.match(line[m.end() :].strip())
            enclosing = header.group(1) if header else None
            continue
        text = line[1:] if line[:1] in "+- " else line
        if d := DEFINITION.match(text):
            enclosing = d.group(1)
            if line[:1] in "+-":
                found.add(d.group(1))
            continue
        if line[:1] in "+-" and enclosing and text.strip():
            found.add(enclosing)
    return frozenset(found)
