"""The facts of the revert's case (bot.domain.case) read from a finished bisection's steps and the clone: the failing
assertion (CI's log first, else the bot's own run), CI's scheduled runs before and since the failure, how the culprit's
and HEAD's runs read, and what the culprit changes that the window's other commits touch."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.domain.bisect.evidence import Evidence
from bot.domain.bisect.ledger import ci_runs, entry, runs_of
from bot.domain.bisect.model import BISECT_KINDS, Kind, Problem
from bot.domain.bisect.verdict import Verdict
from bot.domain.case import Overlap, Spread, assertion_line, overlap, red_since, spread
from bot.domain.hunks import headed_definitions
from bot.domain.requests import CiReading
from bot.ports import Git
from bot.ports.store import BisectionRecord


@dataclass(frozen=True)
class Case:
    assertion: str | None
    assertion_from_ci: bool
    assertion_at: str  # the commit the bot's run that printed it ran (when not CI's)
    green: CiReading | None  # CI's last scheduled run that passed
    red: tuple[CiReading, ...]  # CI's scheduled runs that failed since
    culprit: Spread  # the bot's failing runs of the culprit
    head: Spread  # the A/B's runs of HEAD
    overlap: Overlap
    others: int  # the window's other commits


def case_of(row: BisectionRecord, problem: Problem, repo: Git, culprit: str, test: str) -> Case:
    """The case of `test` (one of the bisection's tests), from CI's readings of it and the runs that carried it."""
    readings = entry(row.tests, test).ci
    pairs = [(step, run) for step in row.steps for run in runs_of(step) if run.test == test]
    judged = Evidence.of(problem, ci_runs([entry(row.tests, test)]) + [run for _, run in pairs]).verdicts
    said_by_ci, judged = [v for _, v in judged[: len(readings)]], judged[len(readings) :]
    failing = [(step, run) for (step, run), (_, v) in zip(pairs, judged) if v is Verdict.BAD]
    order = {sha: i for i, sha in enumerate([problem.good, *problem.scope(()).candidates])}
    ci = sorted(
        ((i, c, v) for i, (c, v) in enumerate(zip(readings, said_by_ci)) if v.is_evidence),
        key=lambda icv: (order.get(icv[1].sha, len(order)), icv[0]),
    )
    green, red = red_since([replace(c, passed=v is Verdict.GOOD) for _, c, v in ci])  # as the evidence judges it
    ci_line = assertion_line(c.line for _, c, v in ci if v is Verdict.BAD)
    # the bot's own: a run of the culprit first, else any failing run (HEAD's in the A/B), with where it ran
    # (a step that ran several tests has one log for all: which test printed a line is not known, so none is quoted)
    mine = sorted((p for p in failing if len(p[0].results or {}) <= 1), key=lambda p: p[1].sha != culprit)
    said = ((assertion_line([step.log_tail], _said(run.raw.metric)), run.sha) for step, run in mine)
    ours, at = next(((line, sha) for line, sha in said if line), (None, ""))
    metric = lambda kinds, sha=None: [  # noqa: E731
        run.raw.metric for _, run in failing if run.kind in kinds and (sha is None or run.sha == sha)
    ]
    changes = repo.file_changes(problem.good, problem.bad)
    changed = {f: headed_definitions(p) for f, p in changes.get(culprit, {}).items()}
    window = {sha: {f: headed_definitions(p) for f, p in files.items()} for sha, files in changes.items()}
    return Case(
        ci_line or ours,
        ci_line is not None,
        "" if ci_line else at,
        green,
        tuple(red),
        spread(metric(BISECT_KINDS, culprit) or _exits(failing, culprit)),
        spread(metric((Kind.AB_HEAD,)) or _exits(failing, None, Kind.AB_HEAD)),
        overlap(culprit, changed, window),
        max(len(problem.graph) - 1, 0),
    )


def _said(metric: float | None) -> str | None:
    """How a test prints its reading (`repr`), to find the line of the case the run reported."""
    return None if metric is None else repr(metric)


def _exits(failing, sha: str | None, kind: Kind | None = None) -> list[float | None]:
    """Failing runs without a metric: counted, with no value to compare."""
    return [None for _, run in failing if (sha is None or run.sha == sha) and (kind is None or run.kind is kind)]
