"""Prometheus series of one app, in its own registry (several apps in one process do not clash).

Counted in this process: webhook deliveries (the router), GitHub API calls (bot.observability.github_api),
whether GitHub answers and the probes and short-circuited requests while it does not (.reachability).
Read from the store at scrape time, so every replica reports the same, right numbers: jobs by state
(parked: waiting for GitHub to answer again), the oldest queued and parked jobs' ages, jobs backing off,
bisections by status and phase, steps by state, verdict and backend, and the step-duration histogram.
"""

from __future__ import annotations

from datetime import UTC, datetime

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily, HistogramMetricFamily
from prometheus_client.utils import floatToGoString
from sqlalchemy import Engine, case, func, literal, select
from sqlalchemy.exc import SQLAlchemyError

from bot.adapters.store.models import BisectionRow, JobRow, StepRow
from bot.observability.github_api import GitHubApiCollector
from bot.observability.reachability import ReachabilityCollector
from bot.observability.reachability import of as reachability_of

PREFIX = "revert_bisect_"
DELIVERY_OUTCOMES = (
    "queued",
    "ignored",
    "duplicate",
    "refused_signature",
    "refused_bad_request",
    "too_large",
    "store_unavailable",
)
JOB_STATES = ("queued", "running", "parked", "done", "failed")
BACKENDS = ("local", "github_actions", "other")
# GPU correctness tests: seconds to hours.
DURATION_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1200, 1800, 3600, 7200)


def _backend_sql():
    """A step's backend as the dispatching backend recorded it (older rows were filled from the runner
    string by migration 0011); `other` for steps no named backend ran."""
    return func.coalesce(StepRow.backend, literal("other"))


def _utc(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)  # SQLite keeps UTC without its zone


class StoreCollector:
    """Queue, bisections and steps, queried from the store at each scrape."""

    def __init__(self, engine: Engine):
        self.engine = engine

    def describe(self):
        return []  # nothing is queried when the collector is registered

    def collect(self):
        up = GaugeMetricFamily(
            PREFIX + "store_up", "1 when this scrape could read the store, else 0 (the store series are then missing)."
        )
        try:
            families = list(self._families())
        except SQLAlchemyError:
            up.add_metric([], 0)
            yield up
            return
        up.add_metric([], 1)
        yield up
        yield from families

    def _families(self):
        with self.engine.connect() as conn:
            jobs = dict(conn.execute(select(JobRow.state, func.count()).group_by(JobRow.state)).all())
            oldest = conn.execute(select(func.min(JobRow.created_at)).where(JobRow.state == "queued")).scalar()
            parked = conn.execute(select(func.min(JobRow.parked_at)).where(JobRow.state == "parked")).scalar()
            deferred = conn.execute(
                select(func.count()).where(JobRow.state == "queued", JobRow.not_before > datetime.now(UTC))
            ).scalar()
            status = func.coalesce(BisectionRow.status, literal("running")).label("status")
            bisections = conn.execute(
                select(status, BisectionRow.phase, func.count()).group_by(status, BisectionRow.phase)
            ).all()
            backend = _backend_sql().label("backend")
            verdict = func.coalesce(StepRow.verdict, literal("none")).label("verdict")
            steps = conn.execute(
                select(StepRow.state, verdict, backend, func.count()).group_by(StepRow.state, verdict, backend)
            ).all()
            buckets = [func.sum(case((StepRow.duration_s <= b, 1), else_=0)) for b in DURATION_BUCKETS]
            durations = conn.execute(
                select(backend, func.count(), func.sum(StepRow.duration_s), *buckets)
                .where(StepRow.state == "done", StepRow.duration_s.is_not(None))
                .group_by(backend)
            ).all()

        depth = GaugeMetricFamily(
            PREFIX + "jobs", "Jobs in the store's queue, by state (all replicas).", labels=["state"]
        )
        for state in sorted(set(JOB_STATES) | set(jobs)):
            depth.add_metric([state], jobs.get(state, 0))
        yield depth
        age = GaugeMetricFamily(
            PREFIX + "oldest_queued_job_age_seconds", "Age of the oldest queued job (0: none queued)."
        )
        age.add_metric([], max(0.0, (datetime.now(UTC) - _utc(oldest)).total_seconds()) if oldest else 0.0)
        yield age
        age = GaugeMetricFamily(
            PREFIX + "oldest_parked_job_age_seconds",
            "How long the longest-parked job has waited for GitHub to answer again (0: none parked).",
        )
        age.add_metric([], max(0.0, (datetime.now(UTC) - _utc(parked)).total_seconds()) if parked else 0.0)
        yield age
        waiting = GaugeMetricFamily(
            PREFIX + "jobs_backing_off",
            "Queued jobs held back until their backoff (or GitHub's Retry-After) has passed.",
        )
        waiting.add_metric([], deferred or 0)
        yield waiting

        family = GaugeMetricFamily(
            PREFIX + "bisections",
            "Bisections in the store, by status (running until finished) and phase.",
            labels=["status", "phase"],
        )
        for status_value, phase, n in sorted(bisections, key=lambda r: (str(r[0]), str(r[1]))):
            family.add_metric([status_value, phase or "none"], n)
        yield family

        family = GaugeMetricFamily(
            PREFIX + "steps",
            "Steps (test runs) in the store, by state, verdict (none: not finished) and backend.",
            labels=["state", "verdict", "backend"],
        )
        for state, verdict_value, backend_value, n in sorted(steps, key=lambda r: tuple(map(str, r[:3]))):
            family.add_metric([state, verdict_value, backend_value], n)
        yield family

        hist = HistogramMetricFamily(
            PREFIX + "step_duration_seconds", "Duration of finished steps, by backend.", labels=["backend"]
        )
        for backend_value, count, total, *cumulative in sorted(durations, key=lambda r: str(r[0])):
            points = [(floatToGoString(b), int(c or 0)) for b, c in zip(DURATION_BUCKETS, cumulative)] + [
                ("+Inf", int(count))
            ]
            hist.add_metric([backend_value], points, sum_value=float(total or 0.0))
        yield hist


class Metrics:
    """One app's registry: the delivery counter, the store's series, the GitHub API series."""

    def __init__(self, engine: Engine | None = None, github_url: str = "https://api.github.com"):
        self.engine = engine
        self.registry = CollectorRegistry()
        self.deliveries = Counter(
            PREFIX + "webhook_deliveries",
            "Webhook deliveries received by this process, "
            "by event (unverified: refused before the signature checked out) and outcome.",
            ["event", "outcome"],
            registry=self.registry,
        )
        if engine is not None:
            self.registry.register(StoreCollector(engine))
        self.registry.register(GitHubApiCollector())
        self.registry.register(ReachabilityCollector(reachability_of(github_url)))

    def delivery(self, event: str, outcome: str) -> None:
        self.deliveries.labels(event, outcome).inc()

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST
