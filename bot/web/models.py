"""The dashboard's view models of a bisection: what its pages show and the JSON API answers.

Built from stored rows by bot.web.views (the list's summaries) and bot.web.detail (one bisection: its document,
bot.service.document, and what the page adds).
"""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, Field

from bot.domain.outcome import BisectionOutcome
from bot.service.document import BisectionDocument, DocStep


class BisectionSummary(BaseModel):
    id: int
    repository: str
    test: str
    good: str
    bad: str
    good_rev: str
    bad_rev: str
    state: str = Field(description="the outcome status once finished, else the engine's phase")
    running: bool
    culprit: str | None = Field(None, description="the commit to revert: set only once the status is found")
    best_guess: str | None = Field(
        None, description="an answer short of found (inconclusive, ambiguous): the commit it points at, never reverted"
    )
    culprit_pr: int | None = None
    revert_pr: int | None = None
    revert_pr_url: str | None = None
    created_at: datetime
    finished_at: datetime | None = None
    age: str = Field(description="time since the bisection was created, for display")


class BisectionPage(BaseModel):
    items: list[BisectionSummary]
    page: int
    per_page: int
    has_next: bool


class TimelineEntry(BaseModel):
    position: int = Field(description="0 is GOOD; the order is reconstructed from the search (see order_note)")
    sha: str
    role: str = Field(description="good | bad | culprit | best_guess | candidate | tested | untested")
    verdicts: list[str]
    metrics: list[float]
    runs: int
    running: int
    posterior: float | None = None
    subject: str | None = Field(None, description="the commit's subject (a squash merge's PR title)")
    author: str | None = None
    pr: int | None = Field(None, description="the PR number from the subject's (#N) suffix")


class CommitView(BaseModel):
    sha: str
    pr: int | None = None
    title: str | None = Field(None, description="the subject without its (#N) suffix: the PR title of a squash merge")
    author: str | None = None
    url: str | None = Field(
        None, description="the PR's page, when the revert PR's address shows where the repository lives"
    )


class ChartPoint(BaseModel):
    position: int
    sha: str
    metric: float
    verdict: str
    kind: str
    step_id: int


class ChartData(BaseModel):
    points: list[ChartPoint]
    positions: int
    threshold: float | None = None
    boundary: float | None = None
    higher_is_worse: bool = True
    culprit: int | None = Field(None, description="the culprit's position, once found")


class PosteriorEntry(BaseModel):
    sha: str
    position: int
    probability: float


class PosteriorView(BaseModel):
    guess: str | None = Field(None, description="the engine's best guess at its last decision")
    guess_probability: float | None = None
    flake_rate: float | None = None
    scope: str = Field(description="what `entries` is a posterior over")
    entries: list[PosteriorEntry] = []
    no_culprit: float | None = None
    note: str | None = None


class RoundView(BaseModel):
    round: int
    kinds: list[str]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[DocStep]


class PassedOverView(BaseModel):
    number: int
    why: str = Field(description="why it is not the follow-up, in words")
    shares: str = Field("", description="the definitions (else the files) it changes that the culprit changed")


class BisectionDetail(BisectionDocument):
    """The bisection's document (bot.service.document: what `bisect --json` and `status ID --json` give too), with
    what its page adds: the summary the list shows, the commits in range order, the chart, the posterior, the rounds,
    the publishing facts."""

    summary: BisectionSummary
    threshold: float | None = None
    boundary: float | None = Field(None, description="the same as metric_boundary")
    revert_error: str | None = None
    outcome: BisectionOutcome | None = Field(
        None, description="the stored outcome, as the driver and the publisher wrote it"
    )
    version: str = Field(
        description="changes whenever a step finishes or the bisection's row is written (the live page's signal)"
    )
    order_note: str
    timeline: list[TimelineEntry]
    round_views: list[RoundView] = Field(description="the steps by round, in the order the rounds started")
    chart: ChartData
    posterior: PosteriorView
    cost: str = Field("", description="the runs and their GPU-hours (cancelled runs included) beside git bisect run's")
    revert_pr_body: str | None = None
    followup: int | None = Field(None, description="the issue or PR the revert links as the proper fix's")
    followup_passed_over: list[PassedOverView] = Field(
        [], description="the follow-up's candidates not linked, with why (named nowhere on GitHub)"
    )
    culprit_commit: CommitView | None = Field(
        None, description="the culprit with its PR, title and author (from the recorded range); only once found"
    )
    best_guess_commit: CommitView | None = Field(
        None,
        description="an answer short of found (inconclusive, ambiguous): the commit it points at, as `culprit_commit` "
        "is shown, with `confidence` its posterior; never reverted",
    )
