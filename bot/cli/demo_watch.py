"""What the demo watches while the bot works: the bisection in the bot's store, not only GitHub's PR list.

The story can end four ways without a revert PR -- the bisection ends with another status, the proven
revert is refused, a job fails for good, the bot dies -- and each one is seen within a poll, so the demo
says why and exits instead of waiting for a PR that cannot come.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from sqlalchemy import create_engine, text
from sqlalchemy.engine import Engine
from sqlalchemy.exc import SQLAlchemyError

from bot.cli.wording import said
from bot.domain.bisect.ledger import entries
from bot.domain.outcome import parse_outcome

PUBLISH_GRACE_S = 90.0  # from "found, revert proven" to the PR on GitHub: branch push, PR, labels, comments


@dataclass(frozen=True)
class Ended:
    """The story ended without a revert PR: why, and the evidence to look at."""

    why: str
    failing_steps: tuple[str, ...] = ()


def failing_steps(steps: Iterable, limit: int = 3) -> tuple[str, ...]:
    """The first runs that said nothing about their commit (skip, infra, lost), each with its reason; `steps`
    are rows with a step's columns (kind, sha, verdict, state, infra_reason, log_tail), in the order run."""
    failing = [s for s in steps if s.verdict in ("skip", "infra") or s.state == "lost"][:limit]
    return tuple(
        f"{s.kind} run of {s.sha[:12]}: {s.verdict or s.state}: {s.infra_reason or _last_word(s.log_tail)}"
        for s in failing
    )


def _failing_steps(engine: Engine, bisection_id: int) -> tuple[str, ...]:
    return failing_steps(
        _rows(
            engine,
            "SELECT kind, sha, verdict, state, infra_reason, log_tail FROM steps WHERE bisection_id = :b "
            "AND (verdict IN ('skip', 'infra') OR state = 'lost') ORDER BY id LIMIT 3",
            b=bisection_id,
        )
    )


def _last_word(log_tail: str | None) -> str:
    """The run's last line: the runner's own explanation (environment, checkout) or the test's last word."""
    lines = [line.strip() for line in (log_tail or "").splitlines() if line.strip()]
    return (lines or ["(no output)"])[-1].removeprefix("revert-bisect: ")[:400]


def _rows(engine: Engine, sql: str, **params) -> list:
    with engine.connect() as conn:
        return list(conn.execute(text(sql), params))


class StoryWatch:
    """Polled by the demo's loop; `ended()` is None while a revert PR may still come."""

    def __init__(
        self,
        db_url: str,
        bot_alive: Callable[[], bool],
        *,
        publish_grace_s: float = PUBLISH_GRACE_S,
        clock: Callable[[], float],
    ):
        self.engine = create_engine(db_url)
        self.bot_alive = bot_alive
        self.publish_grace_s = publish_grace_s
        self.clock = clock
        self._proven_at: float | None = None
        self._idle_since: float | None = None  # since when every job is done and no bisection exists

    def progress(self) -> str:
        try:
            row = self._latest()
            if row is None:
                return "waiting for the bot to start a bisection"
            runs = _rows(
                self.engine,
                "SELECT count(*) AS n FROM steps WHERE bisection_id = :b AND state IN ('done', 'lost')",
                b=row.id,
            )[0].n
        except SQLAlchemyError:  # the bot has not created its store yet
            return "waiting for the bot"
        guess = (
            f", best guess {row.guess[:12]} (P={row.guess_probability:.2f})"
            if row.guess and row.guess_probability
            else ""
        )
        return f"bisection #{row.id}: {row.status or row.phase}, {runs} runs{guess}"

    def ended(self, opened: int = 0) -> Ended | None:
        """Why no (further) revert PR can come, or None; `opened`: the revert PRs on GitHub so far."""
        if not self.bot_alive():
            return Ended("the bot exited")
        try:
            failed = _rows(self.engine, "SELECT handler, error FROM jobs WHERE state = 'failed' ORDER BY id LIMIT 1")
            row = self._latest()
        except SQLAlchemyError:
            return None
        if failed:
            return Ended(f"the bot's {failed[0].handler} job failed: {failed[0].error}")
        if row is None:
            return self._nothing_started()
        if not row.status:
            return None
        return self._published(row, opened)

    def _nothing_started(self) -> Ended | None:
        """The bot handled every delivery and started no bisection (a red run it judged nothing to bisect: its log
        says why), and stayed so for the publish grace: no revert PR can come."""
        jobs = _rows(self.engine, "SELECT state, count(*) AS n FROM jobs GROUP BY state")
        done = sum(j.n for j in jobs if j.state == "done")
        if not done or any(j.state != "done" for j in jobs):
            self._idle_since = None
            return None
        self._idle_since = self._idle_since or self.clock()
        if self.clock() - self._idle_since <= self.publish_grace_s:
            return None
        return Ended(f"the bot handled the nightly's {done} webhook job(s) and started no bisection (its log says why)")

    def _published(self, row: _Latest, opened: int) -> Ended | None:
        """Ended once every culprit proven has its revert PR (one per culprit) or the publish grace is over, or
        when no culprit was proven at all."""
        found = [e.told for e in entries(row.tests_json) if e.culprit]
        refused = [o.revert_refused for o in found if o.revert_refused]
        if refused:
            return Ended(f"bisection #{row.id} found the culprit; the revert PR was refused: {refused[0]}")
        if not found:
            told = parse_outcome(row.outcome_json)
            message = said(told.message, told.reason, told.facts)
            return Ended(
                f"bisection #{row.id} ended {row.status}" + (f": {message}" if message else ""),
                _failing_steps(self.engine, row.id),
            )
        proven = {o.culprit for o in found if o.ab and o.ab.passed}
        if not proven:
            return Ended(
                f"bisection #{row.id} found {row.guess or 'a culprit'} but the revert was not proven: "
                f"{row.revert_error or 'HEAD + revert did not pass every A/B run'}"
            )
        self._proven_at = self._proven_at or self.clock()
        if self.clock() - self._proven_at <= self.publish_grace_s:
            return None
        if opened < len(proven):
            return Ended(
                f"bisection #{row.id} proved {len(proven)} revert(s), but only {opened} revert PR(s) appeared within "
                f"{self.publish_grace_s:.0f}s"
            )
        return Ended(f"bisection #{row.id} proved {len(proven)} revert(s): every one has its PR")

    def _latest(self):
        rows = _rows(
            self.engine,
            "SELECT id, phase, status, guess, guess_probability, revert_error, outcome, tests "
            "FROM bisections ORDER BY id DESC LIMIT 1",
        )
        if not rows:
            return None
        row = rows[0]
        return _Latest(
            row.id,
            row.phase,
            row.status,
            row.guess,
            row.guess_probability,
            row.revert_error,
            _json(row.outcome),
            _json(row.tests),
        )


@dataclass(frozen=True)
class _Latest:
    id: int
    phase: str
    status: str | None
    guess: str | None
    guess_probability: float | None
    revert_error: str | None
    outcome_json: dict | None
    tests_json: dict | None = None  # a group's tests (bisections.tests)


def _json(value) -> dict | None:
    import json

    if value is None or isinstance(value, dict):
        return value
    return json.loads(value)
