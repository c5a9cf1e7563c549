"""Whether a red test regressed at all (bot.domain.bisect.regression), and a group's flaky member dismissed by it
(bot.domain.bisect.group)."""

from __future__ import annotations

import random
import statistics

import pytest

from bot.domain.bisect.group import Group, decide_group
from bot.domain.bisect.model import Kind, Problem, Run, Settings, State, Status
from bot.domain.bisect.regression import MIN_RATIO, endpoint_runs, regression
from bot.domain.bisect.simulate import FlakyTest, RedFirst, linear_graph
from bot.domain.bisect.verdict import RawResult

N = 64
GRAPH, GOOD, BAD = linear_graph(N)
PROBLEM = Problem(GRAPH, GOOD, BAD)
SEEDS = 200


def read_endpoints(flake: float, rate: float, seed: int, runs: int) -> int | None:
    """GOOD and BAD read in turn after the red reading of BAD (a culprit never located: the worst case for a real
    one); the readings after which no regression is ruled out, or None within `runs`."""
    rng = random.Random(seed)
    seen = [Run(BAD, Kind.CALIBRATE, RawResult(1), 0)]
    for t in range(runs):
        sha, p = (GOOD, flake) if t % 2 == 0 else (BAD, rate)
        seen.append(Run(sha, Kind.CALIBRATE, RawResult(int(rng.random() < p)), t + 1))
        if t % 4 == 3 and regression(PROBLEM, seen).ruled_out:
            return t + 1
    return None


def test_a_test_failing_as_often_at_good_as_at_bad_is_ruled_out_within_120_runs_in_most_histories():
    told = [read_endpoints(0.3, 0.3, seed, 120) for seed in range(SEEDS)]
    ended = sorted(t for t in told if t is not None)
    assert len(ended) >= 0.6 * SEEDS, len(ended)
    assert statistics.median(ended) <= 80, ended


@pytest.mark.parametrize("rate", [0.3, 0.5, 0.7, 1.0])
def test_a_real_intermittent_culprit_read_only_at_the_endpoints_is_dismissed_at_most_1_percent(rate):
    """The intermittent bench's culprits (5% flakes before them): read at the endpoints alone for 120 runs, the worst
    case (a search would locate the culprit, and its odds fall further), at most 1% are called no regression."""
    dismissed = sum(read_endpoints(0.05, rate, seed, 120) is not None for seed in range(SEEDS))
    assert dismissed <= 0.01 * SEEDS, dismissed


def test_the_odds_turn_on_the_endpoints_gap_not_on_how_often_the_test_fails():
    def odds(good: tuple[int, int], bad: tuple[int, int]) -> float:
        runs = [Run(GOOD, Kind.CALIBRATE, RawResult(1), 1)] * good[0] + [Run(GOOD, Kind.CALIBRATE, RawResult(0), 1)] * (
            good[1] - good[0]
        )
        runs += [Run(BAD, Kind.CALIBRATE, RawResult(1), 1)] * bad[0] + [Run(BAD, Kind.CALIBRATE, RawResult(0), 1)] * (
            bad[1] - bad[0]
        )
        return regression(PROBLEM, runs).log_odds

    same = odds((12, 40), (12, 40))  # 30% at both ends
    assert same > 0  # no regression likelier than one
    assert odds((12, 40), (int(12 * MIN_RATIO), 40)) < 0  # BAD failing twice as often: a regression of the size
    assert odds((2, 40), (12, 40)) < -3  # 5% at GOOD, 30% at BAD: a regression, 20:1 and more
    assert odds((24, 80), (24, 80)) > same  # the same rates, twice the runs: surer


def test_a_declared_confidence_sets_the_bar():
    runs = [Run(GOOD, Kind.CALIBRATE, RawResult(int(t % 10 < 3)), t) for t in range(40)]
    runs += [Run(BAD, Kind.CALIBRATE, RawResult(int(t % 10 < 3)), t) for t in range(40)]
    loose = regression(Problem(GRAPH, GOOD, BAD, Settings(confidence=0.9)), runs)
    strict = regression(Problem(GRAPH, GOOD, BAD, Settings(confidence=0.999)), runs)
    assert loose.log_odds == strict.log_odds and loose.bar < strict.bar
    assert "its failures are flakes, not a regression" in loose.message(PROBLEM)
    assert "(12 of 40 runs)" in loose.message(PROBLEM)


def test_the_endpoint_runs_go_where_they_tell_most():
    passed = [Run(sha, Kind.CALIBRATE, RawResult(0), 1) for sha in (GOOD, BAD) for _ in range(4)]
    once = [Run(BAD, Kind.CALIBRATE, RawResult(1), 0), *passed]
    # failed once (the red reading) and passed since: BAD's passes are what rule a regression out
    assert endpoint_runs(PROBLEM, once, [], 1) == [BAD]
    # ... until runs pile up there
    assert endpoint_runs(PROBLEM, once, [BAD, BAD, BAD], 1) == [GOOD]
    flaky = [Run(sha, Kind.CALIBRATE, RawResult(int(t % 3 == 0)), t) for t in range(12) for sha in (GOOD, BAD)]
    # failing now and then at both: both ends
    assert set(endpoint_runs(PROBLEM, flaky, [], 4)) == {GOOD, BAD}
    # a GOOD that happened to pass often draws no more than SHARE x BAD's runs: BAD is read again
    skewed = [Run(GOOD, Kind.CALIBRATE, RawResult(int(t < 3)), t) for t in range(22)]
    skewed += [Run(BAD, Kind.CALIBRATE, RawResult(int(t < 2)), t) for t in range(7)]
    assert endpoint_runs(PROBLEM, skewed, [], 3) == [BAD] * 3


def group_with_a_flaky_member(seed: int, rate: float = 1.0) -> tuple[dict[str, int | None], dict[str, RedFirst]]:
    rng = random.Random(seed)
    culprit = rng.randint(1, N)
    culprits: dict[str, int | None] = {"real": culprit, "flaky": None}
    tests = {
        "real": RedFirst(FlakyTest(culprit, 0.05, random.Random(seed * 10 + 1), rate=rate), BAD),
        "flaky": RedFirst(FlakyTest(N + 1, 0.3, random.Random(seed * 10 + 2)), BAD),
    }
    return culprits, tests


def bisect_together(tests: dict[str, RedFirst], workers: int = 3):
    group = Group({t: Problem(GRAPH, GOOD, BAD) for t in tests})
    states, runs, outcomes, own = {t: State() for t in tests}, [], {}, {t: 0 for t in tests}
    while not (decision := decide_group(group, states, runs, (), workers)).done:
        states = dict(decision.states)
        outcomes.update(decision.outcomes)
        for step in decision.steps:
            if len(step) == 1:
                own[step[0].test] += 1  # a step no other test rode: this test's own cost
            runs += [Run(p.sha, p.kind, tests[p.test].run(p.sha), p.round, p.test) for p in step]
    outcomes.update(decision.outcomes)
    return outcomes, own, runs


def test_a_flaky_member_of_a_group_is_dismissed_and_never_blamed_for_fewer_runs_of_its_own():
    """A group of a real culprit's test and a test failing 30% of the time anywhere (red at BAD by chance), on 3
    runners: the flaky test names no culprit, in over a third of histories it ends `no_culprit` on the odds (the rest
    reach its run budget first: a 30% flake takes about 60 endpoint runs to tell from a regression), and the steps no
    other test rode (its own cost) average under 85, where searching to its run budget spent 94; the real test's
    culprit is named as before."""
    dismissed, own_runs, right = 0, [], 0
    for seed in range(SEEDS):
        culprits, tests = group_with_a_flaky_member(seed)
        outcomes, own, _ = bisect_together(tests)
        flaky = outcomes["flaky"]
        assert flaky.culprit is None and flaky.status not in (Status.FOUND, Status.AMBIGUOUS), (seed, flaky)
        dismissed += flaky.status is Status.NO_CULPRIT and "not a regression" in flaky.message
        own_runs.append(own["flaky"])
        right += outcomes["real"].culprit == f"c{culprits['real']}"
    assert dismissed >= SEEDS / 3, dismissed
    assert statistics.fmean(own_runs) <= 85, statistics.fmean(own_runs)
    assert right >= 0.99 * SEEDS, right


def test_a_real_intermittent_culprit_beside_a_flaky_test_is_not_dismissed():
    """The same group with the real test's culprit failing half the time: its BAD passes too, so it is in doubt as
    the flaky one is, yet at most 1% of such culprits are called no regression."""
    dismissed = 0
    for seed in range(SEEDS):
        _, tests = group_with_a_flaky_member(seed, rate=0.5)
        outcomes, _, _ = bisect_together(tests)
        real = outcomes["real"]
        dismissed += real.status is Status.NO_CULPRIT and "not a regression" in real.message
    assert dismissed <= 0.01 * SEEDS, dismissed
