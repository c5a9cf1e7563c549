"""`revert-bisect status`: the recent bisections, or one with its runs; a table that reads at 80 columns
(short SHAs of 12 characters, never cut further), full SHAs with --full, JSON with --json (bot.cli.status_view)."""

from __future__ import annotations

from typing import Annotated

import typer

SHORT = 12  # a short SHA: unambiguous in any repository this side of Linux's, and 80 columns fit


def status(
    bisection_id: Annotated[int | None, typer.Argument(metavar="ID", help="Show one bisection in detail.")] = None,
    db: Annotated[str | None, typer.Option(metavar="URL", help="SQLAlchemy URL of the store.")] = None,
    limit: Annotated[int, typer.Option(min=1, metavar="N", help="How many recent bisections to list.")] = 20,
    full: Annotated[
        bool, typer.Option("--full", help=f"Full 40-character SHAs (the table is wider than 80 columns), not {SHORT}.")
    ] = False,
    as_json: Annotated[
        bool,
        typer.Option(
            "--json", help="Print JSON instead: a list of bisections, or with ID the one bisection and its runs."
        ),
    ] = False,
) -> None:
    """List recent bisections, or show one with its runs."""
    from bot.cli.status_view import show  # the store loads when the command runs: `--help` starts without it

    show(bisection_id, db, limit, full, as_json)
