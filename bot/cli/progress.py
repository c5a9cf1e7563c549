"""The live terminal display of a running bisection (rich)."""

from __future__ import annotations

import statistics
import time
from collections import Counter

from rich.console import Console, Group
from rich.live import Live
from rich.table import Table
from rich.text import Text

from bot.domain.bisect.verdict import Verdict
from bot.service.driver import Snapshot

STYLE = {Verdict.GOOD: "green", Verdict.BAD: "red", Verdict.SKIP: "yellow", Verdict.INFRA: "magenta"}


class LiveProgress:
    """An Observer: a status panel that redraws in place, with one printed line per finished run."""

    def __init__(self, console: Console, subjects: dict[str, str]):
        self.console = console
        self.subjects = subjects
        self.live = Live(console=console, refresh_per_second=4, transient=True)
        self._printed = 0

    def __enter__(self) -> LiveProgress:
        self.live.__enter__()
        return self

    def __exit__(self, *exc) -> None:
        self.live.__exit__(*exc)

    def __call__(self, snap: Snapshot) -> None:
        for sha, kind, verdict, metric in snap.runs[self._printed :]:
            value = f" {metric:.6g}" if metric is not None else ""
            subject = self.subjects.get(sha) or ("(HEAD + revert)" if kind == "ab_revert" else "")
            line = Text.assemble(
                ("  " + verdict.value.ljust(5), STYLE[verdict]), f" {sha[:12]} {kind:<9}{value}  {subject[:60]}"
            )
            self.console.print(line)
        self._printed = len(snap.runs)
        self.live.update(self.render(snap))

    def render(self, snap: Snapshot) -> Group:
        counts = Counter(v for _, _, v, _ in snap.runs)
        tested = len({sha for sha, _, v, _ in snap.runs if v.is_evidence})
        table = Table.grid(padding=(0, 2))
        table.add_row("phase", snap.phase.value)
        table.add_row("elapsed", f"{time.monotonic() - snap.started:.1f}s")
        table.add_row("runs", f"{len(snap.runs)}  " + "  ".join(f"{v.value} {counts[v]}" for v in Verdict if counts[v]))
        table.add_row("commits tested", f"{tested} of {snap.candidates}")
        table.add_row("running", ", ".join(s[:12] for s in snap.in_flight) or "-")
        if snap.guess_probability:
            guess = f"{snap.guess[:12]} {self.subjects.get(snap.guess, '')[:50]}" if snap.guess else "no culprit"
            table.add_row("best guess", f"{guess}  P={snap.guess_probability:.3f}")
        if snap.flake_rate:
            table.add_row("flake rate", f"{snap.flake_rate:.3f}")
        if sampled := _samples(snap):
            table.add_row("samples", sampled)
        for test, e in snap.tests.items():  # a row per test
            culprit = e.culprit or (e.best_guess if e.probability else None)
            said = f"{culprit[:12]} P={e.probability:.3f}" if culprit and not e.culprit else (culprit or "")[:12]
            table.add_row(test[-40:], f"{e.word:<16} {said}  {snap.test_runs.get(test, 0)} runs")
        return Group(Text(f"revert-bisect #{snap.bisection_id}", style="bold"), table)


def _samples(snap: Snapshot, most: int = 5) -> str:
    """A noisy metric's readings per commit, the most sampled first: `9a5dd1928d14 x6 median 100.2`."""
    readings: dict[str, list[float]] = {}
    for sha, _, _, metric in snap.runs:
        if metric is not None:
            readings.setdefault(sha, []).append(metric)
    if not any(len(v) > 1 for v in readings.values()):
        return ""
    ranked = sorted(readings.items(), key=lambda kv: -len(kv[1]))[:most]
    return "  ".join(f"{sha[:12]} x{len(v)} median {statistics.median(v):.6g}" for sha, v in ranked)
