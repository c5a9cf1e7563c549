"""The follow-up on a bisection's page: the issue or PR linked, and the candidates the finder passed over, each with
its reason in words (the finder stores a reason's code: bot.domain.followup.Passed)."""

from __future__ import annotations

from bot.domain.followup import Passed
from bot.domain.outcome import BisectionOutcome
from bot.web.models import PassedOverView

WORDS = {
    Passed.CLOSED: "closed (merged, abandoned or a closed issue)",
    Passed.REVERT: "a revert, not a fix",
    Passed.OTHER_DEFINITIONS: "changes the culprit's files, none of the definitions it changed",
    Passed.UNREAD: "changes the culprit's files, where its changes or the culprit's could not be read (no patch from "
    "GitHub, or not Python)",
    Passed.CITES_ONLY: "names the culprit, changes none of what it changed",
    Passed.OUTRANKED: "fits, but the follow-up shares more with the culprit",
    Passed.UNRELATED: "found by search or a cross-reference, shares nothing with the culprit",
}


def passed_over(outcome: BisectionOutcome) -> list[PassedOverView]:
    out = []
    for p in outcome.followup_passed_over:
        why = WORDS[Passed(p.reason)] if p.reason in {r.value for r in Passed} else p.reason
        shares = ", ".join(p.definitions or p.files)
        out.append(PassedOverView(number=p.number, why=why, shares=shares))
    return out
