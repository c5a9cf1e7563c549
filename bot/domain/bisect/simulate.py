"""Simulated searches on a linear history with a (possibly flaky) test, for tests and benchmarks."""

from __future__ import annotations

import random
from collections.abc import Sequence
from dataclasses import dataclass, field

from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Kind, Outcome, Problem, Run, Settings, State
from bot.domain.bisect.verdict import RawResult


def linear_graph(n: int) -> tuple[dict[str, tuple[str, ...]], str, str]:
    """A range of n commits named c1..cn on top of c0 (GOOD); BAD is cn."""
    graph: dict[str, tuple[str, ...]] = {f"c{i}": (f"c{i - 1}",) for i in range(1, n + 1)}
    return graph, "c0", f"c{n}"


@dataclass
class FlakyTest:
    """Commits at or after `culprit` (1-based) fail; good ones fail with probability `flake`."""

    culprit: int
    flake: float = 0.0
    rng: random.Random = field(default_factory=random.Random)

    def run(self, sha: str) -> RawResult:
        bad = int(sha[1:]) >= self.culprit
        failed = bad or self.rng.random() < self.flake
        return RawResult(1 if failed else 0)


@dataclass(frozen=True)
class SimResult:
    outcome: Outcome
    rounds: dict[Kind, int]  # rounds holding at least one run of that kind (calibration and search can share one)
    runs: int
    total_rounds: int = 0
    runs_by_kind: dict[Kind, int] = field(default_factory=dict)

    def culprit_index(self) -> int | None:
        return int(self.outcome.culprit[1:]) if self.outcome.culprit else None


def simulate(
    n: int, test: FlakyTest, workers: int, settings: Settings = Settings(), ci: Sequence[int] = ()
) -> SimResult:
    """Run the engine in synchronous rounds of `workers` parallel runs each; `ci`: positions CI already
    tested (a scheduled run at each), their results given to the engine before it starts (kind CI)."""
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, settings)
    state = State()
    runs = [Run(f"c{i}", Kind.CI, test.run(f"c{i}")) for i in ci]
    rounds = {kind: 0 for kind in Kind}
    total = 0
    while True:
        decision = decide(problem, state, runs, (), workers)
        state = decision.state
        if decision.outcome is not None:
            return SimResult(
                decision.outcome,
                rounds,
                sum(r.kind is not Kind.CI for r in runs),
                total,
                {kind: sum(r.kind is kind for r in runs) for kind in Kind},
            )
        if not decision.probes:
            raise RuntimeError("engine neither probed nor finished with nothing in flight")
        total += 1
        for kind in {p.kind for p in decision.probes}:
            rounds[kind] += 1
        runs += [Run(p.sha, p.kind, test.run(p.sha), p.round) for p in decision.probes]


def git_bisect(n: int, test: FlakyTest) -> tuple[int, int]:
    """What `git bisect run` does: one run per step, halving, no repeats. Returns (culprit, runs)."""
    good, bad, runs = 0, n, 0
    while bad - good > 1:
        mid = (good + bad) // 2
        runs += 1
        if test.run(f"c{mid}").exit_code:
            bad = mid
        else:
            good = mid
    return bad, runs
