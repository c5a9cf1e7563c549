"""What the kill switch held back (bot.adapters.store.models.HoldRow): recorded once per key, listed newest first
(bot.ports.store.HoldLog)."""

from __future__ import annotations

from collections.abc import Sequence

from sqlalchemy import Engine, select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import sessionmaker

from bot.adapters.store.models import HoldRow
from bot.ports.store import Hold


class Holds:
    def __init__(self, engine: Engine):
        self._session = sessionmaker(engine, expire_on_commit=False)

    def record(self, hold: Hold) -> bool:
        """False when this key was already recorded."""
        try:
            with self._session.begin() as s:
                if s.scalar(select(HoldRow.id).where(HoldRow.key == hold.key)) is not None:
                    return False
                s.add(HoldRow(**hold.__dict__))
            return True
        except IntegrityError:  # another replica recorded it between the check and the insert
            return False

    def recent(self, limit: int = 50) -> Sequence[HoldRow]:
        with self._session() as s:
            return s.scalars(select(HoldRow).order_by(HoldRow.id.desc()).limit(limit)).all()
