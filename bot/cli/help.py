"""The command line's help layout: Click's plain help, never breaking a word at its hyphens."""

from __future__ import annotations

import typer
from typer.core import TyperGroup

_NB_HYPHEN = "\u2011"  # a hyphen textwrap does not break at, swapped back once the help is wrapped


class HelpFormatter(typer.Context.formatter_class):
    """Click's help formatter, except that it never breaks a word at its hyphens (`--descend-merges`
    must not come out as `--descend-` / `merges`)."""

    def write_text(self, text: str) -> None:
        start = len(self.buffer)
        super().write_text(text.replace("-", _NB_HYPHEN))
        self._restore(start)

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        start = len(self.buffer)
        super().write_dl([(term, text.replace("-", _NB_HYPHEN)) for term, text in rows], col_max, col_spacing)
        self._restore(start)

    def _restore(self, start: int) -> None:
        self.buffer[start:] = [chunk.replace(_NB_HYPHEN, "-") for chunk in self.buffer[start:]]


class Context(typer.Context):
    formatter_class = HelpFormatter


class Group(TyperGroup):
    """The app, whose help and its commands' is laid out by HelpFormatter."""

    context_class = Context

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        for command in self.commands.values():
            command.context_class = Context
            if command.help and not command.short_help:  # listed whole, not cut off at 45 characters
                command.short_help = " ".join(command.help.split("\n\n")[0].split())
