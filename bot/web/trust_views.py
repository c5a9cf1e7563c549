"""The trust report (bot.domain.trust) and the kill switch's holds as the dashboard and the JSON API give them."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime

from pydantic import BaseModel, Field

from bot.domain.trust import REASON_LABELS, TrustReport, TrustRow
from bot.ports.store import FlakeCount, HoldRecord


class RefusalCount(BaseModel):
    reason: str = Field(
        description="the guard that refused, e.g. daily_cap, culprit_too_old, kill_switch; "
        "other: unknown to this version"
    )
    label: str
    count: int


class IncidentView(BaseModel):
    kind: str = Field(
        description="relanded: a revert whose culprit came back unchanged (a false positive); flagged: a culprit the "
        "bot named; missed: a commit of a bisected range reverted by someone else, never named by the bot"
    )
    culprit: str = Field(description="the commit (re-landed, flagged, or reverted by someone else)")
    subject: str = ""
    pr: int | None = Field(None, description="the revert's PR: the bot's (relanded, flagged), the human's (missed)")
    revert: str | None = Field(None, description="the human revert's commit (missed)")


class TrustRowView(BaseModel):
    repository: str
    bisections: int = Field(description="finished bisections (running ones are not counted)")
    confirmed: int = Field(description="culprits confirmed: status found")
    inconclusive: int = Field(
        description="finished without a confirmed culprit "
        "(ambiguous, inconclusive, no_culprit, untestable, ...), cancelled excluded"
    )
    cancelled: int
    confirmed_rate: float | None = Field(None, description="confirmed / (confirmed + inconclusive)")
    statuses: dict[str, int] = Field(description="finished bisections by status")
    reverts_opened: int
    relanded: int = Field(
        description="reverts whose culprit later landed again unchanged (same `git patch-id --stable`) "
        "on the default branch: false positives"
    )
    relanded_unknown: int = Field(
        description="reverts for which that is unknown (no clone in the workspace, culprit not fetched, ...)"
    )
    relanded_known: bool = Field(description="false when relanded is unknown for every revert opened")
    false_positive_rate: float | None = Field(None, description="relanded / reverts with a known answer")
    precision: float | None = Field(
        None,
        description="reverts that were right / reverts the bot made (with a known answer), a revert re-landed "
        "unchanged being a false positive, as PyTorch measures its auto-revert's",
    )
    reverts_refused: int
    refused: list[RefusalCount] = Field(description="refused reverts by reason, most frequent first")
    flagged: int = Field(description="distinct culprits the bot named (status found)")
    regressions: int = Field(
        description="commits inside a range the bot bisected (a watched test went red over it) reverted on the "
        "default branch by anyone, the bot's merged reverts included, that did not come back unchanged"
    )
    caught: int = Field(description="regressions the bot named")
    missed: int = Field(description="regressions the bot never named")
    misses_known: bool = Field(description="false when the default branch's reverts could not be read (no clone)")
    recall: float | None = Field(None, description="caught / regressions, as PyTorch measures its auto-revert's")
    incidents: list[IncidentView] = Field(description="the facts behind the figures: re-landed, flagged, missed")


class HoldView(BaseModel):
    repository: str
    guard: str = Field(description="the guard that held it back: kill_switch")
    what: str = Field(
        description="what was held back (a red run, a bisection not started, a revert not opened), as said on the issue"
    )
    link: str | None = Field(None, description="the red run, the thread that asked, or the culprit PR")
    issue: int | None = Field(None, description="the kill-switch issue the hold was commented on")
    culprit: str | None = None
    at: datetime


class FlakeView(BaseModel):
    repository: str
    test: str = Field(description="the policy's test id")
    count: int = Field(description="red runs in which it failed and then passed on the same commit, not bisected")
    last_how: str = Field(description="how it passed the last time: a re-run attempt, or the suite runner's retry")
    last_url: str | None = Field(None, description="the last such run")
    last_at: datetime


class TrustReportView(BaseModel):
    repositories: list[TrustRowView]
    total: TrustRowView
    note: str
    holds: list[HoldView] = Field(default_factory=list, description="what the kill switch held back, newest first")
    flakes: list[FlakeView] = Field(
        default_factory=list, description="flakes seen per test (failed, then passed on a re-run), most first"
    )


TRUST_NOTE = (
    "Precision and recall as PyTorch measures its auto-revert's, each from its own events. Precision: of the reverts "
    "the bot made, the ones that were right; a revert is a false positive when a commit with the culprit's git "
    "patch-id --stable (the same change, unchanged) landed on the default branch after the head the revert was made "
    "on. That is read from the bot's clone of each repository in its workspace; without one it is unknown. Recall: of "
    "the regressions -- commits inside a range the bot bisected (a watched test went red over it) reverted on the "
    "default branch by anyone, the bot's merged reverts included, and not re-landed unchanged since -- the ones the "
    "bot named. A revert of the bot's re-landed unchanged counts against precision and never for recall. The reverts "
    'are read from the same clones (`This reverts commit <sha>`, or a squash merge\'s `Revert "<subject>"`).'
)


def trust_row_view(row: TrustRow) -> TrustRowView:
    """A bot.domain.trust.TrustRow as the API gives it."""
    refused = sorted(row.refused.items(), key=lambda kv: (-kv[1], kv[0]))
    return TrustRowView(
        repository=row.repository,
        bisections=row.bisections,
        confirmed=row.confirmed,
        inconclusive=row.inconclusive,
        cancelled=row.cancelled,
        confirmed_rate=row.confirmed_rate,
        statuses=dict(sorted(row.statuses.items())),
        reverts_opened=row.reverts_opened,
        relanded=row.relanded,
        relanded_unknown=row.relanded_unknown,
        relanded_known=row.reverts_opened == 0 or row.relanded_unknown < row.reverts_opened,
        false_positive_rate=row.false_positive_rate,
        precision=row.precision,
        reverts_refused=row.reverts_refused,
        refused=[RefusalCount(reason=k, label=REASON_LABELS.get(k, k), count=n) for k, n in refused],
        flagged=row.flagged,
        regressions=row.regressions,
        caught=row.caught,
        missed=row.missed,
        misses_known=row.misses_known,
        recall=row.recall,
        incidents=[IncidentView(**i.__dict__) for i in row.incidents],
    )


def trust_view(
    report: TrustReport, holds: Iterable[HoldRecord] = (), flakes: Iterable[FlakeCount] = ()
) -> TrustReportView:
    """A bot.domain.trust.TrustReport as the API gives it, with the kill switch's holds (bot.ports.store.HoldLog)
    and the flakes seen per test (bot.ports.store.FlakeCounts)."""
    return TrustReportView(
        repositories=[trust_row_view(r) for r in report.rows],
        total=trust_row_view(report.total),
        note=TRUST_NOTE,
        holds=[
            HoldView(
                repository=h.repository,
                guard=h.guard,
                what=h.what,
                link=h.link,
                issue=h.issue,
                culprit=h.culprit,
                at=h.created_at,
            )
            for h in holds
        ],
        flakes=[FlakeView(**f.__dict__) for f in flakes],
    )
