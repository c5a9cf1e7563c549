"""One bisection's page (pure: no I/O, no git): the stored row -> bot.web.models.BisectionDetail.

What the engine decided (each run's verdict, the commits' order, the posterior) comes from
bot.domain.bisect.explain; this module only lays it out for the page and the API.
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from datetime import datetime

from bot.domain.bisect.explain import AB_KIND_VALUES, Masses, explain
from bot.domain.bisect.model import Problem, Settings
from bot.domain.bisect.verdict import MetricRule
from bot.domain.cost import cost_of_steps
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.domain.subjects import pr_number, strip_pr_number
from bot.ports.store import BisectionRecord
from bot.service.describe import config_of, describe, recorded_range
from bot.service.document import DocStep
from bot.service.group_rows import git_ranges
from bot.web.followup_views import passed_over
from bot.web.models import (
    BisectionDetail,
    BisectionSummary,
    ChartData,
    ChartPoint,
    CommitView,
    PosteriorEntry,
    PosteriorView,
    RoundView,
    TimelineEntry,
)
from bot.web.views import summary, text_or_none, version


def _config(row: BisectionRecord) -> dict:
    return row.settings if isinstance(row.settings, dict) else {}


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


def _posterior(row: BisectionRecord, order: list[str], masses: Masses) -> PosteriorView:
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
        (described[sha][1], described[sha][2]) if sha in described else (None, text_or_none(outcome.culprit_subject))
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
    "when it was dispatched): exact for searches in synchronous rounds that take a pass as proof (--flake-rate 0); "
    "under auto a commit below a pass may be read again and its place is then a guess; untested commits are not shown."
)


def detail(row: BisectionRecord, now: datetime) -> BisectionDetail:
    """The bisection's document on the range recorded when it started (bot.service.describe), and its page."""
    stored = outcome_of(row)
    outcome = stored or BisectionOutcome()
    problem = recorded_range(row)
    doc = describe(row, problem)
    config = _config(row)
    steps = sorted(row.steps, key=lambda s: s.id)
    recorded = [c[0] for c in row.commits or [] if isinstance(c, list) and c and isinstance(c[0], str)]
    told = explain(row.good, row.bad, _settings(config), steps, recorded, row.flake_rate)
    verdict_of = told.verdicts
    views = {view.id: view for view in doc.steps}
    range_steps = [s for s in steps if s.kind not in AB_KIND_VALUES]

    order, order_note = told.order, RANGE_NOTE if told.recorded else ORDER_NOTE
    position = {sha: i for i, sha in enumerate(order)}
    described = {c[0]: c for c in row.commits or [] if isinstance(c, list) and len(c) == 3}
    by_sha: dict[str, list[str]] = defaultdict(list)
    by_sha_steps: dict[str, list[DocStep]] = defaultdict(list)
    for s in range_steps:
        by_sha_steps[s.sha].append(views[s.id])
        if s.id in verdict_of and s.state in ("done", "lost"):
            by_sha[s.sha].append(verdict_of[s.id])
    posterior = _posterior(row, order, told.posterior)
    mass = {e.sha: e.probability for e in posterior.entries}
    head = summary(row, now)
    culprit, guess = doc.culprit, doc.best_guess  # a culprit only once found; short of it, the best guess
    candidates = doc.candidates

    def role(sha: str) -> str:
        if sha == row.good:
            return "good"
        if sha == culprit:
            return "culprit"
        if sha == guess:
            return "best_guess"
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
            metric=s.metric,
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

    rounds: dict[int, list[DocStep]] = defaultdict(list)
    for view in doc.steps:
        rounds[view.round].append(view)
    round_views = []
    for rnd, in_round in rounds.items():
        starts = [m.started_at for m in in_round if m.started_at]
        ends = [m.finished_at for m in in_round if m.finished_at]
        round_views.append(
            RoundView(
                round=rnd,
                kinds=list(dict.fromkeys(m.kind for m in in_round)),
                steps=in_round,
                started_at=min(starts) if starts else None,
                finished_at=max(ends) if ends and len(ends) == len(in_round) else None,
            )
        )
    round_views.sort(key=lambda r: (r.started_at or now, r.round))

    # the best guess as the range recorded it: nothing was published about it (no PR of its own, no subject stored)
    unpublished = head.model_copy(update={"culprit_pr": None})
    return BisectionDetail(
        **dict(doc),
        summary=head,
        threshold=threshold,
        boundary=row.boundary,
        revert_error=text_or_none(outcome.revert_error) or row.revert_error,
        outcome=stored,
        version=version(row),
        order_note=order_note,
        timeline=timeline,
        round_views=round_views,
        chart=chart,
        posterior=posterior,
        cost=_cost(row, problem) if told.recorded else "",
        revert_pr_body=text_or_none(outcome.pr_body),  # the body as drafted and published (bot.service.conclude)
        followup=outcome.followup,
        followup_passed_over=passed_over(outcome),
        culprit_commit=culprit_view(culprit, described, head, outcome) if culprit else None,
        best_guess_commit=culprit_view(guess, described, unpublished, BisectionOutcome()) if guess else None,
    )


def _cost(row: BisectionRecord, problem: Problem) -> str:
    """Runs and GPU-hours (runner-hours for a CLI command) beside git bisect run's estimate on each red test's own
    range (bot.service.group_rows.git_ranges) along the recorded range."""
    gpus = config_of(row).gpus
    return cost_of_steps(row.steps, gpus, git_ranges(row, problem)).describe() if row.steps else ""
