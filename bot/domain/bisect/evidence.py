"""What the runs so far say: verdicts (with the calibrated metric boundary), tallies, the flake rate."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.domain.bisect.candidates import Scope
from bot.domain.bisect.model import Kind, Problem, Run, Settings
from bot.domain.bisect.posterior import Tally
from bot.domain.bisect.verdict import Verdict, classify


@dataclass(frozen=True)
class Evidence:
    """Verdicts of every run, derived from raw results and the calibration."""

    verdicts: tuple[tuple[Run, Verdict], ...]
    boundary: float | None
    # tallies by (scope, ci): a decision asks for the same ones several times (the search, the trust check, the
    # calibration), each a pass over every run
    _tallies: dict[tuple[Scope, bool], dict[int, Tally]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @classmethod
    def of(cls, problem: Problem, runs: Sequence[Run]) -> Evidence:
        rule = problem.settings.metric
        boundary = None
        if rule is not None:
            calib = [(r, classify(r.raw, rule, None)) for r in runs if r.kind is Kind.CALIBRATE]
            good = [
                r.raw.metric for r, v in calib if r.sha == problem.good and v.is_evidence and r.raw.metric is not None
            ]
            bad = [
                r.raw.metric for r, v in calib if r.sha == problem.bad and v.is_evidence and r.raw.metric is not None
            ]
            boundary = rule.boundary(good, bad)
        return cls(tuple((r, _verdict(r, rule, boundary)) for r in runs), boundary)

    def of_sha(self, sha: str, ci: bool = True) -> list[Verdict]:
        """The verdicts at `sha`; without `ci`, only the bisect runner's own."""
        return [v for r, v in self.verdicts if r.sha == sha and (ci or r.kind is not Kind.CI)]

    def tallies(self, scope: Scope, ci: bool = True) -> dict[int, Tally]:
        """Passes and failures by position; CI's readings included unless `ci` is False. A new dict each call."""
        known = self._tallies.get((scope, ci))
        if known is None:
            by_sha: dict[str, list[int]] = {}  # [passes, fails]: counted first, a Tally made once per commit
            for run, verdict in self.verdicts:
                if verdict.is_evidence and (ci or run.kind is not Kind.CI):
                    counts = by_sha.get(run.sha)
                    if counts is None:
                        counts = by_sha[run.sha] = [0, 0]
                    counts[verdict is Verdict.BAD] += 1
            known = {}
            for sha, (passes, fails) in by_sha.items():
                pos = scope.position(sha)
                if pos is not None:
                    known[pos] = Tally(passes, fails)
            self._tallies[(scope, ci)] = known
        return dict(known)

    def ran(self) -> bool:
        """Whether the bisect runner has reported anything yet (CI's readings come before it does)."""
        return any(r.kind is not Kind.CI for r, _ in self.verdicts)

    def untestable(self, settings: Settings) -> set[str]:
        """Commits the bisect runner cannot test (exit 125, or infra too often); CI's readings never say so."""
        ours = [(r, v) for r, v in self.verdicts if r.kind is not Kind.CI]
        skipped = {r.sha for r, v in ours if v is Verdict.SKIP}
        infra: dict[str, int] = {}
        for r, v in ours:
            if v is Verdict.INFRA:
                infra[r.sha] = infra.get(r.sha, 0) + 1
        return skipped | {sha for sha, count in infra.items() if count >= settings.max_infra_per_commit}

    def evidence_count(self) -> int:
        """Results the bisect runner spent (CI's readings were free)."""
        return sum(v.is_evidence for r, v in self.verdicts if r.kind is not Kind.CI)

    def surprised(self, problem: Problem) -> bool:
        """An endpoint said the unexpected: GOOD failed or BAD passed."""
        return Verdict.BAD in self.of_sha(problem.good) or Verdict.GOOD in self.of_sha(problem.bad)


def _verdict(run: Run, rule, boundary: float | None) -> Verdict:
    """A run's verdict. CI's reading is CI's own pass or failure when it printed no metric (a passing run often
    prints none): never a skip."""
    if run.kind is Kind.CI and run.raw.metric is None:
        return classify(run.raw, None, None)
    return classify(run.raw, rule, boundary)


def fewest_errors(tallies: dict[int, Tally]) -> tuple[int, int]:
    """(fewest results that disagree with any single first-bad position, total results)."""
    total = sum(t.passes + t.fails for t in tallies.values())
    # One pass over the cuts (everything <= cut good, everything above bad), oldest first: a cut's
    # errors are the failures at or below it plus the passes above it. Runs on every decision.
    fails_below, passes_above = 0, sum(t.passes for t in tallies.values())
    best = passes_above  # the cut below every position: all bad
    for p in sorted(tallies):
        fails_below += tallies[p].fails
        passes_above -= tallies[p].passes
        best = min(best, fails_below + passes_above)
    return best, total


def trusted(problem: Problem, ev: Evidence, merges: tuple[str, ...] = ()) -> bool:
    """Whether the test is taken as deterministic, as `git bisect run` takes it: with --flake-rate 0,
    or with auto while nothing contradicts a monotone history (no endpoint surprise, no result that
    disagrees with every single first-bad position). Then one run per endpoint and the search's own
    FAIL and PASS are believed; the first contradiction brings back calibration and confirmation."""
    s = problem.settings
    if s.flake_rate is not None:
        return s.flake_rate == 0
    # Inside a merge the first-parent results are out of scope, yet a contradiction there still counts.
    return not ev.surprised(problem) and all(fewest_errors(ev.tallies(problem.scope(m)))[0] == 0 for m in {(), merges})


def effective_flake(settings: Settings, tallies: dict[int, Tally]) -> float | None:
    """The flake rate the model uses now; None when results contradict a declared rate of 0."""
    if settings.flake_rate:
        return settings.flake_rate
    errors, total = fewest_errors(tallies)
    if errors == 0:
        return 0.0
    if settings.flake_rate == 0:
        return None
    return min(0.25, max(settings.flake_floor, errors / max(total, 1)))


# -- the decision -----------------------------------------------------------------------------
