"""Simulated searches on a linear history with a (possibly flaky) test, for tests and benchmarks."""

from __future__ import annotations

import math
import random
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from bot.domain.bisect.engine import decide
from bot.domain.bisect.group import Group, decide_group
from bot.domain.bisect.model import Kind, Outcome, Problem, Run, Settings, State
from bot.domain.bisect.verdict import RawResult


def linear_graph(n: int) -> tuple[dict[str, tuple[str, ...]], str, str]:
    """A range of n commits named c1..cn on top of c0 (GOOD); BAD is cn."""
    graph: dict[str, tuple[str, ...]] = {f"c{i}": (f"c{i - 1}",) for i in range(1, n + 1)}
    return graph, "c0", f"c{n}"


@dataclass
class FlakyTest:
    """Commits at or after `culprit` (1-based) fail with probability `rate` (1: always; less, an intermittent
    regression: a race, a GPU nondeterminism); good ones fail with probability `flake`."""

    culprit: int
    flake: float = 0.0
    rng: random.Random = field(default_factory=random.Random)
    rate: float = 1.0

    def run(self, sha: str) -> RawResult:
        bad = int(sha[1:]) >= self.culprit
        failed = (self.rate >= 1 or self.rng.random() < self.rate) if bad else self.rng.random() < self.flake
        return RawResult(1 if failed else 0)


SHAPES = ("gauss", "heavy", "bimodal", "outliers")


def noise(shape: str, rng: random.Random) -> float:
    """One run's noise in units of the spread: Gaussian; heavy-tailed (Student's t, 3 degrees of freedom: a tail
    that takes 4 sd about 1 run in 35); bimodal (two GPU clock states, +-1.5 apart from a narrow spread of 0.5,
    either with probability 1/2); or Gaussian with 3% outliers 10 sd off (a run that shared its GPU)."""
    if shape == "gauss":
        return rng.gauss(0.0, 1.0)
    if shape == "heavy":
        return rng.gauss(0.0, 1.0) / math.sqrt(rng.gammavariate(1.5, 1 / 1.5))
    if shape == "bimodal":
        return rng.gauss(0.0, 0.5) + (1.5 if rng.random() < 0.5 else -1.5)
    if shape == "outliers":
        return rng.gauss(0.0, 1.0) + (rng.choice((-10.0, 10.0)) if rng.random() < 0.03 else 0.0)
    raise ValueError(f"unknown noise shape {shape!r}: one of {', '.join(SHAPES)}")


@dataclass
class NoisyMetric:
    """A benchmark: every run reads `base` plus noise of `sd` (of `shape`: `noise`); commits at or after `culprit`
    (1-based; None: no regression) read `shift` more (negative: slower); the runner drifts by `drift` per run in
    the order runs are made (negative: slower over time, as a runner warming up). Exit 0 always: the reading is
    the verdict."""

    culprit: int | None
    shift: float
    sd: float = 1.0
    base: float = 100.0
    rng: random.Random = field(default_factory=random.Random)
    shape: str = "gauss"
    drift: float = 0.0
    made: int = 0

    def run(self, sha: str) -> RawResult:
        bad = self.culprit is not None and int(sha[1:]) >= self.culprit
        self.made += 1
        level = self.base + (self.shift if bad else 0.0) + self.drift * self.made
        return RawResult(0, metric=level + self.sd * noise(self.shape, self.rng))


def red_tests(rng: random.Random, n: int) -> dict[str, int | None]:
    """The red tests of a simulated nightly: 2-6 tests, 1-3 distinct culprits among them (each breaking at least one
    test), 0-2 flaky ones (None: no culprit, their red reading a flake). Test -> its culprit's position in 1..n."""
    count = rng.randint(2, 6)
    flaky = rng.randint(0, min(2, count - 1))
    real = count - flaky
    positions = rng.sample(range(1, n + 1), rng.randint(1, min(3, real)))
    culprits: dict[str, int | None] = {
        f"t{i}": positions[i] if i < len(positions) else rng.choice(positions) for i in range(real)
    }
    return culprits | {f"flaky{j}": None for j in range(flaky)}


@dataclass
class RedFirst:
    """A test as a red run leaves it: its first reading of BAD fails (that is why it is being bisected), whatever
    it is; every later run is the test's own (a flaky test's failure there may have been its flake)."""

    test: FlakyTest
    bad: str
    seen: bool = False

    def run(self, sha: str) -> RawResult:
        if sha == self.bad and not self.seen:
            self.seen = True
            return RawResult(1)
        return self.test.run(sha)


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
    n: int,
    test: FlakyTest | RedFirst | NoisyMetric,
    workers: int,
    settings: Settings = Settings(),
    ci: Sequence[int] = (),
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


@dataclass(frozen=True)
class GroupSimResult:
    outcomes: dict[str, Outcome]
    runs: int  # runner runs (steps), however many tests each carried
    rounds: int
    results: dict[str, int]  # results each test got (its own asks and the steps it rode)

    def culprit_index(self, test: str) -> int | None:
        culprit = self.outcomes[test].culprit
        return int(culprit[1:]) if culprit else None


def simulate_group(
    n: int,
    tests: Mapping[str, FlakyTest | RedFirst],
    workers: int,
    settings: Settings = Settings(),
    goods: Mapping[str, int] = {},
) -> GroupSimResult:
    """The tests bisected together (bot.domain.bisect.group) in synchronous rounds of `workers` steps; `goods`: a
    test's own GOOD position where it is later than c0."""
    graph, good, bad = linear_graph(n)
    group = Group({t: Problem(graph, f"c{goods[t]}" if t in goods else good, bad, settings) for t in tests})
    states = {t: State() for t in tests}
    runs: list[Run] = []
    outcomes: dict[str, Outcome] = {}
    steps = rounds = 0
    while True:
        decision = decide_group(group, states, runs, (), workers)
        states = dict(decision.states)
        outcomes.update(decision.outcomes)
        if decision.done:
            results = {t: sum(r.test == t for r in runs) for t in tests}
            return GroupSimResult(outcomes, steps, rounds, results)
        if not decision.steps:
            raise RuntimeError("the group neither probed nor finished with nothing in flight")
        rounds += 1
        steps += len(decision.steps)
        runs += [Run(p.sha, p.kind, tests[p.test].run(p.sha), p.round, p.test) for step in decision.steps for p in step]


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
