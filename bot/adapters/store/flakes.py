"""Flakes seen (bot.adapters.store.models.FlakeRow): recorded once per (repository, test, run), counted per test."""

from __future__ import annotations

from sqlalchemy import Engine, func, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from bot.adapters.store.models import FlakeRow
from bot.domain.signals import Flake
from bot.ports.store import FlakeCount


class Flakes:
    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def record(self, flake: Flake) -> bool:
        """False when this (repository, test, run) was recorded already (a retried job, a second webhook)."""
        try:
            with self._session.begin() as s:
                known = s.scalar(
                    select(FlakeRow.id).where(
                        FlakeRow.repository == flake.repository,
                        FlakeRow.test == flake.test,
                        FlakeRow.run_id == flake.run_id,
                    )
                )
                if known is not None:
                    return False
                s.add(FlakeRow(**flake.__dict__))
            return True
        except IntegrityError:  # another replica recorded it between the check and the insert
            return False

    def per_test(self) -> list[FlakeCount]:
        """Every test's flakes, most first."""
        with self._session() as s:
            rows = s.execute(
                select(FlakeRow.repository, FlakeRow.test, func.count(FlakeRow.id), func.max(FlakeRow.id)).group_by(
                    FlakeRow.repository, FlakeRow.test
                )
            ).all()
            out = []
            for repository, test, count, newest in rows:
                last = s.get(FlakeRow, newest)
                if last is not None:
                    out.append(FlakeCount(repository, test, count, last.url, last.how, last.created_at))
        return sorted(out, key=lambda f: (-f.count, f.repository, f.test))
