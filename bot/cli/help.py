"""The command line's help layout: Click's plain help, never breaking a word at its hyphens, and every
placeholder a word (`PATH...`, `URL`), never a Python type (`<list[str]>`, `{paths}...`, `<int range>`)."""

from __future__ import annotations

import typer
from typer.core import TyperArgument, TyperCommand, TyperGroup, TyperOption

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


class Argument(TyperArgument):
    """An argument shown as its placeholder alone, as Click shows one: `PATH...` in the usage line and the
    help, `[ID]` when optional; never typer's `{paths}...` nor a type (`ID <int>`, `COMMAND <list[str]>`)."""

    def _placeholder(self) -> str:
        name = self.metavar or (self.name or "").upper()
        return name.removesuffix("...")

    def _rich_display_name(self) -> str:
        return self._placeholder() + ("..." if self.nargs != 1 else "")

    def _usage_display_name(self) -> str:
        name = self._placeholder() if self.required else f"[{self._placeholder()}]"
        return name + ("..." if self.nargs != 1 else "")

    def display_type_rich(self, ctx) -> str | None:
        return None


def words_for_placeholders(command: TyperCommand) -> None:
    """Every placeholder of `command` a word: its arguments as Argument; an option that takes a value and was
    given no `metavar=` shows its own name (`--culprit CULPRIT`, as argparse does), not its type (`<str>`)."""
    for param in command.params:
        if isinstance(param, TyperArgument):
            param.__class__ = Argument
        elif isinstance(param, TyperOption) and param.metavar is None and not (param.is_flag or param.count):
            long = max(param.opts, key=len).lstrip("-")
            param.metavar = long.upper().replace("-", "_")


class Group(TyperGroup):
    """The app, whose help and its commands' is laid out by HelpFormatter."""

    context_class = Context

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        for command in self.commands.values():
            command.context_class = Context
            words_for_placeholders(command)
            if command.help and not command.short_help:  # listed whole, not cut off at 45 characters
                command.short_help = " ".join(command.help.split("\n\n")[0].split())
