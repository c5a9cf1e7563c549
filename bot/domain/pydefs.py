"""Which Python definitions hold given lines of a file, by qualified name (`Scheduler.__init__`), read from the file's
text with `ast` (pure).

A line belongs to the innermost class or function that spans it, decorators included; a function nested in a
function counts as the outer one (the unit a person names). A module- or class-level assignment is a definition too
(`Scheduler.interval`, `DEFAULT_TIMEOUT`); an import or a bare module-level statement is none.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass

from bot.domain.hunks import changed_lines, old_text


class Unparsable(ValueError):
    """Text that is not Python this interpreter can parse."""


@dataclass(frozen=True)
class Span:
    first: int
    last: int
    name: str


def _spans(body: list[ast.stmt], prefix: str) -> Iterable[Span]:
    for node in body:
        first = min([node.lineno, *(d.lineno for d in getattr(node, "decorator_list", []))])
        last = node.end_lineno or node.lineno
        if isinstance(node, ast.ClassDef):
            yield Span(first, last, prefix + node.name)
            yield from _spans(node.body, f"{prefix}{node.name}.")
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            yield Span(first, last, prefix + node.name)
        elif isinstance(node, ast.Assign | ast.AnnAssign):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for t in targets:
                if isinstance(t, ast.Name):
                    yield Span(first, last, prefix + t.id)
        elif isinstance(node, ast.If | ast.Try):  # `if TYPE_CHECKING:`, `try: import x` blocks hold definitions too
            inner = [*node.body, *getattr(node, "orelse", []), *getattr(node, "finalbody", [])]
            yield from _spans(inner, prefix)


def definitions_at(source: str, lines: Iterable[int]) -> frozenset[str]:
    """The qualified names of the innermost definitions holding `lines` (1-based) in `source`."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError) as exc:
        raise Unparsable(str(exc)) from None
    spans = list(_spans(tree.body, ""))
    found = set()
    for n in lines:
        holding = [s for s in spans if s.first <= n <= s.last]
        if holding:
            found.add(max(holding, key=lambda s: (s.first, -s.last)).name)
    return frozenset(found)


def changed_definitions(patch: str, new: str) -> frozenset[str]:
    """The definitions a file's patch changes, given the file's text after it: its removed lines placed in the text
    before it (the patch put back), its added lines in `new`. Unparsable or PatchMismatch when they cannot be read."""
    removed, added = changed_lines(patch)
    before = old_text(new, patch) if removed else ""
    return definitions_at(before, removed) | definitions_at(new, added)
