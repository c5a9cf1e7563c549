"""What a bisection cost on its runners, beside what `git bisect run` would have spent on the same range (pure).

GPU runs are the scarce resource: each holds a runner of `gpus` GPUs for its duration, and a run cancelled once its
answer was no longer needed held it all the same.

`git bisect run` is given what a person at a terminal would have: each red test's own GOOD (its last pass) and BAD,
narrowed by CI's readings of that test inside the range (`git_range`); it bisects one test at a time, so a group of
red tests costs it one bisection per test, each on its own range."""

from __future__ import annotations

import math
import statistics
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol

from bot.domain.bisect.candidates import Graph, ancestors


class StoredStep(Protocol):
    """What a cost needs of a stored step (bot.ports.store.StepRecord)."""

    kind: str
    state: str
    duration_s: float | None
    started_at: datetime
    finished_at: datetime | None


@dataclass(frozen=True)
class Cost:
    runs: int  # runs on the bisect runner (CI's readings are free)
    runner_s: float  # their runner time, cancelled runs included
    cancelled: int
    cancelled_s: float  # what the cancelled runs held their runners for (in runner_s)
    gpus: int  # per run (0: unknown, a CLI command)
    git_runs: int  # `git bisect run` on the same range: one run per halving, no confirmation, no A/B
    git_runner_s: float  # ... at this bisection's median run duration
    git_ranges: tuple[int, ...] = ()  # the range git bisects per red test, in commits (one: a bisection of one test)

    def describe(self) -> str:
        """`14 runs, 2.1 GPU-hours on 4-GPU runners, 2 cancelled runs included; git bisect run ... ~6 runs, ...`."""
        return f"{self.runs} runs, {self.held()}; {self.versus_git()}"

    def held(self) -> str:
        """The runners' time: `2.1 GPU-hours on 4-GPU runners, 2 cancelled runs included`."""
        said = self._amount(self.runner_s) + (f" on {self.gpus}-GPU runners" if self.gpus else "")
        plural = "s" if self.cancelled > 1 else ""
        return said + (f", {self.cancelled} cancelled run{plural} included" if self.cancelled else "")

    def versus_git(self) -> str:
        git = f"~{self.git_runs} runs, {self._amount(self.git_runner_s)}"
        if len(self.git_ranges) > 1:
            return f"`git bisect run` once per red test, {ranges_words(self.git_ranges)}: {git}, verifying nothing"
        return f"`git bisect run` on the same range: {git}, verifying nothing"

    def _amount(self, runner_s: float) -> str:
        """In hours, or in minutes when both sides are under a tenth of an hour (a demo's runs, a quick CLI test):
        one unit for both, so they compare at a glance."""
        per = "GPU" if self.gpus else "runner"
        held = runner_s * max(self.gpus, 1)
        if max(self.runner_s, self.git_runner_s) * max(self.gpus, 1) < 360:
            return f"{held / 60:.1f} {per}-minutes"
        return f"{held / 3600:.1f} {per}-hours"


def git_bisect_runs(commits: int) -> int:
    """Steps `git bisect run` takes over `commits` candidates: it halves the range until one is left."""
    return max(1, math.ceil(math.log2(commits))) if commits > 1 else 0


def git_range(graph: Graph, good: str, bad: str, passed: Iterable[str] = (), failed: Iterable[str] = ()) -> int:
    """The commits `git bisect run` searches for one test, given what a person at a terminal knows of it: its GOOD
    and BAD, and CI's readings of it inside the range -- a pass is one more GOOD (`git bisect good`), the earliest
    failure the BAD to start from. `graph`: the commits of a range ending at BAD (`git rev-list --parents`), which
    may start below this test's own GOOD (a group's union)."""
    failing = [ancestors(graph, sha) for sha in (*failed, bad) if sha in graph]
    below = min(failing, key=len) if failing else set()  # the earliest failure: its ancestors, itself included
    known_good: set[str] = set()
    for sha in (good, *passed):
        known_good |= ancestors(graph, sha)  # empty for a GOOD at or below the graph's base
    return len(below - known_good)


def ranges_words(ranges: Sequence[int]) -> str:
    """`each on its own range (3 tests, 4 to 30 commits)`: what git is given, per red test."""
    low, high = min(ranges), max(ranges)
    span = f"{low} commits" if low == high else f"{low} to {high} commits"
    return f"each on its own range ({len(ranges)} tests, {span})"


def cost_of(durations: list[float], cancelled_s: list[float], gpus: int, ranges: Sequence[int]) -> Cost:
    """From the finished runs' durations and the cancelled runs' held time; `ranges`: the range `git bisect run`
    is given per red test (`git_range`), one for a bisection of one test."""
    typical = statistics.median(durations) if durations else 0.0
    git = sum(git_bisect_runs(n) for n in ranges)
    held = sum(cancelled_s)
    return Cost(len(durations), sum(durations) + held, len(cancelled_s), held, gpus, git, git * typical, tuple(ranges))


def _held_by_cancelled(steps: Sequence[StoredStep]) -> list[float]:
    """Seconds each cancelled run held its runner: stopped once its answer was no longer needed, paid for all the
    same."""
    return [(s.finished_at - s.started_at).total_seconds() for s in steps if s.state == "cancelled" and s.finished_at]


def cost_of_steps(steps: Sequence[StoredStep], gpus: int, ranges: Sequence[int]) -> Cost:
    """A stored bisection's cost: its finished runs on the bisect runner (CI's readings are free) and its cancelled
    ones, beside git bisect run's on `ranges` (per red test, `git_range`)."""
    ran = [s.duration_s or 0.0 for s in steps if s.state in ("done", "lost")]
    return cost_of(ran, _held_by_cancelled(steps), gpus, ranges)
