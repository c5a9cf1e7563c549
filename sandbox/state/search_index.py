"""GitHub's issue search index: it lags behind writes (REALITY.md: "Issue search is eventually consistent"; GitHub's
docs: an issue "may not be found for a while").

An issue last written less than `lag_s` ago is seen by search as it was when the index last caught it, or not at all
when the index never did: a new issue is not found at once, a label added a moment ago not matched. Issues written
longer ago are seen as they are. Only search reads the index; every other endpoint shows the issue the moment it is
written (the bot's lookups before a write list issues, never only search)."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

from ..models import Issue

DEFAULT_LAG_S = 5.0


def _epoch(iso: str) -> float:
    return datetime.fromisoformat(iso.replace("Z", "+00:00")).timestamp()


@dataclass
class SearchIndex:
    lag_s: float = DEFAULT_LAG_S
    clock: Callable[[], float] = time.time
    _seen: dict[tuple[str, int], Issue] = field(default_factory=dict)
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def view(self, repo_key: str, issue: Issue) -> Issue | None:
        """The issue as search sees it now: indexed when its last write is `lag_s` old, else the earlier copy."""
        key = (repo_key, issue.number)
        with self._lock:
            if self.clock() - _epoch(issue.updated_at) >= self.lag_s:
                copy = replace(issue, labels=list(issue.labels), pull=replace(issue.pull) if issue.pull else None)
                self._seen[key] = copy
                return copy
            return self._seen.get(key)
