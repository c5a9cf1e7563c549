"""What the service and the edges ask of the store, and the values they exchange with it: bisections and their
steps, what the kill switch held back, flakes seen, webhook deliveries and the job queue, the dashboard's reads, the
benchmarks' series read from CI.

The records (BisectionRecord, StepRecord, HoldRecord) are Protocols of the fields read: the store hands back its
rows (bot.adapters.store.models), which have them; nothing here needs SQLAlchemy. The implementations are in
bot.adapters.store (Store, Holds, Flakes, Deliveries, Jobs, queries.Bisections, queries.Queue, series.SeriesPoints,
series.SeriesOrigins); bot.wiring and bot.app pass them in.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Protocol

from bot.domain.bisect.ledger import Entry, Result
from bot.domain.bisect.model import Phase
from bot.domain.outcome import BisectionOutcome
from bot.domain.signals import Flake

# A step in one of these states has ended (what it said, if anything, is stored); `running` ones have not.
FINISHED_STEP_STATES = ("done", "lost", "cancelled")
# The phases of a bisection still running (DONE is a status's)
PHASES = [p.value for p in Phase if p is not Phase.DONE]

# -- bisections and their steps --------------------------------------------------------------------------


@dataclass(frozen=True)
class NewBisection:
    repo: str
    good_rev: str
    bad_rev: str
    good: str
    bad: str
    command: list[str]
    settings: dict
    head: str | None = None
    origin: dict | None = None
    origin_key: str | None = None
    commits: list[list[str]] | None = None
    # the bisection's tests (bot.domain.bisect.ledger): one or several; none yet for a JUnit report not read
    tests: Sequence[Entry] = ()


@dataclass(frozen=True)
class NewStep:
    sha: str
    kind: str
    round: int
    runner_ref: str | None = None
    backend: str | None = None  # 'local' or 'github_actions': the backend dispatching it
    results: Mapping[str, Result] = field(default_factory=dict)  # each test it carries: its kind of run


@dataclass(frozen=True)
class StepReport:
    exit_code: int | None
    metric: float | None
    infra_reason: str | None
    verdict: str
    runner: str
    duration_s: float
    log_tail: str
    env_key: str | None = None
    env_reused: bool | None = None
    results: Mapping[str, Result] = field(default_factory=dict)  # each test it carried: its own result, as read


class StepRecord(Protocol):
    """One stored step (a run attempt), as the service reads it; the store's row is one (structurally)."""

    id: int
    bisection_id: int
    sha: str
    kind: str
    round: int
    state: str  # running -> done | lost | cancelled
    exit_code: int | None
    metric: float | None
    infra_reason: str | None
    verdict: str | None
    runner: str | None
    backend: str | None
    duration_s: float | None
    log_tail: str | None
    started_at: datetime
    finished_at: datetime | None
    env_key: str | None
    env_reused: bool | None
    runner_ref: str | None
    results: dict | None  # bot.domain.bisect.ledger reads it (results_of, runs_of)


class BisectionRecord(Protocol):
    """One stored bisection with its steps (oldest first), as the service reads it: the state machine's fields,
    where it was asked for, the latest view and, once done, its status and outcome: `outcome` is the stored JSON,
    which BisectionStore.outcome and bot.domain.outcome.outcome_of give back typed (never read by key)."""

    id: int
    repo: str
    good_rev: str
    bad_rev: str
    good: str
    bad: str
    command: list
    settings: dict
    phase: str  # the columns from here to `outcome` are what its tests derive (bot.domain.bisect.ledger.summary)
    head: str | None
    revert: str | None
    revert_error: str | None
    origin: dict | None
    origin_key: str | None
    commits: list | None
    cancel_requested_by: str | None
    guess: str | None
    guess_probability: float | None
    flake_rate: float | None
    boundary: float | None
    status: str | None
    outcome: dict | None
    tests: dict | None  # bot.domain.bisect.ledger reads it (entries)
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None

    @property
    def steps(self) -> Sequence[StepRecord]: ...


class BisectionStore(Protocol):
    """Bisections and their steps; every method is one transaction (bot.adapters.store.store.Store)."""

    def create(self, new: NewBisection, phase: str) -> int: ...

    def get(self, bisection_id: int) -> BisectionRecord:
        """Raises bot.domain.errors.NotFound for an unknown id."""

    def outcome(self, bisection_id: int) -> BisectionOutcome | None:
        """What the bisection ended with, typed (its stored JSON as bot.domain.outcome reads it); None while it runs."""

    def request_cancel(self, bisection_id: int, by: str) -> bool:
        """Ask the process driving an unfinished bisection to stop; False when it already finished."""

    def cancel_requested(self, bisection_id: int) -> bool: ...

    def by_origin_key(self, key: str) -> BisectionRecord | None:
        """The newest bisection started for this request or range (a retried job finds it again)."""

    def from_thread(self, repo: str, thread: int) -> Sequence[BisectionRecord]:
        """Bisections asked for in one issue or PR, newest first."""

    def found_in(self, repo: str, limit: int = 500) -> Sequence[BisectionRecord]:
        """The newest bisections asked for in `repo` that found a culprit (their outcomes name the reverts)."""

    def save_tests(self, bisection_id: int, tests: Sequence[Entry]) -> None:
        """Write its tests and what the bisection derives from them (bot.domain.bisect.ledger.summary): its phase,
        the latest view and, once every test ended, its status, outcome and end time."""

    def save_outcome(self, bisection_id: int, status: str, outcome: BisectionOutcome) -> None:
        """Write what an ended bisection says, as told again (its cause named: bot.domain.outcome.explain) or as
        concluded with no test to run (a JUnit report with none to bisect): done, with this status and outcome."""

    def add_steps(self, bisection_id: int, steps: Iterable[NewStep]) -> list[int]:
        """Record steps as running, in one transaction, before they are dispatched."""

    def finish_step(self, step_id: int, report: StepReport) -> None: ...

    def mark_lost(
        self, bisection_id: int, reason: str, state: str = "lost", step_ids: Iterable[int] | None = None
    ) -> int:
        """Close steps still running: `lost` (their process is gone) or `cancelled` (stopped on purpose)."""


# -- what the kill switch held back, flakes seen ----------------------------------------------------------


@dataclass(frozen=True)
class Hold:
    key: str  # one record per held-back thing (a retried job finds it again)
    repository: str
    guard: str
    what: str
    link: str | None = None
    issue: int | None = None
    culprit: str | None = None


class HoldRecord(Protocol):
    """A stored hold: the Hold's fields, its id and when it was recorded."""

    id: int
    key: str
    repository: str
    guard: str
    what: str
    link: str | None
    issue: int | None
    culprit: str | None
    created_at: datetime


class HoldLog(Protocol):
    """bot.adapters.store.holds.Holds."""

    def record(self, hold: Hold) -> bool:
        """False when this key was already recorded."""

    def recent(self, limit: int = 50) -> Sequence[HoldRecord]: ...


@dataclass(frozen=True)
class FlakeCount:
    """One test's flakes: how many runs, the newest one's link and how it went."""

    repository: str
    test: str
    count: int
    last_url: str | None
    last_how: str
    last_at: datetime


class FlakeLog(Protocol):
    """bot.adapters.store.flakes.Flakes."""

    def record(self, flake: Flake) -> bool:
        """False when this (repository, test, run) was recorded already."""


class FlakeCounts(Protocol):
    def per_test(self) -> list[FlakeCount]:
        """Every test's flakes, most first."""


# -- webhook deliveries and the job queue -----------------------------------------------------------------


@dataclass(frozen=True)
class Incoming:
    delivery_id: str
    event: str
    action: str | None
    repository: str | None
    handler: str | None
    payload: dict
    body: str | None = None  # the payload's JSON text as received: stored as is, not serialised again


@dataclass(frozen=True)
class Recorded:
    duplicate: bool
    job_id: int | None


class DeliveryLog(Protocol):
    """bot.adapters.store.deliveries.Deliveries."""

    def record(self, incoming: Incoming) -> Recorded:
        """Store the delivery and, when a handler listens, its job; a known delivery id changes nothing."""


class DeliveryRecorder(Protocol):
    """bot.adapters.store.recorder.Recorder: what the webhook's request awaits before it answers."""

    async def record(self, incoming: Incoming) -> Recorded:
        """As DeliveryLog.record, returning once the delivery is committed (raises the store's error if not)."""


@dataclass(frozen=True)
class ClaimedJob:
    id: int
    handler: str
    delivery_id: str
    event: str
    payload: dict
    attempts: int  # claims so far, this one included
    waits: int = 0  # of those, the ones that ended waiting for GitHub (an outage, a rate limit): no attempt used

    @property
    def failed_attempts(self) -> int:
        """The attempts this one makes, counted against the job's limit."""
        return self.attempts - self.waits


class JobQueue(Protocol):
    """The job queue, leased to its workers (bot.adapters.store.deliveries.Jobs)."""

    @property
    def lease_s(self) -> float: ...

    def claim(self) -> ClaimedJob | None: ...

    def finish(self, job_id: int, error: str | None = None, retry: bool = False) -> None: ...

    def later(self, job_id: int, error: str, after_s: float, counts: bool = True) -> None: ...

    def park(self, job_id: int, reason: str) -> None: ...

    def parked_since(self) -> datetime | None: ...

    def resume_parked(self) -> int: ...

    def renew(self, job_id: int) -> bool: ...

    def requeue_expired(self) -> int: ...


# -- the dashboard's reads -----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Progress:
    """What the live update polls every second: the row's state and its steps, counted."""

    phase: str
    status: str | None
    updated_at: datetime | None
    steps: int
    finished: int


class FinishedRecord(Protocol):
    """What the trust report reads of a finished bisection (no steps)."""

    repo: str
    status: str | None
    outcome: dict | None
    origin: dict | None
    head: str | None
    good: str
    bad: str


class DashboardReads(Protocol):
    """The dashboard's reads of bisections (bot.adapters.store.queries.Bisections): rows as stored."""

    def get(self, bisection_id: int) -> BisectionRecord | None: ...

    def progress(self, bisection_id: int) -> Progress | None:
        """One aggregate query, not the row with its steps."""

    def newest(
        self, state: str | None, keep: Callable[[BisectionRecord], bool], skip: int, wanted: int
    ) -> Sequence[BisectionRecord]:
        """Newest first, `skip` then up to `wanted` of the rows in `state` (running, a phase, a status) that `keep`
        accepts."""

    def finished(self) -> Sequence[FinishedRecord]:
        """Every finished bisection, oldest first."""


@dataclass(frozen=True)
class ParkedJob:
    """A job waiting for GitHub to answer again (bot.domain.patience): what it was for, since when, and why."""

    id: int
    handler: str
    event: str
    repository: str | None
    parked_at: datetime | None
    reason: str | None


class ParkedJobs(Protocol):
    """The dashboard's reads of the job queue (bot.adapters.store.queries.Queue)."""

    def parked(self, limit: int = 20) -> tuple[int, list[ParkedJob]]:
        """How many jobs are parked, and the longest-parked `limit` of them."""


# -- benchmarks' series, read from CI (bot.service.series_intake; bot.adapters.store.series) ---------------------


@dataclass(frozen=True)
class SeriesPoint:
    """One metric of one test as one run of the watched workflow read it: its newest attempt's reading. `value` is
    None when the run reported none (a crash, a skipped batch size, a job skipped or its log expired): kept, so the
    series shows the gap. `started_at` orders the series: when the run was created (a re-run attempt keeps it)."""

    repository: str
    test: str
    metric: str
    run_id: int
    run_attempt: int
    sha: str
    started_at: datetime
    value: float | None
    url: str = ""  # the run's page


class SeriesLog(Protocol):
    """The benchmarks' series as read from CI, one point per (repository, test, metric, run)
    (bot.adapters.store.series.SeriesPoints)."""

    def record(self, points: Iterable[SeriesPoint]) -> int:
        """Store the points in one transaction: a point replaces the stored one of the same (repository, test, metric,
        run) when its attempt is as new or newer (a re-run attempt's reading replaces the older attempt's), never an
        older attempt's over a newer one. The number of points written."""

    def series(self, repository: str, test: str, metric: str) -> list[SeriesPoint]:
        """One metric's points, oldest first (by when the run started, then by run id)."""

    def watched(self) -> list[tuple[str, str, str]]:
        """Every (repository, test, metric) with points, sorted."""

    def runs_read(self, repository: str, test: str, metric: str) -> dict[int, int]:
        """Run id -> the attempt read of it, for every run with a point of this metric."""


@dataclass(frozen=True)
class SeriesBisection:
    """A bisection started from a change point of a series: its origin says
    {"series": {"test", "metric", "run_before", "run_after", "run_good", "run_bad"}} (the last run before the shift, the
    first after; the runs of the bisection's GOOD and BAD, those two for a bisection started before they were stored).
    """

    id: int
    status: str | None  # None while it runs
    phase: str
    test: str
    metric: str
    run_before: int
    run_after: int
    run_good: int
    run_bad: int


class SeriesBisections(Protocol):
    """The bisections started from a series' change points (bot.adapters.store.series.SeriesOrigins)."""

    def of_series(self, repository: str, test: str, metric: str) -> list[SeriesBisection]:
        """Newest first."""
