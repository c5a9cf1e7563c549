"""Reads and writes of bisections and steps; every method is one transaction (bot.ports.store.BisectionStore)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from sqlalchemy import Engine, select, update
from sqlalchemy.orm import selectinload, sessionmaker

from bot.adapters.store.models import BisectionRow, StepRow, utcnow
from bot.domain.bisect import ledger
from bot.domain.bisect.ledger import Entry
from bot.domain.bisect.model import Phase
from bot.domain.errors import NotFound
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.ports.store import NewBisection, NewStep, StepReport


class Store:
    def __init__(self, engine: Engine):
        self.engine = engine
        self._session = sessionmaker(engine, expire_on_commit=False)

    def create(self, new: NewBisection, phase: str) -> int:
        with self._session.begin() as s:
            row = BisectionRow(
                repo=new.repo,
                good_rev=new.good_rev,
                bad_rev=new.bad_rev,
                good=new.good,
                bad=new.bad,
                command=new.command,
                settings=new.settings,
                head=new.head,
                origin=new.origin,
                origin_key=new.origin_key,
                commits=new.commits,
                tests=ledger.dump(new.tests),
                phase=phase,
            )
            s.add(row)
            s.flush()
            return row.id

    def get(self, bisection_id: int) -> BisectionRow:
        with self._session() as s:
            row = s.scalar(
                select(BisectionRow).where(BisectionRow.id == bisection_id).options(selectinload(BisectionRow.steps))
            )
            if row is None:
                raise NotFound(f"no bisection #{bisection_id} in this store; `revert-bisect status` lists them")
            return row

    def outcome(self, bisection_id: int) -> BisectionOutcome | None:
        return outcome_of(self.get(bisection_id))

    def recent(self, limit: int = 20) -> Sequence[BisectionRow]:
        with self._session() as s:
            query = (
                select(BisectionRow)
                .order_by(BisectionRow.id.desc())
                .limit(limit)
                .options(selectinload(BisectionRow.steps))
            )
            return s.scalars(query).all()

    def request_cancel(self, bisection_id: int, by: str) -> bool:
        """Ask the process driving an unfinished bisection to stop; False when it already finished."""
        with self._session.begin() as s:
            result = s.execute(
                update(BisectionRow)
                .where(BisectionRow.id == bisection_id, BisectionRow.status.is_(None))
                .values(cancel_requested_by=by)
            )
            return result.rowcount == 1

    def cancel_requested(self, bisection_id: int) -> bool:
        with self._session() as s:
            return s.scalar(select(BisectionRow.cancel_requested_by).where(BisectionRow.id == bisection_id)) is not None

    def by_origin_key(self, key: str) -> BisectionRow | None:
        """The newest bisection started for this request or range (a retried job finds it again)."""
        with self._session() as s:
            return s.scalar(
                select(BisectionRow).where(BisectionRow.origin_key == key).order_by(BisectionRow.id.desc()).limit(1)
            )

    def from_thread(self, repo: str, thread: int) -> Sequence[BisectionRow]:
        """Bisections asked for in one issue or PR (newest first).

        Filtered here to stay portable across JSON dialects.
        """
        with self._session() as s:
            rows = s.scalars(
                select(BisectionRow).where(BisectionRow.origin.is_not(None)).order_by(BisectionRow.id.desc()).limit(500)
            ).all()
            return [r for r in rows if r.origin.get("repo") == repo and r.origin.get("thread") == thread]

    def found_in(self, repo: str, limit: int = 500) -> Sequence[BisectionRow]:
        """The newest bisections of `repo` (as asked: origin's repository) that found a culprit.

        Filtered here to stay portable across JSON dialects."""
        with self._session() as s:
            rows = s.scalars(
                select(BisectionRow)
                .where(BisectionRow.origin.is_not(None), BisectionRow.status == "found")
                .order_by(BisectionRow.id.desc())
                .limit(limit)
            ).all()
            return [r for r in rows if r.origin.get("repo") == repo]

    def save_tests(self, bisection_id: int, tests: Sequence[Entry]) -> None:
        """Its tests, and what the bisection derives from them (bot.domain.bisect.ledger.summary)."""
        told = ledger.summary(tests)
        fields: dict[str, Any] = dict(
            tests=ledger.dump(tests),
            phase=told.phase.value,
            guess=told.guess,
            guess_probability=told.guess_probability,
            flake_rate=told.flake_rate,
            boundary=told.boundary,
            revert=told.revert,
            revert_error=told.revert_error,
        )
        if told.status is not None and told.outcome is not None:
            fields.update(status=told.status.value, outcome=told.outcome.as_json())
        self._update(bisection_id, fields, ended=told.status is not None)

    def save_outcome(self, bisection_id: int, status: str, outcome: BisectionOutcome) -> None:
        """An ended bisection's status and outcome."""
        self._update(bisection_id, dict(phase=Phase.DONE.value, status=status, outcome=outcome.as_json()), ended=True)

    def _update(self, bisection_id: int, fields: dict[str, Any], ended: bool) -> None:
        now = utcnow()
        with self._session.begin() as s:
            where = BisectionRow.id == bisection_id
            s.execute(update(BisectionRow).where(where).values(updated_at=now, **fields))
            if ended:  # when it ended, the first time it did
                s.execute(update(BisectionRow).where(where, BisectionRow.finished_at.is_(None)).values(finished_at=now))

    def add_steps(self, bisection_id: int, steps: Iterable[NewStep]) -> list[int]:
        """Record steps as running, in one transaction, before they are dispatched."""
        with self._session.begin() as s:
            rows = [
                StepRow(
                    bisection_id=bisection_id,
                    sha=st.sha,
                    kind=st.kind,
                    round=st.round,
                    state="running",
                    runner_ref=st.runner_ref,
                    backend=st.backend,
                    results=ledger.dump_results(st.results),
                )
                for st in steps
            ]
            s.add_all(rows)
            s.flush()
            return [r.id for r in rows]

    def finish_step(self, step_id: int, report: StepReport) -> None:
        with self._session.begin() as s:
            s.execute(
                update(StepRow)
                .where(StepRow.id == step_id, StepRow.state == "running")
                .values(
                    state="done",
                    finished_at=utcnow(),
                    **{**vars(report), "results": ledger.dump_results(report.results)},
                )
            )

    def mark_lost(
        self, bisection_id: int, reason: str, state: str = "lost", step_ids: Iterable[int] | None = None
    ) -> int:
        """Close steps still running (all of the bisection's, or just step_ids): `lost` (their
        process is gone: an infra result, kept, never believed) or `cancelled` (stopped on
        purpose: said nothing)."""
        verdict = "infra" if state == "lost" else None
        query = update(StepRow).where(StepRow.bisection_id == bisection_id, StepRow.state == "running")
        if step_ids is not None:
            query = query.where(StepRow.id.in_(list(step_ids)))
        with self._session.begin() as s:
            result = s.execute(query.values(state=state, infra_reason=reason, verdict=verdict, finished_at=utcnow()))
            return result.rowcount
