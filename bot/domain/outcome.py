"""What a bisection ended with, as stored in `bisections.outcome` (JSON) and read everywhere as this model.

Two writers fill it: the driver (the engine's answer: message, culprit, confidence, candidates, the A/B
proof) and the publisher, later (the publishing facts: the culprit's PR, the revert PR or why it was
refused, an earlier revert found on the branch, where the evidence was posted). `outcome_of` reads a row
tolerantly: rows written before this model, or by hand, may lack keys, carry others (kept, so a rewrite
loses nothing) or hold a value of the wrong type (dropped to its default rather than failing a page).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator


class AB(BaseModel):
    """The revert's proof: HEAD fails and HEAD + revert passes, run for run."""

    model_config = ConfigDict(extra="allow")

    head: str | None = None
    revert: str | None = None
    passed: bool = False
    head_verdicts: list[str] = []
    revert_verdicts: list[str] = []

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)


class BisectionOutcome(BaseModel):
    model_config = ConfigDict(extra="allow")

    status: str | None = None  # the row's status column is the authority; kept here when a writer gives it
    message: str | None = None
    culprit: str | None = None
    first_parent_culprit: str | None = None
    confidence: float | None = None
    candidates: list[str] = []
    revert_error: str | None = None
    ab: AB | None = None
    reason: str | None = None  # bot.domain.reasons.Reason's code: each surface words its remedy from it and `facts`
    facts: dict[str, Any] = {}
    # the publishing facts
    culprit_pr: int | None = None
    culprit_subject: str | None = None
    revert_pr: int | None = None
    revert_pr_url: str | None = None
    revert_refused: str | None = None
    revert_refused_reason: str | None = None  # the guard's key, e.g. "kill_switch"
    already_reverted: dict[str, Any] | None = None  # RevertFound.as_json()
    evidence_on: int | None = None
    pr_body: str | None = None
    branch: str | None = None
    followup: int | None = None
    notes: list[str] = []  # what publishing skipped or was refused on the way (a reviewer GitHub refused), said

    @field_validator("revert_pr", "culprit_pr", "evidence_on", "followup", mode="before")
    @classmethod
    def _pr_number(cls, value: Any) -> Any:
        """A PR or issue number; written by hand as `#12` too, never a bool (True is no PR)."""
        if isinstance(value, bool):
            raise ValueError("a PR number, not a bool")
        return value.lstrip("#") if isinstance(value, str) else value

    def with_facts(self, **facts: Any) -> BisectionOutcome:
        """This outcome with the publisher's facts added (validated like a stored row)."""
        return parse_outcome({**self.as_json(), **facts})

    def as_json(self) -> dict[str, Any]:
        return self.model_dump(mode="json", exclude_unset=True)  # the keys the writer gave, nulls included


def parse_outcome(data: Any) -> BisectionOutcome:
    """`data` as an outcome; a field whose value does not fit is dropped (a damaged row still shows the rest)."""
    if not isinstance(data, dict):
        return BisectionOutcome()
    data = dict(data)
    for _ in range(len(data) + 1):  # each pass drops at least one bad key, so this ends
        try:
            return BisectionOutcome.model_validate(data)
        except ValidationError as exc:
            bad = {err["loc"][0] for err in exc.errors() if err["loc"]}
            if not bad & data.keys():
                break
            for key in bad:
                data.pop(key, None)
    return BisectionOutcome()


def outcome_of(row: Any) -> BisectionOutcome | None:
    """The row's outcome, or None while it has none (the bisection is still running)."""
    data = getattr(row, "outcome", None)
    return parse_outcome(data) if data else None
