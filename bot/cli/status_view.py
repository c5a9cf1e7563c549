"""What `revert-bisect status` prints: the recent bisections, or one with its runs, as tables that read at 80
columns, or as JSON."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import typer
from pydantic_core import to_json
from rich.table import Table

from bot.adapters.store.db import connect
from bot.adapters.store.models import BisectionRow
from bot.adapters.store.store import Store
from bot.cli.commands_status import SHORT
from bot.cli.consoles import err, out
from bot.cli.documents import stored
from bot.domain.errors import RevertBisectError
from bot.domain.outcome import BisectionOutcome, best_guess_of, culprit_of, outcome_of
from bot.service.describe import aware
from bot.service.document import BisectionDocument, DocStep

GAP = 2  # spaces between two columns
FOLDED = 4  # the least a column that may wrap is given before a SHA column would be cut


def show(bisection_id: int | None, db: str | None, limit: int, full: bool, as_json: bool) -> None:
    try:
        store = Store(connect(db))
        if bisection_id is None:
            rows = store.recent(limit)
            if as_json:
                _print_json([_summary(row) for row in rows])
            elif rows:
                _print_list(rows, full)
            else:
                out.print("no bisections in this store yet: `revert-bisect bisect` starts one", highlight=False)
            return
        doc = stored(store.get(bisection_id))
        if as_json:
            typer.echo(doc.model_dump_json(indent=2))
        else:
            _print_detail(doc, full)
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, markup=False, soft_wrap=True)
        raise typer.Exit(2) from None


# --- JSON ---------------------------------------------------------------------------------------------------


def _ran(row: BisectionRow) -> int:
    return sum(s.state in ("done", "lost") for s in row.steps)


def _summary(row: BisectionRow) -> dict[str, Any]:
    outcome = outcome_of(row) or BisectionOutcome()
    return {
        "id": row.id,
        "repo": row.repo,
        "good": row.good,
        "bad": row.bad,
        "good_rev": row.good_rev,
        "bad_rev": row.bad_rev,
        "status": row.status,  # the outcome (bisect's exit-code table), null while it runs
        "phase": row.phase,
        "culprit": culprit_of(row.status, outcome),  # only once found: the commit to revert
        "best_guess": best_guess_of(row.status, outcome),  # an answer short of found: never to revert
        "confidence": outcome.confidence,
        "guess": row.guess,
        "guess_probability": row.guess_probability,
        "runs": _ran(row),
        "created_at": aware(row.created_at),  # ISO 8601 in UTC, as the document's
        "finished_at": aware(row.finished_at),
    }


def _print_json(data: Any) -> None:
    typer.echo(to_json(data, indent=2).decode())


# --- tables -------------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Col:
    header: str
    wraps: bool = False  # may wrap (or fold) to fit; a SHA column never does
    right: bool = False


def _widths(cols: list[Col], cells: list[list[str]]) -> list[int]:
    return [max([len(c.header), *(len(row[i]) for row in cells)]) for i, c in enumerate(cols)]


def _natural(cols: list[Col], cells: list[list[str]]) -> int:
    """How wide the table is with nothing wrapped."""
    return sum(_widths(cols, cells)) + GAP * (len(cols) - 1)


def _least(cols: list[Col], cells: list[list[str]]) -> int:
    """How narrow it can be with no SHA, number or time cut: only the columns that wrap give way."""
    widths = _widths(cols, cells)
    return sum(min(w, FOLDED) if c.wraps else w for c, w in zip(cols, widths)) + GAP * (len(cols) - 1)


def _print_table(cols: list[Col], cells: list[list[str]]) -> None:
    table = Table(box=None, padding=(0, GAP // 2), pad_edge=False, show_edge=False, header_style="bold")
    for c in cols:
        table.add_column(c.header, justify="right" if c.right else "left", no_wrap=not c.wraps, overflow="fold")
    for row in cells:
        table.add_row(*row)
    if _least(cols, cells) <= out.width:  # the columns that wrap give way, if need be
        out.print(table)
        return
    # A terminal too narrow for the SHAs (--full at 80 columns): each row on one line, longer than the terminal,
    # never a SHA cut.
    width = out.width
    out.width = _natural(cols, cells)
    try:
        out.print(table)
    finally:
        out.width = width


def _sha(sha: str | None, full: bool) -> str:
    if not sha:
        return "-"
    return sha if full else sha[:SHORT]


def _print_list(rows: Any, full: bool) -> None:
    """One line per bisection. At 80 columns the range (see `status ID`) and then P give way to the rest;
    with --full the range is always there."""
    entries = []
    for row in rows:
        outcome = outcome_of(row) or BisectionOutcome()
        p = outcome.confidence or row.guess_probability
        culprit = culprit_of(row.status, outcome)
        guess = best_guess_of(row.status, outcome) if row.status else row.guess  # the engine's, while it runs
        entries.append(
            {
                "id": str(row.id),
                "repo": Path(row.repo).name,
                "range": f"{_sha(row.good, full)}..{_sha(row.bad, full)}",
                "state": row.status or row.phase,
                "culprit": _sha(culprit, full) if culprit else f"{_sha(guess, full)}?" if guess else "-",
                "P": f"{p:.3f}" if p else "-",
                "runs": str(_ran(row)),
                "created": f"{row.created_at:%Y-%m-%d %H:%M}",
            }
        )
    every = {
        "id": Col("id", right=True),
        "repo": Col("repo", wraps=True),
        "range": Col("range"),
        "state": Col("state", wraps=True),
        "culprit": Col("culprit"),
        "P": Col("P", right=True),
        "runs": Col("runs", right=True),
        "created": Col("created"),
    }
    variants = [list(every), [k for k in every if k != "range"], [k for k in every if k not in ("range", "P")]]
    if full:
        variants = [list(every), [k for k in every if k != "P"]]
    for keys in variants:
        cols, cells = [every[k] for k in keys], [[e[k] for k in keys] for e in entries]
        if _natural(cols, cells) <= out.width:
            break
    _print_table(cols, cells)


def _given(rev: str, sha: str) -> str:
    """The revision as the user gave it, when it says more than the SHA (a branch, a tag, HEAD~20)."""
    return "" if sha.startswith(rev) else f" ({rev})"


def _result(step: DocStep) -> str:
    """What a run gave: its verdict once done, else where it is (running, lost: never believed)."""
    return step.verdict if step.state == "done" and step.verdict else step.state


def _print_detail(doc: BisectionDocument, full: bool) -> None:
    text = {"highlight": False, "markup": False}
    out.print(f"#{doc.id} {doc.repo}: {doc.status or doc.phase}", **text)
    out.print(f"good     {_sha(doc.good, full)}{_given(doc.good_rev, doc.good)}", **text)
    out.print(f"bad      {_sha(doc.bad, full)}{_given(doc.bad_rev, doc.bad)}", **text)
    if doc.culprit:
        out.print(f"culprit  {_sha(doc.culprit, full)}", **text)
    elif doc.best_guess:
        p = f" P={doc.confidence:.3f}" if doc.confidence else ""
        out.print(f"guess    {_sha(doc.best_guess, full)} (best guess{p}, not confirmed: not a culprit)", **text)
    if doc.message:
        out.print(doc.message, **text)
    cols = [
        Col("step", right=True),
        Col("round", right=True),
        Col("kind", wraps=True),
        Col("sha"),
        Col("result", wraps=True),
        Col("exit", right=True),
        Col("metric", right=True),
        Col("s", right=True),
        Col("runner", wraps=True),
    ]
    cells = [
        [
            str(s.id),
            str(s.round),
            s.kind,
            _sha(s.sha, full),
            _result(s),
            "-" if s.exit_code is None else str(s.exit_code),
            "-" if s.metric is None else f"{s.metric:.6g}",
            f"{s.duration_s:.1f}" if s.duration_s else "-",
            s.runner or "-",
        ]
        for s in doc.steps
    ]
    _print_table(cols, cells)
