"""`revert-bisect status`: the recent bisections, or one with its runs."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer
from rich.table import Table

from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli.consoles import err, out
from bot.cli.wording import said
from bot.domain.errors import RevertBisectError
from bot.domain.outcome import BisectionOutcome, outcome_of


def status(
    bisection_id: Annotated[int | None, typer.Argument(metavar="ID", help="Show one bisection in detail.")] = None,
    db: Annotated[str | None, typer.Option(help="SQLAlchemy URL of the store.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many recent bisections to list.")] = 20,
) -> None:
    """List recent bisections, or show one with its runs."""
    try:
        store = Store(connect(db))
        if bisection_id is None:
            table = Table("id", "repo", "range", "state", "culprit", "P", "runs", "created")
            for row in store.recent(limit):
                outcome = outcome_of(row) or BisectionOutcome()
                culprit = outcome.culprit or row.guess
                ran = sum(s.state in ("done", "lost") for s in row.steps)
                p = outcome.confidence or row.guess_probability
                table.add_row(
                    str(row.id),
                    Path(row.repo).name,
                    f"{row.good[:8]}..{row.bad[:8]}",
                    row.status or row.phase,
                    (culprit or "-")[:12],
                    f"{p:.3f}" if p else "-",
                    str(ran),
                    f"{row.created_at:%Y-%m-%d %H:%M}",
                )
            out.print(table)
            return
        row = store.get(bisection_id)
        out.print(f"#{row.id} {row.repo} {row.good_rev}..{row.bad_rev}: {row.status or row.phase}")
        if outcome := outcome_of(row):
            out.print(said(outcome.message, outcome.reason, outcome.facts))
        table = Table("step", "round", "kind", "sha", "state", "verdict", "exit", "metric", "s", "runner")
        for s in row.steps:
            table.add_row(
                str(s.id),
                str(s.round),
                s.kind,
                s.sha[:12],
                s.state,
                s.verdict or "-",
                "-" if s.exit_code is None else str(s.exit_code),
                "-" if s.metric is None else f"{s.metric:.6g}",
                f"{s.duration_s:.1f}" if s.duration_s else "-",
                s.runner or "-",
            )
        out.print(table)
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
