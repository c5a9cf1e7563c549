"""Stored rows -> view models (pure: no I/O, no git). The same models are the JSON API's responses.

What the engine decided (each run's verdict, the commits' order, the posterior) comes from
bot.domain.bisect.explain; this module only lays it out for the pages and the API.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime

from pydantic import BaseModel, Field

from bot.adapters.store.models import BisectionRow, HoldRow, StepRow
from bot.adapters.store.queries import FINISHED_STEP_STATES
from bot.domain.bisect.explain import AB_KIND_VALUES, Masses, explain, order_commits  # noqa: F401 (order_commits: tests)
from bot.domain.bisect.model import Settings
from bot.domain.bisect.verdict import MetricRule
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.domain.subjects import pr_number, strip_pr_number
from bot.domain.trust import REASON_LABELS, TrustReport, TrustRow, repository_of

RUN_URL = re.compile(r"\((https?://[^()\s]+)\)")


# -- view models (also the JSON API's response models) --------------------------------------------


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
    culprit: str | None = None
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


class StepView(BaseModel):
    id: int
    sha: str
    kind: str
    round: int
    state: str
    verdict: str | None = None
    exit_code: int | None = None
    metric: float | None = None
    runner: str | None = None
    run_urls: list[str] = []
    duration_s: float | None = None
    infra_reason: str | None = None
    env_key: str | None = None
    env_reused: bool | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None


class TimelineEntry(BaseModel):
    position: int = Field(description="0 is GOOD; the order is reconstructed from the search (see order_note)")
    sha: str
    role: str = Field(description="good | bad | culprit | candidate | tested | untested")
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


class ABView(BaseModel):
    head: str | None = None
    revert: str | None = None
    passed: bool | None = None
    head_verdicts: list[str] = []
    revert_verdicts: list[str] = []
    steps: list[StepView] = []


class RoundView(BaseModel):
    round: int
    kinds: list[str]
    started_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[StepView]


class BisectionDetail(BaseModel):
    summary: BisectionSummary
    phase: str
    status: str | None = None
    message: str | None = None
    confidence: float | None = None
    candidates: list[str] = []
    revert_error: str | None = None
    threshold: float | None = None
    boundary: float | None = None
    outcome: BisectionOutcome | None = Field(
        None, description="the stored outcome, as the driver and the publisher wrote it"
    )
    version: str = Field(
        description="changes whenever a step finishes or the bisection's row is written (the live page's signal)"
    )
    order_note: str
    steps: list[StepView]
    timeline: list[TimelineEntry]
    rounds: list[RoundView]
    chart: ChartData
    posterior: PosteriorView
    ab: ABView | None = None
    revert_pr_body: str | None = None
    culprit: CommitView | None = Field(
        None, description="the culprit with its PR, title and author (from the recorded range)"
    )


# -- helpers ----------------------------------------------------------------------------------------


def aware(dt: datetime | None) -> datetime | None:
    """SQLite hands back naive datetimes; everything the store writes is UTC."""
    if dt is None:
        return None
    return dt if dt.tzinfo is not None else dt.replace(tzinfo=UTC)


def age(since: datetime | None, now: datetime) -> str:
    if since is None:
        return "-"
    seconds = max(0, int((now - aware(since)).total_seconds()))
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{seconds // size} {unit} ago"
    return f"{seconds} s ago"


def run_urls(runner: str | None) -> list[str]:
    return RUN_URL.findall(runner or "")


def runner_label(runner: str | None) -> str:
    return RUN_URL.sub("", runner or "").strip()


def _int(value) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.lstrip("#").isdigit():
        return int(value.lstrip("#"))
    return None


def _str(value) -> str | None:
    return value if isinstance(value, str) and value else None


def _config(row: BisectionRow) -> dict:
    return row.settings if isinstance(row.settings, dict) else {}


def test_name(row: BisectionRow) -> str:
    origin = row.origin or {}
    if _str(origin.get("test")):
        return origin["test"]
    command = row.command or []
    return " ".join(str(c) for c in command) if command else "-"


def state_of(row: BisectionRow) -> str:
    return row.status or row.phase


def _lookup(outcome: BisectionOutcome, row: BisectionRow, *keys: str):
    """The first of `keys` the outcome has (a field, or a key older rows kept, like `pr_number`), else the origin's."""
    for source in (outcome.as_json(), row.origin or {}):
        for key in keys:
            if source.get(key) is not None:
                return source[key]
    return None


def summary(row: BisectionRow, now: datetime) -> BisectionSummary:
    outcome = outcome_of(row) or BisectionOutcome()
    url = _str(_lookup(outcome, row, "revert_pr_url"))
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
        culprit=_str(outcome.culprit),
        culprit_pr=_int(_lookup(outcome, row, "culprit_pr")),
        revert_pr=_int(_lookup(outcome, row, "revert_pr", "pr_number")),
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


def version(row: BisectionRow) -> str:
    return version_text(
        sum(s.state in FINISHED_STEP_STATES for s in row.steps), len(row.steps), row.phase, row.status, row.updated_at
    )


def version_text(finished: int, steps: int, phase: str, status: str | None, updated_at: datetime | None = None) -> str:
    """What changes whenever the page would: the live update's signal. The row's last write is part of it, for
    what the bot records after the bisection ends (the revert PR, a refusal)."""
    written = int(aware(updated_at).timestamp() * 1000) if updated_at else 0
    return f"{finished}/{steps}:{phase}:{status or ''}:{written}"


def step_view(step: StepRow, verdict: str | None = None) -> StepView:
    return StepView(
        id=step.id,
        sha=step.sha,
        kind=step.kind,
        round=step.round,
        state=step.state,
        verdict=verdict or step.verdict,
        exit_code=step.exit_code,
        metric=step.metric,
        runner=runner_label(step.runner) or None,
        run_urls=run_urls(step.runner),
        duration_s=step.duration_s,
        infra_reason=step.infra_reason,
        env_key=step.env_key,
        env_reused=step.env_reused,
        started_at=aware(step.started_at),
        finished_at=aware(step.finished_at),
    )


def _rule(config: dict) -> MetricRule | None:
    if not (config.get("metric_file") or config.get("metric_regex")):
        return None
    threshold = config.get("threshold")
    return MetricRule(
        float(threshold) if isinstance(threshold, (int, float)) else None, bool(config.get("higher_is_worse", True))
    )


def _settings(config: dict) -> Settings:
    declared = config.get("flake_rate")
    return Settings(metric=_rule(config), flake_rate=float(declared) if isinstance(declared, (int, float)) else None)


def _posterior(row: BisectionRow, order: list[str], masses: Masses) -> PosteriorView:
    base = dict(guess=row.guess, guess_probability=row.guess_probability, flake_rate=row.flake_rate)
    scope = (
        "the tested commits only, in the order above: the store does not keep the range's size, so untested "
        "commits between them are not weighed (the engine's own guess and probability above are over the whole range)"
    )
    if masses.note:
        return PosteriorView(**base, scope=scope, note=masses.note)
    entries = [
        PosteriorEntry(sha=sha, position=i, probability=masses.by_position[i]) for i, sha in enumerate(order) if i >= 1
    ]
    return PosteriorView(**base, scope=scope, entries=entries, no_culprit=masses.no_culprit, note=None)


PULL_URL = re.compile(r"^(https?://.+)/pull/\d+$")


def culprit_view(sha: str, described: dict[str, list], head: BisectionSummary, outcome: BisectionOutcome) -> CommitView:
    """The culprit as the range recorded it (author, subject), else as the outcome stored it (subject, PR number)."""
    author, subject = (
        (described[sha][1], described[sha][2]) if sha in described else (None, _str(outcome.culprit_subject))
    )
    pr = head.culprit_pr or (pr_number(subject) if subject else None)
    base = PULL_URL.match(head.revert_pr_url or "")
    return CommitView(
        sha=sha,
        pr=pr,
        title=strip_pr_number(subject) if subject else None,
        author=author or None,
        url=f"{base.group(1)}/pull/{pr}" if base and pr else None,
    )


def collapse_untested(
    timeline: Sequence[TimelineEntry], shortest: int = 2
) -> list[TimelineEntry | list[TimelineEntry]]:
    """The timeline as the page shows it: a run of `shortest` or more untested commits becomes one list
    (one row, "9 commits not tested"), so a long range reads as its tested commits and the gaps between them."""
    out: list[TimelineEntry | list[TimelineEntry]] = []
    run: list[TimelineEntry] = []
    for entry in [*timeline, None]:
        if entry is not None and entry.role == "untested":
            run.append(entry)
            continue
        out.extend([run] if len(run) >= shortest else run)
        run = []
        if entry is not None:
            out.append(entry)
    return out


RANGE_NOTE = "Every first-parent commit of the range, oldest first, as recorded when the bisection started."
ORDER_NOTE = (
    "Commits that were run, oldest first. The store does not keep the range's commit list, so the order is "
    "reconstructed from the search (each probe lies between the last commit known good and the first known bad "
    "when it was dispatched): exact for searches in synchronous rounds; untested commits are not shown."
)


def detail(row: BisectionRow, now: datetime) -> BisectionDetail:
    stored = outcome_of(row)
    outcome = stored or BisectionOutcome()
    config = _config(row)
    steps = sorted(row.steps, key=lambda s: s.id)
    recorded = [c[0] for c in row.commits or [] if isinstance(c, list) and c and isinstance(c[0], str)]
    told = explain(row.good, row.bad, _settings(config), steps, recorded, row.flake_rate)
    verdict_of = told.verdicts
    views = {s.id: step_view(s, verdict_of.get(s.id)) for s in steps}
    range_steps = [s for s in steps if s.kind not in AB_KIND_VALUES]
    ab_steps = [views[s.id] for s in steps if s.kind in AB_KIND_VALUES]

    order, order_note = told.order, RANGE_NOTE if told.recorded else ORDER_NOTE
    position = {sha: i for i, sha in enumerate(order)}
    described = {c[0]: c for c in row.commits or [] if isinstance(c, list) and len(c) == 3}
    by_sha: dict[str, list[str]] = defaultdict(list)
    by_sha_steps: dict[str, list[StepView]] = defaultdict(list)
    for s in range_steps:
        by_sha_steps[s.sha].append(views[s.id])
        if s.id in verdict_of and s.state in ("done", "lost"):
            by_sha[s.sha].append(verdict_of[s.id])
    posterior = _posterior(row, order, told.posterior)
    mass = {e.sha: e.probability for e in posterior.entries}
    culprit = _str(outcome.culprit)
    candidates = outcome.candidates

    def role(sha: str) -> str:
        if sha == row.good:
            return "good"
        if sha == culprit:
            return "culprit"
        if sha == row.bad:
            return "bad"
        if sha in candidates:
            return "candidate"
        return "tested" if by_sha_steps.get(sha) else "untested"

    timeline = [
        TimelineEntry(
            position=i,
            sha=sha,
            role=role(sha),
            verdicts=by_sha.get(sha, []),
            metrics=[v.metric for v in by_sha_steps.get(sha, []) if v.metric is not None],
            runs=sum(v.state in ("done", "lost") for v in by_sha_steps.get(sha, [])),
            running=sum(v.state == "running" for v in by_sha_steps.get(sha, [])),
            posterior=mass.get(sha),
            subject=described[sha][2] if sha in described else None,
            author=described[sha][1] if sha in described else None,
            pr=pr_number(described[sha][2]) if sha in described else None,
        )
        for i, sha in enumerate(order)
    ]
    points = [
        ChartPoint(
            position=position[s.sha],
            sha=s.sha,
            metric=views[s.id].metric,
            verdict=views[s.id].verdict or s.state,
            kind=s.kind,
            step_id=s.id,
        )
        for s in range_steps
        if s.metric is not None and s.sha in position
    ]
    threshold = (
        config.get("threshold")
        if isinstance(config.get("threshold"), (int, float)) and not isinstance(config.get("threshold"), bool)
        else None
    )
    chart = ChartData(
        points=points,
        positions=len(order),
        threshold=threshold,
        boundary=row.boundary,
        higher_is_worse=bool(config.get("higher_is_worse", True)),
        culprit=position.get(culprit) if culprit else None,
    )

    rounds: dict[int, list[StepView]] = defaultdict(list)
    for s in steps:
        rounds[s.round].append(views[s.id])
    round_views = []
    for rnd, members in rounds.items():
        starts = [m.started_at for m in members if m.started_at]
        ends = [m.finished_at for m in members if m.finished_at]
        round_views.append(
            RoundView(
                round=rnd,
                kinds=list(dict.fromkeys(m.kind for m in members)),
                steps=members,
                started_at=min(starts) if starts else None,
                finished_at=max(ends) if ends and len(ends) == len(members) else None,
            )
        )
    round_views.sort(key=lambda r: (r.started_at or now, r.round))

    ab = None
    if outcome.ab or ab_steps:
        ab_out = outcome.ab
        ab = ABView(
            head=_str(ab_out and ab_out.head) or row.head,
            revert=_str(ab_out and ab_out.revert) or row.revert,
            passed=ab_out.passed if ab_out and "passed" in ab_out.model_fields_set else None,
            head_verdicts=ab_out.head_verdicts if ab_out else [],
            revert_verdicts=ab_out.revert_verdicts if ab_out else [],
            steps=ab_steps,
        )
    body = _str(outcome.pr_body)  # the body as drafted and published (Bisections._publish)
    head = summary(row, now)
    return BisectionDetail(
        summary=head,
        phase=row.phase,
        status=row.status,
        message=_str(outcome.message),
        confidence=outcome.confidence,
        candidates=candidates,
        revert_error=_str(outcome.revert_error) or row.revert_error,
        threshold=threshold,
        boundary=row.boundary,
        outcome=stored,
        version=version(row),
        order_note=order_note,
        steps=list(views.values()),
        timeline=timeline,
        rounds=round_views,
        chart=chart,
        posterior=posterior,
        ab=ab,
        revert_pr_body=body,
        culprit=culprit_view(culprit, described, head, outcome) if culprit else None,
    )


# -- the trust report (bot.domain.trust) -------------------------------------------------------------------


class RefusalCount(BaseModel):
    reason: str = Field(
        description="the guard that refused, e.g. daily_cap, culprit_too_old, kill_switch; "
        "other: unknown to this version"
    )
    label: str
    count: int


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
    reverts_refused: int
    refused: list[RefusalCount] = Field(description="refused reverts by reason, most frequent first")


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


class TrustReportView(BaseModel):
    repositories: list[TrustRowView]
    total: TrustRowView
    note: str
    holds: list[HoldView] = Field(default_factory=list, description="what the kill switch held back, newest first")


TRUST_NOTE = (
    "A revert counts as a false positive when a commit with the culprit's git patch-id --stable (the same change, "
    "unchanged) landed on the default branch after the head the revert was made on. That is read from the bot's clone "
    "of each repository in its workspace; without one it is unknown."
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
        reverts_refused=row.reverts_refused,
        refused=[RefusalCount(reason=k, label=REASON_LABELS.get(k, k), count=n) for k, n in refused],
    )


def trust_view(report: TrustReport, holds: Iterable[HoldRow] = ()) -> TrustReportView:
    """A bot.domain.trust.TrustReport as the API gives it, with the kill switch's holds (bot.adapters.store.holds)."""
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
    )
