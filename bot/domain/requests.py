"""What a trigger asks the service for: one bisection, described by plain values."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class CiReading:
    """What CI already reported for the test at one commit: a scheduled run that ran it (free evidence)."""

    sha: str
    passed: bool
    metric: float | None
    url: str  # the run (or its job) on GitHub, shown next to the reading
    line: str = ""  # a failure's check as CI's log printed it (the revert PR quotes it)


@dataclass(frozen=True)
class Member:
    """One red test of a run bisected with others (bot.domain.bisect.group): its own GOOD (its last pass), the cases
    it failed and CI's readings of it."""

    test: str
    good: str
    cases: tuple[str, ...] = ()
    ci: tuple[CiReading, ...] = ()


@dataclass(frozen=True)
class JudgedMetric:
    """A metric a slowdown's bisection judges in place of the test's `metric`, one member of its group search (named
    by the metric): read from each step's output with `regex` (its last match's `value`), no threshold (a benchmark:
    sampled against GOOD and BAD), with CI's readings of it from GOOD's run to BAD's (free evidence)."""

    name: str
    regex: str
    higher_is_worse: bool
    ci: tuple[CiReading, ...] = ()


@dataclass(frozen=True)
class SeriesChange:
    """A change point of a test's series that a bisection was started from: the metric, the last run before the shift
    and the first run after it (the dashboard links the bisection from the series' page), and the runs of the
    bisection's GOOD and BAD (the range the shift may have come in: a later night's change point of the same shift
    falls in it, bot.domain.perf.slowdowns)."""

    test: str
    metric: str
    run_before: int
    run_after: int
    run_good: int | None = None
    run_bad: int | None = None

    def as_json(self) -> dict:
        found = dict(test=self.test, metric=self.metric, run_before=self.run_before, run_after=self.run_after)
        return found | {k: v for k, v in (("run_good", self.run_good), ("run_bad", self.run_bad)) if v is not None}


@dataclass(frozen=True)
class StartRequest:
    """A validated request to bisect, handed to whatever runs bisections for this deployment: a `/revert-bisect`
    comment (`thread`, `comment_id`, `requested_by`), or a red scheduled run (`run`; no thread to answer in)."""

    repo: str
    thread: int | None
    comment_id: int | None
    requested_by: str | None
    test: str
    good: str | None
    bad: str | None
    followup: int | None
    dry_run: bool
    run: int | None = None
    ci: tuple[CiReading, ...] = ()  # the test's readings in scheduled runs from GOOD to BAD, oldest first
    cases: tuple[str, ...] = ()  # the test's cases that failed on the red run (Class.method): what each step runs
    # several red tests of the run, bisected together over the union range (`good` the oldest of theirs; `test` the
    # first's id): empty for one test
    members: tuple[Member, ...] = ()
    started: str = ""  # a red run's: why it starts now (bot.ingress.jobs.nightly), said in the status comment
    # a red run's failure reproduced (a red re-run attempt, the suite runner's retry): BAD red and GOOD green as CI
    # read them are taken as read, no endpoint run before the search (Settings.trust_endpoints)
    reproduced: bool = False
    # a slowdown's (bot.domain.perf.slowdowns): the change points it bisects, the largest effect's first, and the
    # metrics each step reads from its one run, a member of the group search each (same order); `run` is the first run
    # after the largest shift
    series: tuple[SeriesChange, ...] = ()
    metrics: tuple[JudgedMetric, ...] = ()
    onto: str | None = None  # where the A/B reverts the culprit, and the revert is made (None: BAD)

    @property
    def group(self) -> tuple[Member, ...]:
        """The members of its group search: the red tests of a run, or a slowdown's metrics (each named by its metric,
        from the slowdown's GOOD, with CI's readings of it); empty for one test."""
        if self.metrics and self.good is not None:
            return tuple(Member(m.name, self.good, ci=m.ci) for m in self.metrics)
        return self.members

    @property
    def key(self) -> str:
        """One bisection per key: a retried job resumes it instead of starting another (a red run's: one per range)."""
        if self.metrics:  # one metric: the key a bisection judging it alone was stored under before groups of metrics
            return f"{self.repo}@{self.test}/{'+'.join(m.name for m in self.metrics)}:{self.good}..{self.bad}"
        if self.run is not None:
            tests = "+".join(m.test for m in self.members) or self.test
            return f"{self.repo}@{tests}:{self.good}..{self.bad}"
        return f"{self.repo}#comment:{self.comment_id}"

    def origin(self) -> dict:
        """Where the bisection was asked for, as stored with it (the dashboard, holds and `status` read it)."""
        if self.run is not None:
            tests = {"tests": [m.test for m in self.members]} if self.members else {}
            started = {"started": self.started} if self.started else {}
            series = (
                {"series": [c.as_json() for c in self.series], "metric": self.metrics[0].name}
                | ({"metrics": [m.name for m in self.metrics]} if len(self.metrics) > 1 else {})
                if self.metrics
                else {}
            )
            return dict(
                repo=self.repo, test=self.test, good=self.good, bad=self.bad, run=self.run, **tests, **started, **series
            )
        return dict(
            repo=self.repo,
            thread=self.thread,
            comment_id=self.comment_id,
            requested_by=self.requested_by,
            test=self.test,
        )
