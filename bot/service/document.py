"""The one JSON document of a bisection: what `revert-bisect bisect --json`, `revert-bisect status ID --json` and
the dashboard's `/api/bisections/{id}` give (the API adds its page's fields: bot.web.models.BisectionDetail).

bot.service.describe builds it from the stored row; its JSON schema is published as docs/bisection.schema.json
(`python -m bot.service.document > docs/bisection.schema.json`; a test checks that the file is this model's).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

# every field is in every document (null when it does not apply): the published schema says so
_ALWAYS = ConfigDict(json_schema_serialization_defaults_required=True)


class DocStepTest(BaseModel):
    """One test's part of a step: the kind of run it was for that test and, once the step reported, what it did."""

    model_config = _ALWAYS

    kind: str = Field(description="calibrate, search, confirm, ab_head, ab_revert or ci, for this test")
    verdict: str | None = Field(None, description="good, bad, skip or infra; null while the step runs")
    exit_code: int | None = Field(None, description="the test's own result as an exit code (a case's, in a report)")
    metric: float | None = None
    infra_reason: str | None = Field(None, description="why the test said nothing of this commit, when it did not")


class DocStep(BaseModel):
    """One run of the command at one commit (a step), whatever became of it."""

    model_config = _ALWAYS

    id: int
    sha: str
    kind: str = Field(description="calibrate, search, confirm, ab_head, ab_revert, or ci (a reading CI paid for)")
    round: int
    state: str = Field(description="running, then done, lost (its process died: an infra result) or cancelled")
    verdict: str | None = Field(
        None,
        description="good, bad, skip or infra once it ran (done, lost): as the calibrated boundaries judge it now, "
        "`bad` when any of its tests failed; null while it runs and when it was cancelled",
    )
    exit_code: int | None = None
    metric: float | None = None
    infra_reason: str | None = None
    duration_s: float | None = None
    runner: str | None = Field(None, description="where it ran (a worktree, a runner's name)")
    run_urls: list[str] = Field([], description="the CI runs that ran it, when a CI backend did")
    env_key: str | None = Field(None, description="the environment's key, when the step built or reused one")
    env_reused: bool | None = None
    started_at: datetime | None = None
    finished_at: datetime | None = None
    tests: dict[str, DocStepTest] = Field({}, description="each test the step carried, and its result there")


class DocCiReading(BaseModel):
    """CI's reading of the test in one scheduled run inside the range: free evidence, never a run of the bot's."""

    model_config = _ALWAYS

    sha: str
    passed: bool
    metric: float | None = None
    url: str = Field(description="the run (or its job) on GitHub")
    line: str = Field("", description="a failure's check as CI's log printed it")


class DocTest(BaseModel):
    """One test of the bisection (a bisection of one test has one: its policy test id, or its command)."""

    model_config = _ALWAYS

    test: str
    outcome: str = Field(description="its status once it ended (found, inconclusive, ...), its phase while it runs")
    culprit: str | None = Field(None, description="set only once its own search found it: the commit to revert")
    culprit_subject: str | None = None
    best_guess: str | None = Field(
        None, description="the commit its answer short of found points at, never reverted; null when found"
    )
    message: str | None = None
    runs: int = Field(description="finished runs (done, lost) that carried it")
    steps: int = Field(description="steps that carried it, running and cancelled ones too")
    revert_pr: int | None = Field(None, description="the revert PR opened for its culprit, when the bot opened one")
    ci: list[DocCiReading] = Field(
        default_factory=list, description="CI's readings of it inside the range, oldest first (not among `runs`)"
    )


class DocRevertedBy(BaseModel):
    """An earlier revert of the culprit on ONTO, found instead of making another."""

    model_config = ConfigDict(extra="allow", json_schema_serialization_defaults_required=True)

    sha: str | None = Field(None, description="the reverting commit; null when no one commit does it")
    pr: int | None = None
    subject: str | None = None
    ref: str | None = None
    how: str | None = Field(None, description="what gave it away: message, subject, patch, tree or empty")


class DocRevert(BaseModel):
    """The culprit's revert on ONTO (`--verify-revert`, or the bot's revert PR)."""

    model_config = _ALWAYS

    onto: str = Field(description="the commit the revert goes on (HEAD of the A/B)")
    sha: str | None = Field(None, description="the revert commit, once made")
    branch: str | None = Field(None, description="the branch it is on")
    error: str | None = Field(None, description="why it was not made (a conflict, an earlier revert)")
    status: Literal["made", "already_reverted", "not_made"] | None = None
    reverted_by: DocRevertedBy | None = None


class DocAB(BaseModel):
    """The revert's proof: HEAD fails and HEAD + revert passes, run for run."""

    model_config = _ALWAYS

    head: str | None = None
    revert: str | None = None
    passed: bool | None = Field(None, description="null until decided")
    head_verdicts: list[str] = []
    revert_verdicts: list[str] = []
    head_from: str = Field("", description="what stood for HEAD's runs instead of runs of its own (BAD's), if any")
    steps: list[DocStep] = Field([], description="the A/B runs (in `steps` too)")


class DocCancelled(BaseModel):
    """Runs cancelled once their answer was no longer needed: paid for all the same."""

    model_config = _ALWAYS

    runs: int
    runner_seconds: float


class DocGitBisectRun(BaseModel):
    """What `git bisect run` would spend on the same range at this bisection's median run (bot.domain.cost)."""

    model_config = _ALWAYS

    runs: int
    runner_seconds: float
    ranges: list[int] = Field(description="the range git is given per red test, in commits")


class BisectionDocument(BaseModel):
    """A bisection: where it stands or how it ended, what it spent, its runs and its tests."""

    model_config = _ALWAYS

    id: int
    repo: str = Field(description="the repository as stored (the CLI's: its path)")
    command: list[str]
    good: str
    bad: str
    good_rev: str = Field(description="GOOD as given")
    bad_rev: str = Field(description="BAD as given")
    phase: str = Field(description="the engine's phase (done once it ended)")
    status: str | None = Field(None, description="the outcome (found, inconclusive, ...), null while it runs")
    message: str | None = Field(None, description="the outcome in words, with the remedy in the reader's terms")
    reason: str | None = Field(None, description="the cause's code (good_fails, timed_out, ...); null when found")
    culprit: str | None = Field(None, description="set only once the status is found: the commit to revert")
    culprit_subject: str | None = None
    first_parent_culprit: str | None = Field(None, description="the merge on GOOD..BAD's first parents that has it")
    best_guess: str | None = Field(
        None,
        description="an answer short of found (inconclusive, ambiguous): the commit it points at, never to be "
        "reverted; null when found",
    )
    best_guess_subject: str | None = None
    confidence: float | None = Field(None, description="the culprit's posterior probability, else the best guess's")
    candidates: list[str] = Field([], description="an ambiguous answer's commits, the last seen failing")
    effect: str | None = Field(None, description="a sampled metric's shift at the culprit, with its interval")
    guess: str | None = Field(None, description="the engine's latest guess, while it runs too")
    guess_probability: float | None = None
    flake_rate: float | None = None
    metric_boundary: float | None = Field(None, description="the boundary calibrated between GOOD's and BAD's metric")
    range_size: int | None = Field(
        None, description="the commits in GOOD..BAD (null when the range was not recorded and git is not at hand)"
    )
    rounds: int = Field(description="rounds of finished runs (confirmation and A/B share rounds)")
    rounds_by_kind: dict[str, int] = {}
    runs_by_kind: dict[str, int] = {}
    runs: int = Field(description="finished runs (done, lost): every run of the command")
    runner_seconds: float = Field(description="every finished run's duration plus the cancelled runs' held time")
    cancelled: DocCancelled
    git_bisect_run: DocGitBisectRun
    created_at: datetime | None = None
    finished_at: datetime | None = None
    steps: list[DocStep] = Field([], description="every step, oldest first, with its state")
    tests: list[DocTest] = Field([], description="the bisection's tests, each with its own answer")
    revert: DocRevert | None = Field(None, description="the culprit's revert, when one was asked for")
    ab: DocAB | None = Field(None, description="the revert's A/B, once it has runs or an answer")


def schema_text() -> str:
    """The published schema (docs/bisection.schema.json): what a document holds, every field always present."""
    return json.dumps(BisectionDocument.model_json_schema(mode="serialization"), indent=2) + "\n"


if __name__ == "__main__":
    print(schema_text(), end="")
