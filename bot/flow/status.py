"""The one status comment per bisection, edited as it progresses (pure rendering)."""

from __future__ import annotations

from collections import Counter

from bot.bisect.model import Problem
from bot.orchestrator.driver import Snapshot
from bot.store.models import BisectionRow


def render_status(test: str, problem: Problem, snap: Snapshot | None, row: BisectionRow | None, link: str | None = None) -> str:
    head = f"**revert-bisect** `{test}`: {len(problem.graph)} commits in `{problem.good[:12]}..{problem.bad[:12]}`"
    if row is not None and row.status:
        outcome = row.outcome or {}
        lines = [head, "", f"**{row.status}**: {outcome.get('message', '')}"]
        if link:
            lines.append(f"\nRevert PR: {link}")
        ran = sum(s.state in ("done", "lost") for s in row.steps)
        lines.append(f"\n{ran} runs.")
        return "\n".join(lines)
    if snap is None:
        return f"{head}\n\nStarting: calibrating the endpoints."
    counts = Counter(v.value for _, _, v, _ in snap.runs)
    tested = len({sha for sha, _, v, _ in snap.runs if v.is_evidence})
    guess = f"`{snap.guess[:12]}` (P={snap.guess_probability:.2f})" if snap.guess and snap.guess_probability else "-"
    tally = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none yet"
    return (f"{head}\n\n| phase | runs | commits tested | running | best guess |\n|---|---|---|---|---|\n"
            f"| {snap.phase.value} | {len(snap.runs)} ({tally}) | {tested} | {len(snap.in_flight)} | {guess} |")
