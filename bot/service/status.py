"""The one status comment per bisection, edited as it progresses (pure rendering)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence

from bot.domain.bisect.ledger import Entry, entries
from bot.domain.bisect.model import Problem
from bot.domain.markdown import code, text
from bot.domain.outcome import BisectionOutcome, best_guess_of, outcome_of
from bot.ports.store import BisectionRecord
from bot.service.snapshot import Snapshot
from bot.service.wording import said


def render_status(
    test: str,
    problem: Problem,
    snap: Snapshot | None,
    row: BisectionRecord | None,
    link: str | None = None,
    started: str = "",
) -> str:
    """`started`: a red run's, why it started when it did (bot.ingress.jobs.nightly)."""
    head = f"**revert-bisect** {code(test)}: {len(problem.graph)} commits in `{problem.good[:12]}..{problem.bad[:12]}`"
    if started:
        head += f"\n\nStarted {text(started)}."
    if row is not None and row.status:
        outcome = outcome_of(row) or BisectionOutcome()
        lines = [head, "", f"**{row.status}**: {said(test, outcome.message, outcome.reason, outcome.facts)}"]
        if guess := best_guess_of(row.status, outcome):  # named as what it is: never the culprit, never reverted
            named = _best_guess(guess, outcome.confidence)
            lines.append(f"\nNo culprit named: the {named} is not confirmed, so nothing is reverted.")
        if link:
            lines.append(f"\nRevert PR: {link}")
        lines += [f"- {text(note)}" for note in outcome.notes]  # skipped on the way, e.g. a reviewer GitHub refused
        ran = [s for s in row.steps if s.state in ("done", "lost")]
        ci = sum(len(e.ci) for e in entries(row.tests))
        infra = [s for s in ran if s.infra_reason]
        lines.append(
            f"\n{len(ran)} runs"
            + (f" (and {ci} readings of CI's scheduled runs, free)" if ci else "")
            + (f", {len(infra)} of them infrastructure failures (not evidence):" if infra else ".")
        )
        lines += [f"- `{s.sha[:12]}`: {text(s.infra_reason)}" for s in infra[-3:]]  # runner and git errors: any text
        carried = {e.test: sum(e.test in (s.results or {}) for s in ran) for e in entries(row.tests)}
        return "\n".join(lines + _tests_table(entries(row.tests), carried))
    if snap is None:
        return f"{head}\n\nStarting: calibrating the endpoints."
    counts = Counter(v.value for _, _, v, _ in snap.runs)
    tested = len({sha for sha, _, v, _ in snap.runs if v.is_evidence})
    guess = f"`{snap.guess[:12]}` (P={snap.guess_probability:.2f})" if snap.guess and snap.guess_probability else "-"
    tally = ", ".join(f"{k} {n}" for k, n in sorted(counts.items())) or "none yet"
    table = (
        f"{head}\n\n| phase | runs | commits tested | running | best guess |\n|---|---|---|---|---|\n"
        f"| {snap.phase.value} | {len(snap.runs)} ({tally}) | {tested} "
        f"| {len(snap.in_flight) - len(snap.waiting)} | {guess} |"
    )
    infra = snap.infra[-3:]
    lines = [table, *_tests_table(list(snap.tests.values()), snap.test_runs)]
    if snap.waiting:
        lines.append(
            f"\nWaiting for a runner ({len(snap.waiting)} steps):\n" + "\n".join(f"- {code(w)}" for w in snap.waiting)
        )
    if infra:
        lines.append(
            "\nRecent infrastructure failures (retried, never counted as evidence):\n"
            + "\n".join(f"- `{sha[:12]}`: {text(why)}" for sha, why in infra)
        )
    return "\n".join(lines)


def _tests_table(tests: Sequence[Entry], runs: Mapping[str, int]) -> list[str]:
    """The bisection's tests, a row each: how each stands or ended, its culprit (or best guess), the runs that
    carried it."""
    if not tests:
        return []
    rows = ["", "| test | status | culprit | runs |", "|---|---|---|---|"]
    for e in tests:
        guess = _best_guess(e.best_guess, e.probability) if e.best_guess else "-"
        said = f"`{e.culprit[:12]}`" if e.culprit else guess
        rows.append(f"| {code(e.test)} | {e.word} | {said} | {runs.get(e.test) or ''} |")
    return rows


def _best_guess(sha: str, probability: float | None) -> str:
    """`best guess `0123456789ab` (P=0.93)`: the commit an answer short of a culprit points at, with its posterior."""
    return f"best guess `{sha[:12]}`" + (f" (P={probability:.2f})" if probability else "")
