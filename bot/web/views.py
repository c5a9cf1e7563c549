"""Stored rows -> the list's summaries (pure: no I/O, no git); the models are bot.web.models.

One bisection's whole page is bot.web.detail's; the trust report's, bot.web.trust_views'.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from bot.domain.outcome import BisectionOutcome, best_guess_of, culprit_of, outcome_of
from bot.domain.trust import repository_of
from bot.ports.store import FINISHED_STEP_STATES, BisectionRecord
from bot.service.describe import aware
from bot.web.models import BisectionSummary


def age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = max(0, int((now - aware(since)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("#").isdigit():
        return int(value.lstrip("#"))
    return None


def text_or_none(value) -> str | None:
    return value if isinstance(value, str) and value else None


def test_name(row: BisectionRecord) -> str:
    origin = row.origin or {}
    if text_or_none(origin.get("test")):
        return origin["test"]
    command = row.command or []
    return " ".join(str(c) for c in command) if command else "-"


def state_of(row: BisectionRecord) -> str:
    return row.status or row.phase


def _first(*values: Any) -> Any:
    return next((v for v in values if v is not None), None)


def summary(row: BisectionRecord, now: datetime) -> BisectionSummary:
    outcome = outcome_of(row) or BisectionOutcome()
    origin = row.origin or {}  # where the bisection was asked for; hand-made rows kept the PRs there
    url = text_or_none(_first(outcome.revert_pr_url, origin.get("revert_pr_url")))
    return BisectionSummary(
        id=row.id,
        repository=repository_of(row),
        test=test_name(row),
        good=row.good,
        bad=row.bad,
        good_rev=row.good_rev,
        bad_rev=row.bad_rev,
        state=state_of(row),
        running=row.status is None,
        culprit=text_or_none(culprit_of(row.status, outcome)),
        best_guess=text_or_none(best_guess_of(row.status, outcome)),
        culprit_pr=_int(_first(outcome.culprit_pr, origin.get("culprit_pr"))),
        revert_pr=_int(
            _first(outcome.revert_pr, outcome.legacy_revert_pr, origin.get("revert_pr"), origin.get("pr_number"))
        ),
        revert_pr_url=url if url and url.startswith(("https://", "http://")) else None,
        created_at=aware(row.created_at) or now,
        finished_at=aware(row.finished_at),
        age=age(row.created_at, now),
    )


def matches(s: BisectionSummary, repository: str | None, state: str | None, test: str | None) -> bool:
    if repository and repository.lower() not in s.repository.lower():
        return False
    if test and test.lower() not in s.test.lower():
        return False
    if state == "running":
        return s.running
    if state and state != s.state:
        return False
    return True


def version(row: BisectionRecord) -> str:
    return version_text(
        sum(s.state in FINISHED_STEP_STATES for s in row.steps), len(row.steps), row.phase, row.status, row.updated_at
    )


def version_text(finished: int, steps: int, phase: str, status: str | None, updated_at: datetime | None = None) -> str:
    """What changes whenever the page would: the live update's signal. The row's last write is part of it, for
    what the bot records after the bisection ends (the revert PR, a refusal)."""
    written = int(aware(updated_at).timestamp() * 1000) if updated_at else 0
    return f"{finished}/{steps}:{phase}:{status or ''}:{written}"
