"""From change point to culprit: after a watched workflow's runs are stored in the benchmarks' series
(bot.service.series_intake), each test with `metrics` is assessed (bot.domain.perf.slowdowns: the change points its
worse way, at least `min_effect`, neither recovered nor bisected already), and each slowdown left is bisected and
acted on (bot.service.slowdown_report), oldest first, one at a time.

The bisection: the commits from the last run before the shift (GOOD) to the first run after it (BAD), the group
search of the slowdown's metrics (bot.domain.bisect.group, bot.service.config.measured_by): a member per metric that
shifted, named by it, each with CI's readings of its own metric in the range as free evidence, each judged with no
threshold (the sampled search). A step is one run of the benchmark at one commit, the run's output read for each metric
it carries the way CI's log printed it (bot.domain.perf.step_metric; for a table's cell, the header of the table in
CI's log of the run after). Each culprit is confirmed against its parent and proven by the A/B of HEAD against HEAD +
revert (the engine's; a culprit of several metrics reverted once), HEAD being the newest run's commit (where the branch
is, still slow unless recovered): a revert, if `on_slowdown` asks for one, is made there too. Each culprit is then
acted on with the metrics it slowed (bot.service.slowdown_report). A metric whose table cell CI's log does not print
is left out, said in the log. It runs where the test's runner says, like a red test's.

A slowdown is logged when it is found, recovered, already bisected or refused; a speed-up is logged and left alone.
One job at a time assesses a repository's series in this process: a delivery that comes while another job bisects
one of its slowdowns (hours on a GPU runner) skips, rather than start the same bisection again before the first is
stored or drive it twice; the delivery after the bisection ends assesses the series again.
"""

from __future__ import annotations

import logging
import threading
from typing import Protocol

from bot.domain.errors import RevertBisectError
from bot.domain.perf.changes import ChangeSettings
from bot.domain.perf.slowdowns import Assessment, Run, SeriesTable, Slowdown, action, assess, ci_readings
from bot.domain.perf.step_metric import step_regex
from bot.domain.policy import Direction, Policy, Series, Test
from bot.domain.requests import JudgedMetric, SeriesChange, StartRequest
from bot.domain.signals import fetchable
from bot.observability.logs import bind
from bot.ports import CiReads, Forge
from bot.ports.store import SeriesBisections, SeriesLog
from bot.service.bisections import Bisections
from bot.service.drive import StatusComment, drive
from bot.service.slowdown_report import Reported, SlowdownReports, effect_text

log = logging.getLogger("revert_bisect.slowdowns")


class ForgeWithCi(CiReads, Forge, Protocol):
    """The series' runs and logs are read through CI; the bisection and its report go through the forge."""


def started(slowdown: Slowdown) -> str:
    """Why the bisection starts: the shifts, as the status and the dashboard say it."""
    shifts = "; ".join(
        f"`{s.metric}` {effect_text(s)} between scheduled runs {s.before.run_id} and {s.after.run_id}"
        for s in slowdown.shifts
    )
    return f"{shifts} ({'a change point' if len(slowdown.shifts) == 1 else 'change points'} of the nightly series)"


class Slowdowns:
    def __init__(
        self,
        bisections: Bisections,
        series: SeriesLog,
        origins: SeriesBisections,
        settings: ChangeSettings | None = None,
    ):
        self.bisections = bisections
        self.series = series
        self.origins = origins
        self.settings = settings or ChangeSettings()
        self.reports = SlowdownReports(bisections.store, bisections.conclusions)
        self._lock = threading.Lock()
        self._busy: set[str] = set()  # repositories whose series a job is assessing (or bisecting) now

    def watch(self, forge: ForgeWithCi, policy: Policy) -> list[Reported]:
        """Every test of the policy with `metrics`: its new slowdowns bisected and acted on; what became of each.
        Nothing while another job of this process works on the repository's slowdowns."""
        repo = policy.repository
        with self._lock:
            if repo in self._busy:
                log.info("%s: another job is on its slowdowns; the next delivery assesses the series again", repo)
                return []
            self._busy.add(repo)
        try:
            done = []
            for test in (t for t in policy.tests if t.metrics):
                series, found = self.assess(policy, test)
                self._log(policy, test, found)
                for slowdown in found.to_bisect:
                    done += self.bisect(forge, policy, test, series, slowdown)
            return done
        finally:
            with self._lock:
                self._busy.discard(repo)

    def assess(self, policy: Policy, test: Test) -> tuple[SeriesTable, Assessment]:
        specs = {s.name: s for s in test.metrics}
        repo = policy.repository
        series = SeriesTable.of({name: self.series.series(repo, test.id, name) for name in specs})
        known = {(b.run_good, b.run_bad) for name in specs for b in self.origins.of_series(repo, test.id, name)}
        return series, assess(test.id, series, specs, known, self.settings)

    def bisect(
        self, forge: ForgeWithCi, policy: Policy, test: Test, series: SeriesTable, slowdown: Slowdown
    ) -> list[Reported]:
        """One slowdown: its bisection admitted (or resumed), driven to its end, and each culprit reported."""
        metrics, left_out = self._metrics(forge, test, series, slowdown)
        for name, why in left_out:
            log.warning("slowdown of %s %s: `%s` not bisected: %s", policy.repository, test.id, name, why)
        if not metrics:
            return [Reported(None, "; ".join(why for _, why in left_out))]
        bisected = [s for s in slowdown.shifts if s.metric in {m.name for m in metrics}]
        work = StartRequest(
            policy.repository,
            None,
            None,
            None,
            test.id,
            slowdown.good.sha,
            slowdown.bad.sha,
            None,
            False,
            run=bisected[0].after.run_id,
            started=started(slowdown),
            series=tuple(
                SeriesChange(
                    test.id, s.metric, s.before.run_id, s.after.run_id, slowdown.good.run_id, slowdown.bad.run_id
                )
                for s in bisected
            ),
            metrics=metrics,
            onto=series.runs[-1].sha,  # the newest run's commit: the A/B and the revert where the branch is now
        )
        admitted = self.bisections.intake.admit(forge, work)
        if admitted is None:
            return [Reported(None, "the bisection was refused (the log says why)")]
        b = self.bisections
        with bind(bisection_id=admitted.loaded.id):
            log.info(
                "slowdown of %s %s: %s; bisection #%s", policy.repository, test.id, work.started, admitted.loaded.id
            )
            drive(forge, admitted, StatusComment(forge, None, admitted.loaded.id), b.store, b.backends, b.workspace)
            reported = self.reports.report(forge, admitted, slowdown, action(policy, test))
            for each in reported:
                log.info(
                    "slowdown bisection #%s: %s",
                    admitted.loaded.id,
                    f"the evidence is on #{each.on}" if each.on else f"nothing written: {each.why}",
                )
        return reported

    def _metrics(
        self, forge: ForgeWithCi, test: Test, series: SeriesTable, slowdown: Slowdown
    ) -> tuple[tuple[JudgedMetric, ...], list[tuple[str, str]]]:
        """The slowdown's metrics as its bisection's members (the largest effect first), each with the regex a step
        reads it with and CI's readings of it; and those left out, with why (a table's cell CI's log of the run after
        the shift does not print)."""
        specs = {s.name: s for s in test.metrics}
        logs: dict[int, str | None] = {}  # CI's log of a run, read once for every table cell
        metrics, left_out = [], []
        for shift in slowdown.shifts:
            spec = specs[shift.metric]
            text = None
            if spec.table is not None:
                if shift.after.run_id not in logs:
                    logs[shift.after.run_id] = self._log_of(forge, test, shift.after)
                text = logs[shift.after.run_id]
            regex = step_regex(spec, text)
            if regex is None:
                why = f"CI's log of run {shift.after.run_id} prints no table with the column and row of `{spec.name}`"
                left_out.append((spec.name, why))
                continue
            ci = ci_readings(series, slowdown, shift)
            metrics.append(JudgedMetric(spec.name, regex, _higher_is_worse(spec), ci))
        return tuple(metrics), left_out

    def _log_of(self, forge: ForgeWithCi, test: Test, run: Run) -> str | None:
        """CI's log of the test in the run (the first of its jobs whose log holds it), for a table's header."""
        try:
            for job in forge.run_jobs(run.run_id):
                if fetchable(test, job) is None and (text := forge.job_log(job.id)):
                    return text
        except RevertBisectError as exc:
            log.warning("run %s: its jobs' logs could not be read: %s", run.run_id, exc)
        return None

    def _log(self, policy: Policy, test: Test, found: Assessment) -> None:
        where = f"{policy.repository} {test.id}"
        for r in found.recovered:
            log.info(
                "%s: `%s` %s at run %s, recovered at run %s (%s): not bisected",
                where,
                r.slowdown.metric,
                effect_text(r.slowdown),
                r.slowdown.after.run_id,
                r.recovery.after.run_id,
                effect_text(r.recovery),
            )
        for s in found.known:
            log.info("%s: `%s` at run %s: bisected already", where, s.judged.metric, s.after.run_id)
        for shift in found.speedups:
            log.info(
                "%s: `%s` %s at run %s: faster, not a slowdown",
                where,
                shift.metric,
                effect_text(shift),
                shift.after.run_id,
            )


def _higher_is_worse(spec: Series) -> bool:
    return spec.direction is Direction.HIGHER_IS_WORSE
