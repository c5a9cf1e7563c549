import math
import random
from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bot.cli.wording import said  # the remedies are worded per surface; the CLI's says flags
from bot.domain.bisect.engine import decide
from bot.domain.bisect.evidence import fewest_errors
from bot.domain.bisect.model import Kind, Outcome, Phase, Probe, Problem, Run, Settings, State, Status
from bot.domain.bisect.planner import runs_worth_starting
from bot.domain.bisect.posterior import Posterior, Tally
from bot.domain.bisect.sampled import ENDPOINT_FIRST
from bot.domain.bisect.simulate import FlakyTest, git_bisect, linear_graph, simulate
from bot.domain.bisect.verdict import MetricRule, RawResult, Verdict
from tests.support.engine import drive


def bound(n: int, k: int) -> int:
    rounds, size = 0, n
    while size > 1:  # exact integer ceil(log_{k+1} n)
        size = math.ceil(size / (k + 1))
        rounds += 1
    return rounds


@given(n=st.integers(1, 3000), data=st.data(), k=st.integers(1, 8), auto=st.booleans())
@settings(max_examples=200, deadline=None)
def test_deterministic_search_finds_culprit_in_k_ary_rounds(n, data, k, auto):
    culprit = data.draw(st.integers(1, n))
    result = simulate(n, FlakyTest(culprit), k, Settings(flake_rate=None if auto else 0.0))
    assert result.outcome.status is Status.FOUND
    assert result.culprit_index() == culprit
    assert result.runs_by_kind[Kind.CALIBRATE] == 2 and result.rounds[Kind.CALIBRATE] == math.ceil(
        2 / k
    )  # one run per endpoint
    # the search overlaps calibration on the runners it leaves free, and never needs a round more for it; under auto a
    # culprit may fail only some of the time, so its parent's pass is read again (and it, where that settles more:
    # planner.settle_probes) until a culprit failing most of the time would have shown there -- at most AUTO_SETTLE
    # runs' worth of rounds more than --flake-rate 0, which takes a pass as proof as git bisect run does
    settle = math.ceil(AUTO_SETTLE / k) if auto else 0
    assert result.total_rounds - result.rounds[Kind.CONFIRM] <= math.ceil(2 / k) + bound(n, k) + settle
    assert result.runs_by_kind[Kind.CONFIRM] == (1 if auto else 0)  # auto re-runs the culprit once; 0 trusts the search
    assert result.rounds[Kind.CONFIRM] == (1 if auto else 0)


AUTO_SETTLE = 16  # measured worst: 15 rounds at k = 1, a culprit at BAD of 3000 commits (its only failures at BAD)


def test_a_round_starts_the_fewest_runs_that_keep_its_number_of_rounds():
    """240 commits on 3 workers, BAD calibrating beside the first round (GOOD taken as read, a deterministic test): 2
    search runs a round
    split 3 ways, 3^5 >= 240, in the 5 rounds 3 runs a round would need with one runner taken; 10 search runs where
    every runner busy spends 12. One round of 4 runners on 4 hypotheses: 3 runs, all of them needed."""
    result = simulate(240, FlakyTest(100), 3, Settings(good_as_read=True, flake_rate=0.0))
    assert result.culprit_index() == 100 and result.runs_by_kind[Kind.SEARCH] == 10 and result.rounds[Kind.SEARCH] == 5
    graph, good, bad = linear_graph(4)
    first = decide(
        Problem(graph, good, bad, Settings(trust_endpoints=True)), State(), [Run(bad, Kind.CI, RawResult(1))], (), 4
    )
    assert len(first.probes) == 3 and {p.kind for p in first.probes} == {Kind.SEARCH}
    assert runs_worth_starting(Posterior.compute(80, {80: Tally(0, 1)}, 0.0), 3, 0) == 2  # 3^4 = 81 >= 80
    assert runs_worth_starting(Posterior.compute(80, {80: Tally(0, 1)}, 0.0), 3, 2) == 0  # both under way


@given(n=st.integers(2, 3000), data=st.data(), k=st.integers(1, 8))
@settings(max_examples=200, deadline=None)
def test_the_clis_default_runs_bad_alone_first_in_no_more_rounds(n, data, k):
    """GOOD taken as read: BAD's one calibration run (GOOD's too only when the culprit is its child), and the search
    in k-ary rounds, fewer runs a round where they keep the number of rounds."""
    culprit = data.draw(st.integers(1, n))
    result = simulate(n, FlakyTest(culprit), k, Settings(good_as_read=True))
    assert result.outcome.status is Status.FOUND and result.culprit_index() == culprit
    assert result.runs_by_kind[Kind.CALIBRATE] == (2 if culprit == 1 else 1)
    assert result.total_rounds - result.rounds[Kind.CONFIRM] <= 1 + bound(n, k) + (culprit == 1) + math.ceil(
        AUTO_SETTLE / k
    )


@given(st.dictionaries(st.integers(0, 40), st.tuples(st.integers(0, 3), st.integers(0, 3)), max_size=12))
@settings(max_examples=300, deadline=None)
def test_fewest_errors_is_the_best_single_cut(cells):
    tallies = {p: Tally(*pf) for p, pf in cells.items()}
    brute = min(sum(t.fails if p <= cut else t.passes for p, t in tallies.items()) for cut in [-1, *tallies])
    assert fewest_errors(tallies) == (brute, sum(t.passes + t.fails for t in tallies.values()))


def test_flaky_tests_accuracy_at_least_99_percent_where_git_bisect_is_not():
    ours = theirs = 0
    sims = 1000
    for seed in range(sims):
        rng = random.Random(seed)
        culprit = rng.randint(1, 64)
        ours += simulate(64, FlakyTest(culprit, 0.05, rng), 3, Settings(flake_rate=0.05)).culprit_index() == culprit
        theirs += git_bisect(64, FlakyTest(culprit, 0.05, random.Random(seed + 10**6)))[0] == culprit
    print(f"revert-bisect {ours / sims:.3f} vs git bisect run {theirs / sims:.3f}")
    assert ours / sims >= 0.99
    assert theirs / sims < 0.95  # the model really is flaky enough to fool a plain bisection


def test_auto_flake_mode_recovers_from_flakes():
    correct = 0
    for seed in range(300):
        rng = random.Random(seed)
        culprit = rng.randint(1, 64)
        correct += simulate(64, FlakyTest(culprit, 0.05, rng), 3, Settings()).culprit_index() == culprit
    assert correct / 300 >= 0.97


def test_auto_keeps_99_percent_at_a_5_percent_flake_rate_with_one_culprit_rerun():
    """Auto trusts single results until one contradicts; the culprit's one re-run still catches the flake that
    misled the search often enough, at k = 1 (no overlap, the fewest runs) and at k = 3."""
    sims = 3000
    # the engine's default (both endpoints run first) and the CLI's (BAD reproduced, GOOD taken as read)
    for settings_ in (Settings(), Settings(good_as_read=True)):
        for k in (1, 3):
            correct = 0
            for seed in range(sims):
                rng = random.Random(seed)
                culprit = rng.randint(1, 64)
                correct += simulate(64, FlakyTest(culprit, 0.05, rng), k, settings_).culprit_index() == culprit
            assert correct / sims >= 0.99, (settings_, k, correct / sims)


def exits(bad_from: int, special: dict[int, int] | None = None):
    special = special or {}
    return lambda sha: RawResult(special.get(int(sha[1:]), 1 if int(sha[1:]) >= bad_from else 0))


def test_not_reproducible_when_bad_passes():
    graph, good, bad = linear_graph(16)
    d, runs = drive(Problem(graph, good, bad), exits(99))
    assert d.outcome.status is Status.NOT_REPRODUCIBLE and "passes on BAD" in d.outcome.message
    # only the first round searches, beside the endpoints it presumed right; nothing searches after BAD passed
    assert all(r.kind is Kind.CALIBRATE for r in runs if r.round > 1)


def test_good_fails():
    graph, good, bad = linear_graph(16)
    d, _ = drive(Problem(graph, good, bad), exits(0))
    assert d.outcome.status is Status.GOOD_FAILS and "older --good" in said(
        d.outcome.message, d.outcome.reason, d.outcome.facts
    )


def test_untestable_endpoint():
    graph, good, bad = linear_graph(16)
    d, _ = drive(Problem(graph, good, bad), exits(5, {16: 125}))
    assert d.outcome.status is Status.UNTESTABLE and "BAD" in d.outcome.message


def test_skipped_commits_bordering_the_answer_are_reported_as_ambiguous():
    graph, good, bad = linear_graph(32)
    d, _ = drive(Problem(graph, good, bad), exits(12, {10: 125, 11: 125}))
    assert d.outcome.status is Status.AMBIGUOUS
    assert d.outcome.candidates == ("c10", "c11", "c12")
    # the last, the one seen failing, is a best guess: any of the three may be the first bad commit (issue 33)
    assert d.outcome.culprit is None and d.outcome.first_parent_culprit is None and d.outcome.best_guess == "c12"


def test_an_inconclusive_answer_names_its_best_guess_never_a_culprit():
    """A script reverts `culprit`: the commit a search stopped short of confirming is `best_guess`, with its P."""
    graph, good, bad = linear_graph(32)
    d, _ = drive(Problem(graph, good, bad, Settings(max_runs=6, flake_rate=0.05)), exits(20), workers=1)
    assert d.outcome.status is Status.INCONCLUSIVE and "without reaching confidence" in d.outcome.message
    assert d.outcome.culprit is None and d.outcome.first_parent_culprit is None
    assert d.guess is not None and d.outcome.best_guess == d.guess.sha and d.outcome.confidence == d.guess.probability
    assert f"best guess P={d.guess.probability:.3f}" in d.outcome.message


def test_only_a_found_outcome_names_a_culprit():
    with pytest.raises(ValueError, match="inconclusive outcome names no culprit"):
        Outcome(Status.INCONCLUSIVE, "stopped", culprit="c7", confidence=0.9)
    with pytest.raises(ValueError, match="ambiguous outcome names no culprit"):
        Outcome(Status.AMBIGUOUS, "one of 2", first_parent_culprit="c7")
    with pytest.raises(ValueError, match="names its culprit, not a best guess"):
        Outcome(Status.FOUND, "found", culprit="c7", best_guess="c7")
    assert Outcome(Status.FOUND, "found", culprit="c7").best_guess is None
    assert Outcome(Status.INCONCLUSIVE, "stopped", best_guess="c7").culprit is None


def test_skipped_commits_away_from_the_answer_do_not_matter():
    graph, good, bad = linear_graph(32)
    d, runs = drive(Problem(graph, good, bad), exits(20, {8: 125, 16: 125, 24: 125}))
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c20"


def test_infra_failures_are_retried_and_never_evidence():
    graph, good, bad = linear_graph(32)
    seen: dict[str, int] = {}

    def flaky_infra(sha):
        seen[sha] = seen.get(sha, 0) + 1
        if seen[sha] == 1 and sha not in ("c0", "c32"):
            return RawResult(255)  # first attempt on every commit dies on infrastructure
        return exits(9)(sha)

    d, runs = drive(Problem(graph, good, bad), flaky_infra)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c9"
    assert any(r.raw.exit_code == 255 for r in runs)


def test_commit_that_always_times_out_becomes_untestable():
    graph, good, bad = linear_graph(8)
    timeout = lambda sha: RawResult(None, infra_reason="timeout") if sha == "c4" else exits(4)(sha)  # noqa: E731
    d, runs = drive(Problem(graph, good, bad, Settings(max_infra_per_commit=3)), timeout)
    assert sum(r.sha == "c4" for r in runs) == 3
    assert d.outcome.status is Status.AMBIGUOUS and d.outcome.candidates == ("c4", "c5")


def test_flake_rate_zero_refuses_contradicting_results():
    graph, good, bad = linear_graph(16)
    runs = [
        Run("c0", Kind.CALIBRATE, RawResult(0), 1),
        Run("c16", Kind.CALIBRATE, RawResult(1), 1),
        Run("c4", Kind.SEARCH, RawResult(1), 1),
        Run("c12", Kind.SEARCH, RawResult(0), 1),
    ]  # a pass above a failure
    d = decide(Problem(graph, good, bad, Settings(flake_rate=0.0)), State(), runs, (), 4)
    assert d.outcome.status is Status.INCONCLUSIVE and "--flake-rate auto" in said(
        d.outcome.message, d.outcome.reason, d.outcome.facts
    )


def test_confirmation_disagreeing_sends_search_back():
    """A good commit that fails once during the search is caught by the confirmation round."""
    graph, good, bad = linear_graph(16)
    failed_once = set()

    def one_flake(sha):
        if sha == "c8" and sha not in failed_once:  # the first probe
            failed_once.add(sha)
            return RawResult(1)
        return exits(11)(sha)

    d, runs = drive(Problem(graph, good, bad), one_flake, workers=1)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c11"
    assert d.flake_rate > 0  # the contradiction switched the model to flaky


def test_a_contradiction_under_auto_brings_back_full_calibration_and_confirmation():
    """c8 fails once: the search trusts it, the culprit's single re-run contradicts it, and from then on
    the test is treated as flaky: endpoints to two runs each, culprit and parent re-run x times each."""
    graph, good, bad = linear_graph(16)
    flaked = set()

    def one_flake(sha):
        if sha == "c8" and sha not in flaked:
            flaked.add(sha)
            return RawResult(1)
        return exits(11)(sha)

    d, runs = drive(Problem(graph, good, bad), one_flake, workers=1)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c11"
    shas = [r.sha for r in runs]
    # the search read c8 again beside its parent c7 (a pass is not proof under auto): the contradiction showed there,
    # before any confirmation, and brought back the endpoints' full calibration
    assert shas.count("c8") == 2 and shas.index("c8", shas.index("c8") + 1) < shas.index("c0", 1)
    assert sorted(r.sha for r in runs if r.kind is Kind.CALIBRATE) == ["c0", "c0", "c16", "c16"]
    x = Settings().confirm_runs(d.flake_rate)
    assert x >= 2 and [r.sha for r in runs if r.kind is Kind.CONFIRM].count("c11") == x
    assert [r.sha for r in runs if r.kind is Kind.CONFIRM].count("c10") == x
    assert f"confirmed by {x} re-runs of it and its parent" in d.outcome.message


def test_metric_mode_uses_calibrated_boundary():
    graph, good, bad = linear_graph(20)
    rule = MetricRule(threshold=0.002)
    # commit 6 nudges the metric a little (still far below BAD's level); commit 13 is the regression
    value = lambda i: 0.0065 if i >= 13 else (0.0009 if i >= 6 else 0.0003)  # noqa: E731
    d, _ = drive(Problem(graph, good, bad, Settings(metric=rule)), lambda sha: RawResult(0, value(int(sha[1:]))))
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c13"
    assert 0.0009 < d.boundary < 0.0065


def test_metric_within_threshold_is_not_reproducible():
    graph, good, bad = linear_graph(8)
    rule = MetricRule(threshold=0.002)
    d, _ = drive(
        Problem(graph, good, bad, Settings(metric=rule)), lambda sha: RawResult(0, 0.0015 if sha == "c8" else 0.0003)
    )
    assert d.outcome.status is Status.NOT_REPRODUCIBLE and "within the threshold" in d.outcome.message


def test_a_metric_reading_within_the_threshold_once_is_read_again_under_auto():
    graph, good, bad = linear_graph(8)
    # BAD's first reading does not reproduce the failure, its second does: within a factor 4 of each other, noise
    # around the threshold (further apart, one of them would be a flaky run: test_noisy_metrics)
    bad_reads = iter([0.0019, 0.0065])

    def reading(sha):
        if sha == "c8":
            return RawResult(0, next(bad_reads, 0.0065))
        return RawResult(0, 0.0065 if int(sha[1:]) >= 5 else 0.0003)

    d, runs = drive(Problem(graph, good, bad, Settings(metric=MetricRule(threshold=0.002))), reading, workers=2)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c5"
    # BAD read on both sides of the threshold: from then on the metric is sampled (bot.domain.bisect.sampled), each
    # endpoint read ENDPOINT_FIRST times, then once more each until the odds that BAD reads worse pass the gate
    # (BAD's 0.0019 among 4 readings leaves them at 39:1; at 5 each, 253:1), the culprit's shift stated with its
    # interval
    calibrated = [r.sha for r in runs if r.kind is Kind.CALIBRATE]
    assert calibrated.count("c0") == calibrated.count("c8") == ENDPOINT_FIRST + 1
    assert "at the culprit (95%)" in d.outcome.message
    strict, runs = drive(
        Problem(graph, good, bad, Settings(flake_rate=0.0, metric=MetricRule(threshold=0.002))),
        lambda sha: RawResult(0, 0.0015 if sha == "c8" else 0.0003),
        workers=2,
    )
    assert (
        strict.outcome.status is Status.NOT_REPRODUCIBLE and sum(r.kind is Kind.CALIBRATE for r in runs) == 2
    )  # 0 trusts one reading


def test_calibration_runs_endpoints_twice_each_in_parallel_with_a_declared_flake_rate():
    graph, good, bad = linear_graph(10)
    d = decide(Problem(graph, good, bad, Settings(flake_rate=0.05)), State(), [], (), 4)
    assert sorted(p.sha for p in d.probes) == ["c0", "c0", "c10", "c10"]
    assert {p.kind for p in d.probes} == {Kind.CALIBRATE}


def test_a_trusted_test_calibrates_once_per_endpoint_and_searches_on_the_free_runners():
    graph, good, bad = linear_graph(99)
    for config in (Settings(), Settings(flake_rate=0.0)):
        d = decide(Problem(graph, good, bad, config), State(), [], (), 4)
        assert sorted((p.sha, p.kind) for p in d.probes if p.kind is Kind.CALIBRATE) == [
            ("c0", Kind.CALIBRATE),
            ("c99", Kind.CALIBRATE),
        ]
        assert [p.sha for p in d.probes if p.kind is Kind.SEARCH] == [
            "c33",
            "c66",
        ]  # GOOD and BAD presumed: the range in thirds
        assert {p.round for p in d.probes} == {1} and d.state.phase is Phase.CALIBRATING


def test_flake_rate_zero_calibrates_once_and_trusts_the_search_without_confirmation():
    graph, good, bad = linear_graph(240)
    d, runs = drive(Problem(graph, good, bad, Settings(flake_rate=0.0)), exits(131), workers=3)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c131"
    assert sorted(r.sha for r in runs if r.kind is Kind.CALIBRATE) == ["c0", "c240"]
    assert not [r for r in runs if r.kind is Kind.CONFIRM]
    assert "taken as final" in d.outcome.message
    git_runs = git_bisect(240, FlakyTest(131))[1]
    assert len(runs) <= 2 * git_runs  # the target at k = 3 (today: 20 runs against git's 8)


def test_auto_without_contradiction_reruns_the_culprit_once_and_not_its_parent():
    graph, good, bad = linear_graph(240)
    d, runs = drive(Problem(graph, good, bad), exits(131), workers=3)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c131"
    assert sorted(r.sha for r in runs if r.kind is Kind.CALIBRATE) == ["c0", "c240"]
    assert [r.sha for r in runs if r.kind is Kind.CONFIRM] == ["c131"]
    assert "confirmed by 1 re-run of it; its parent's passes stand" in d.outcome.message
    # a pass is not proof under auto (a culprit may fail only some of the time): the parent passed 4 times, enough
    # that a culprit failing 70% of the time would have failed there with probability 1 - 0.3^4 > 0.99
    assert [r.sha for r in runs].count("c130") == 4 and all(r.raw.exit_code == 0 for r in runs if r.sha == "c130")
    assert len({r.round for r in runs}) <= 7  # calibration overlapped, the parent read beside the search's last rounds


def test_declared_flake_rate_keeps_full_calibration_and_confirmation():
    graph, good, bad = linear_graph(64)
    settings = Settings(flake_rate=0.05)
    d, runs = drive(Problem(graph, good, bad, settings), exits(40), workers=3)
    x = settings.confirm_runs(0.05)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c40"
    assert sorted(r.sha for r in runs if r.kind is Kind.CALIBRATE) == ["c0", "c0", "c64", "c64"]
    assert sorted(r.sha for r in runs if r.kind is Kind.CONFIRM) == ["c39"] * x + ["c40"] * x


def _calibrating(problem, k):
    """The first decision, and the runs of its overlapped search left in flight."""
    first = decide(problem, State(), [], (), k)
    return first, [p for p in first.probes if p.kind is Kind.SEARCH]


def test_a_surprising_good_endpoint_cancels_the_overlapped_search_and_runs_good_again_under_auto():
    graph, good, bad = linear_graph(99)
    problem = Problem(graph, good, bad)
    first, searching = _calibrating(problem, 4)
    assert len(searching) == 2
    runs = [Run("c0", Kind.CALIBRATE, RawResult(1), 1)]  # GOOD failed; BAD and the search still running
    d = decide(problem, first.state, runs, [Probe("c99", Kind.CALIBRATE, 1), *searching], 1)
    assert set(d.obsolete) == set(searching)
    # on the freed runners, both endpoints towards two runs each, as for a flaky test; no search yet
    assert set(d.probes) == {Probe("c0", Kind.CALIBRATE, 2), Probe("c99", Kind.CALIBRATE, 2)} and len(d.probes) == 2
    # GOOD passes its second run: it was a flake; the search starts, no longer trusting single results
    runs += [
        Run("c99", Kind.CALIBRATE, RawResult(1), 1),
        Run("c0", Kind.CALIBRATE, RawResult(0), 2),
        Run("c99", Kind.CALIBRATE, RawResult(1), 2),
    ]
    d = decide(problem, d.state, runs, [], 4)
    assert d.state.phase is Phase.SEARCHING and d.flake_rate > 0
    assert len(d.probes) == 4 and {p.kind for p in d.probes} == {Kind.SEARCH}


def test_a_surprising_endpoint_under_flake_rate_zero_ends_it_and_cancels_the_search():
    graph, good, bad = linear_graph(99)
    problem = Problem(graph, good, bad, Settings(flake_rate=0.0))
    first, searching = _calibrating(problem, 3)
    runs = [Run("c99", Kind.CALIBRATE, RawResult(0), 1)]  # BAD passed while GOOD and the search run
    d = decide(problem, first.state, runs, [Probe("c0", Kind.CALIBRATE, 1), *searching], 1)
    assert d.obsolete == tuple(searching) and d.probes == ()  # no search on a false premise; wait for GOOD
    runs.append(Run("c0", Kind.CALIBRATE, RawResult(0), 1))
    d = decide(problem, d.state, runs, [], 3)
    assert d.outcome.status is Status.NOT_REPRODUCIBLE and "(1 runs)" in d.outcome.message


def test_bad_passing_once_under_auto_is_read_again_before_not_reproducible():
    graph, good, bad = linear_graph(99)
    problem = Problem(graph, good, bad)
    d, runs = drive(problem, exits(999), workers=3)  # BAD passes every time
    assert d.outcome.status is Status.NOT_REPRODUCIBLE
    # BAD passed: read until a culprit failing 70% of the time would have failed there with probability >= 0.99
    assert problem.settings.reproduce_runs == 4
    assert sorted(r.sha for r in runs if r.kind is Kind.CALIBRATE) == ["c0", "c0", "c99", "c99", "c99", "c99"]
    assert [r.kind for r in runs if r.sha not in ("c0", "c99")] == [
        Kind.SEARCH
    ]  # only the first round's overlapped run


def test_search_results_arriving_before_the_endpoints_wait_for_them():
    """Speculation on presumed endpoints stays one round deep: a search result that comes back first
    frees a runner, which waits for the endpoints rather than starting a round of its own."""
    graph, good, bad = linear_graph(99)
    problem = Problem(graph, good, bad)
    first, searching = _calibrating(problem, 3)
    (probe,) = searching
    runs = [Run(probe.sha, Kind.SEARCH, RawResult(1), 1)]
    flying = [Probe("c0", Kind.CALIBRATE, 1), Probe("c99", Kind.CALIBRATE, 1)]
    d = decide(problem, first.state, runs, flying, 1)
    assert d.state.phase is Phase.CALIBRATING and d.probes == () and d.obsolete == ()
    runs += [Run("c0", Kind.CALIBRATE, RawResult(0), 1), Run("c99", Kind.CALIBRATE, RawResult(1), 1)]
    d = decide(problem, d.state, runs, [], 3)
    assert d.state.phase is Phase.SEARCHING and len(d.probes) == 3
    assert all(int(p.sha[1:]) < int(probe.sha[1:]) for p in d.probes)  # the early result is used: below its failure


def test_in_flight_probes_are_not_duplicated():
    graph, good, bad = linear_graph(100)
    calib = [Run(s, Kind.CALIBRATE, RawResult(0 if s == "c0" else 1), 1) for s in ("c0", "c0", "c100", "c100")]
    state = State(Phase.SEARCHING)
    first = decide(Problem(graph, good, bad), state, calib, (), 1)
    flying = [Probe(first.probes[0].sha, Kind.SEARCH, 2)]
    second = decide(Problem(graph, good, bad), first.state, calib, flying, 2)
    assert first.probes[0].sha not in {p.sha for p in second.probes}
    assert len(second.probes) == 2


MERGE_GRAPH = {
    # mainline m1..m4; m3 merges side branch s1..s3 that forked at m1
    "m1": ("g",),
    "m2": ("m1",),
    "s1": ("m1",),
    "s2": ("s1",),
    "s3": ("s2",),
    "m3": ("m2", "s3"),
    "m4": ("m3",),
}


def test_merge_culprit_is_descended_into():
    bad_set = {"s2", "s3", "m3", "m4"}
    outcome_of = lambda sha: RawResult(1 if sha in bad_set else 0)  # noqa: E731
    d, runs = drive(Problem(MERGE_GRAPH, "g", "m4", Settings(descend_merges=True)), outcome_of, workers=2)
    assert d.outcome.status is Status.FOUND
    assert d.outcome.culprit == "s2" and d.outcome.first_parent_culprit == "m3"
    flat, _ = drive(Problem(MERGE_GRAPH, "g", "m4"), outcome_of, workers=2)
    assert flat.outcome.culprit == "m3" and flat.outcome.first_parent_culprit == "m3"


def test_a_merges_search_starts_no_more_runs_than_the_runners_freed():
    runs = [Run("g", Kind.CALIBRATE, RawResult(0), 1), Run("m4", Kind.CALIBRATE, RawResult(1), 1)]
    runs += [Run("m3", Kind.SEARCH, RawResult(1), 2), Run("m2", Kind.SEARCH, RawResult(0), 2)]
    flying = [Probe("m1", Kind.SEARCH, 2), Probe("g", Kind.SEARCH, 2)]  # m2 passed: m1's run is obsolete
    problem = Problem(MERGE_GRAPH, "g", "m4", Settings(descend_merges=True, flake_rate=0.0))
    for free in (0, 1):
        d = decide(problem, State(Phase.SEARCHING), runs, flying, free)
        assert d.state.merges == ("m3",) and d.obsolete == (Probe("m1", Kind.SEARCH, 2),)
        assert len(d.probes) <= free + len(d.obsolete)  # the obsolete run's runner counted once (free 0: 2 runs before)


def test_merge_that_breaks_only_when_both_sides_meet_is_the_culprit():
    outcome_of = lambda sha: RawResult(1 if sha in {"m3", "m4"} else 0)  # noqa: E731
    d, _ = drive(Problem(MERGE_GRAPH, "g", "m4", Settings(descend_merges=True)), outcome_of, workers=2)
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "m3"


def test_runs_in_flight_that_results_have_settled_are_obsolete():
    graph, good, bad = linear_graph(100)
    calib = [Run(s, Kind.CALIBRATE, RawResult(0 if s == "c0" else 1), 1) for s in ("c0", "c0", "c100", "c100")]
    # c40 failed, so c60 (in flight) must fail too: its run can only waste a runner
    runs = calib + [Run("c40", Kind.SEARCH, RawResult(1), 2)]
    flying = [Probe("c60", Kind.SEARCH, 2), Probe("c20", Kind.SEARCH, 2)]
    d = decide(Problem(graph, good, bad), State(Phase.SEARCHING), runs, flying, 0)
    assert d.obsolete == (Probe("c60", Kind.SEARCH, 2),)
    assert len(d.probes) == 1 and 20 < int(d.probes[0].sha[1:]) < 40  # its runner is reused at once


def test_revert_is_made_then_proven_in_the_confirmation_round():
    graph, good, bad = linear_graph(30)
    problem = Problem(graph, good, bad, head=bad)
    outcome_of = lambda sha: RawResult(0 if sha == "REVERT" else exits(17)(sha).exit_code)  # noqa: E731
    state, runs = State(), []
    for _ in range(50):
        d = decide(problem, state, runs, (), 8)
        state = d.state
        if d.wants_revert:
            assert d.wants_revert == "c17" and state.phase is Phase.CONFIRMING and not d.probes
            state = replace(state, revert="REVERT")
            d = decide(problem, state, runs, (), 8)
            # the culprit once and head+revert once (a trusted test under auto: a PASS is proof), all in one round;
            # HEAD is BAD, whose runs on the bisect runner (all failing) stand for HEAD's side: only what they leave
            bad_runs = sum(r.sha == bad for r in runs)
            assert bad_runs >= 1
            assert sorted((p.sha, p.kind.value) for p in d.probes) == sorted(
                [("c17", "confirm"), ("REVERT", "ab_revert")] + [("c30", "ab_head")] * max(0, 2 - bad_runs)
            )
        if d.outcome:
            break
        runs += [Run(p.sha, p.kind, outcome_of(p.sha), p.round) for p in d.probes]
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c17"
    assert d.outcome.ab.passed and "revert is proven" in d.outcome.message
    assert "HEAD (BAD itself: " in d.outcome.message and len(d.outcome.ab.head_verdicts) == 2


def test_a_head_past_bad_runs_its_own_side_of_the_ab():
    graph, good, bad = linear_graph(25)
    problem = Problem(graph, good, bad, head="c30")  # five commits landed after BAD
    d, runs = drive(
        problem, lambda sha: RawResult(0 if sha == "REVERT" else exits(17)(sha).exit_code), revert=dict(revert="REVERT")
    )
    assert d.outcome.culprit == "c17" and d.outcome.ab.passed
    assert sum(r.kind is Kind.AB_HEAD for r in runs) == 2 and "BAD itself" not in d.outcome.message


def test_a_revert_that_does_not_fix_the_test_is_reported():
    graph, good, bad = linear_graph(10)
    outcome_of = lambda sha: RawResult(1) if sha == "REVERT" else exits(4)(sha)  # noqa: E731
    d, _ = drive(Problem(graph, good, bad, head=bad), outcome_of, revert=dict(revert="REVERT"))
    assert d.outcome.status is Status.FOUND and not d.outcome.ab.passed
    assert "NOT proven" in d.outcome.message


def test_revert_conflict_still_reports_the_culprit():
    graph, good, bad = linear_graph(10)
    d, _ = drive(Problem(graph, good, bad, head=bad), exits(4), revert=dict(revert_error="conflicts in a.py"))
    assert d.outcome.culprit == "c4" and d.outcome.ab is None and d.outcome.revert_error == "conflicts in a.py"


def test_a_revert_run_that_flakes_once_is_proven_by_a_fresh_round_not_refused():
    """HEAD fails every time, HEAD + revert passes but once: the confirmation and A/B round runs again."""
    graph, good, bad = linear_graph(10)
    seen = {"REVERT": 0}

    def outcome_of(sha):
        if sha == "REVERT":
            seen["REVERT"] += 1
            return RawResult(1 if seen["REVERT"] == 1 else 0)  # its first run flakes
        return exits(4)(sha)

    d, runs = drive(Problem(graph, good, bad, head=bad), outcome_of, revert=dict(revert="REVERT"))
    assert d.outcome.culprit == "c4" and d.outcome.ab.passed and "revert is proven" in d.outcome.message
    assert all(v is Verdict.GOOD for v in d.outcome.ab.revert_verdicts)  # the proof is the fresh round's
    assert sum(r.kind is Kind.AB_REVERT for r in runs) > 2 and d.state.confirmations == 1


def test_a_revert_that_keeps_flaking_is_not_proven():
    graph, good, bad = linear_graph(10)
    flip = {"n": 0}

    def outcome_of(sha):
        if sha == "REVERT":
            flip["n"] += 1
            return RawResult(flip["n"] % 2)  # fails every other run, in every round
        return exits(4)(sha)

    d, _ = drive(Problem(graph, good, bad, head=bad), outcome_of, revert=dict(revert="REVERT"))
    assert d.outcome.status is Status.FOUND and not d.outcome.ab.passed and "NOT proven" in d.outcome.message


def _ci_read(good: str, bad: str) -> list[Run]:
    """CI read GOOD green and BAD red (a reproduced nightly failure)."""
    return [Run(good, Kind.CI, RawResult(0)), Run(bad, Kind.CI, RawResult(1))]


def test_endpoints_taken_as_read_start_the_search_at_once():
    graph, good, bad = linear_graph(40)
    trusting = Problem(graph, good, bad, Settings(trust_endpoints=True))
    first = decide(trusting, State(), _ci_read(good, bad), (), 3)
    assert first.probes and {p.kind for p in first.probes} == {Kind.SEARCH}  # no endpoint run: all 3 search
    assert good not in {p.sha for p in first.probes} and bad not in {p.sha for p in first.probes}
    d, runs = drive_from(trusting, _ci_read(good, bad), exits(23), 3)
    ran = [r for r in runs if r.kind is not Kind.CI]
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c23"
    assert not any(r.kind is Kind.CALIBRATE for r in ran) and not any(r.sha in (good, bad) for r in ran)
    plain, plain_runs = drive_from(Problem(graph, good, bad), _ci_read(good, bad), exits(23), 3)
    assert plain.outcome.culprit == "c23" and sum(r.kind is Kind.CALIBRATE for r in plain_runs) == 2
    # the CLI's --trust-endpoints with no reading at all: the user's word stands the same way
    d, runs = drive_from(trusting, [], exits(23), 1)
    assert d.outcome.culprit == "c23" and not any(r.sha in (good, bad) for r in runs)


def test_an_endpoint_taken_as_read_runs_when_the_search_contradicts_it():
    graph, good, bad = linear_graph(16)
    trusting = Problem(graph, good, bad, Settings(trust_endpoints=True))
    # everything passes: the culprit would be BAD itself, whose FAIL the bisect runner must show
    d, runs = drive_from(trusting, _ci_read(good, bad), exits(16), 2)
    assert d.outcome.culprit == "c16" and any(r.sha == bad and r.kind is not Kind.CI for r in runs)
    # GOOD's neighbour fails: GOOD's PASS is run before c1 is named
    d, runs = drive_from(trusting, _ci_read(good, bad), exits(1), 2)
    assert d.outcome.culprit == "c1" and any(r.sha == good and r.kind is not Kind.CI for r in runs)
    # BAD does not fail on the runner after all (CI's red was not this machine's): never a culprit named
    d, runs = drive_from(trusting, _ci_read(good, bad), lambda sha: RawResult(0), 2)
    assert d.outcome.culprit is None and d.outcome.status is not Status.FOUND
    assert any(r.sha == bad and r.kind is not Kind.CI for r in runs)
    # CI read GOOD red: nothing is taken as read, the endpoints are calibrated as before
    d, runs = drive_from(trusting, [Run(good, Kind.CI, RawResult(1)), Run(bad, Kind.CI, RawResult(1))], exits(9), 2)
    assert d.outcome.culprit == "c9" and any(r.kind is Kind.CALIBRATE and r.sha == good for r in runs)


def test_an_endpoint_taken_as_read_that_says_the_opposite_when_run_ends_as_a_calibrated_one_would():
    """GOOD taken as read (the CLI's default) or both (--trust-endpoints): GOOD fails when the search runs it, or BAD
    passes: calibrated like any surprising endpoint, the bisection ends good_fails / not_reproducible, never
    "no single culprit explains the results"."""
    graph, good, bad = linear_graph(10)
    for given_settings in (Settings(good_as_read=True), Settings(trust_endpoints=True)):
        d, runs = drive(Problem(graph, good, bad, given_settings), lambda sha: RawResult(1), 2)
        assert d.outcome.status is Status.GOOD_FAILS, (given_settings, d.outcome)
        assert sum(r.sha == good for r in runs) == 2 and all(r.kind is Kind.CALIBRATE for r in runs if r.sha == good)
        d, runs = drive(Problem(graph, good, bad, given_settings), lambda sha: RawResult(0), 2)
        assert d.outcome.status is Status.NOT_REPRODUCIBLE, d.outcome
        assert sum(r.sha == bad for r in runs) == given_settings.reproduce_runs == 4
    # GOOD as read: BAD alone is run first, and GOOD only once the search points at its child
    d, runs = drive(Problem(graph, good, bad, Settings(good_as_read=True)), exits(6), 1)
    assert d.outcome.culprit == "c6" and runs[0].sha == bad and good not in {r.sha for r in runs}
    d, runs = drive(Problem(graph, good, bad, Settings(good_as_read=True)), exits(1), 1)
    assert d.outcome.culprit == "c1" and [r.kind for r in runs if r.sha == good] == [Kind.CALIBRATE]


def drive_from(problem, given, outcome_of, workers):
    """`drive` from runs already recorded (CI's readings)."""
    return drive(problem, outcome_of, workers, given=given)


def _ab_runs(runs):
    return [(r.sha, r.kind) for r in runs if r.kind in (Kind.AB_HEAD, Kind.AB_REVERT)]


def test_a_reproduced_red_bad_stands_for_head_beside_one_run_of_head_on_the_runner():
    """The nightly path: CI read BAD red and reproduced it (endpoints taken as read), HEAD is BAD. Neither endpoint
    runs, so nothing of the bisect runner's stands for HEAD: CI's red reading of BAD stands for all but one of HEAD's
    runs, and HEAD's failure is reproduced on the bisect runner once before HEAD + revert's one PASS (proof for a test
    trusted to be deterministic) proves anything. (Until issue 30 CI's reading stood for all of HEAD's side.)"""
    graph, good, bad = linear_graph(40)
    fixed = lambda sha: RawResult(0 if sha == "REVERT" else exits(23)(sha).exit_code)  # noqa: E731
    trusting = Problem(graph, good, bad, Settings(trust_endpoints=True), head=bad)
    d, runs = drive(trusting, fixed, 1, revert=dict(revert="REVERT"), given=_ci_read(good, bad))
    assert d.outcome.culprit == "c23" and d.outcome.ab.passed, d.outcome
    assert sorted(_ab_runs(runs)) == [("REVERT", Kind.AB_REVERT), (bad, Kind.AB_HEAD)]
    assert d.outcome.ab.head_verdicts == (Verdict.BAD, Verdict.BAD)
    assert "read red by CI and reproduced there: 1 of them CI's" in d.outcome.ab.head_from
    assert "1 of them CI's) fails, HEAD + revert passes" in d.outcome.message
    # the same incident with the endpoints calibrated: HEAD's side comes from BAD's own run, the revert still once
    plain, plain_runs = drive(
        Problem(graph, good, bad, head=bad), fixed, 1, revert=dict(revert="REVERT"), given=_ci_read(good, bad)
    )
    assert plain.outcome.ab.passed and _ab_runs(plain_runs).count(("c40", Kind.AB_HEAD)) == 1
    assert len([r for r in runs if r.kind is not Kind.CI]) < len([r for r in plain_runs if r.kind is not Kind.CI])


def test_only_readings_stand_for_head():
    """The CLI's --trust-endpoints is the user's word, not a reading: HEAD's side runs as before. HEAD past BAD
    (commits landed since) runs too, whatever CI read of BAD."""
    graph, good, bad = linear_graph(40)
    fixed = lambda sha: RawResult(0 if sha == "REVERT" else exits(23)(sha).exit_code)  # noqa: E731
    trusting = Problem(graph, good, bad, Settings(trust_endpoints=True), head=bad)
    d, runs = drive(trusting, fixed, 1, revert=dict(revert="REVERT"))
    assert d.outcome.ab.passed and _ab_runs(runs).count((bad, Kind.AB_HEAD)) == 2 and not d.outcome.ab.head_from
    graph, good, bad = linear_graph(30)
    later = Problem(graph, good, "c25", Settings(trust_endpoints=True), head=bad)
    d, runs = drive(later, fixed, 1, revert=dict(revert="REVERT"), given=_ci_read(good, "c25"))
    assert d.outcome.ab.passed and _ab_runs(runs).count((bad, Kind.AB_HEAD)) == 2


def test_a_trusted_revert_that_fails_its_one_run_runs_x_times():
    """HEAD + revert's one run fails: doubt, so it runs x times in all. A flake (a pass then) re-runs the round; a
    revert that keeps failing is reported not proven."""
    graph, good, bad = linear_graph(40)
    base = exits(23)
    flaky_once = iter([1])
    once = lambda sha: RawResult(next(flaky_once, 0)) if sha == "REVERT" else base(sha)  # noqa: E731
    problem = Problem(graph, good, bad, Settings(trust_endpoints=True), head=bad)
    d, runs = drive(problem, once, 1, revert=dict(revert="REVERT"), given=_ci_read(good, bad))
    assert d.outcome.culprit == "c23" and d.outcome.ab.passed, d.outcome
    assert _ab_runs(runs).count(("REVERT", Kind.AB_REVERT)) >= 3  # 1 failed, 1 more passed: the round again
    never = lambda sha: RawResult(1) if sha == "REVERT" else base(sha)  # noqa: E731
    d, runs = drive(problem, never, 1, revert=dict(revert="REVERT"), given=_ci_read(good, bad))
    assert d.outcome.culprit == "c23" and not d.outcome.ab.passed
    assert _ab_runs(runs).count(("REVERT", Kind.AB_REVERT)) == 2 and "NOT proven" in d.outcome.message


def test_endpoints_taken_as_read_are_calibrated_once_a_run_cannot_be_set_up():
    """No commit can be set up on the runner (a broken environment): the endpoints answer whether it can run the
    test at all, and the bisection ends untestable at them, not after a search through every commit."""
    graph, good, bad = linear_graph(40)
    trusting = Problem(graph, good, bad, Settings(trust_endpoints=True))
    broken = lambda sha: RawResult(None, None, "the environment cannot be set up")  # noqa: E731
    d, runs = drive_from(trusting, _ci_read(good, bad), broken, 3)
    assert d.outcome.status is Status.UNTESTABLE and d.outcome.facts["sha"] in (good, bad), d.outcome
    ran = [r for r in runs if r.kind is not Kind.CI]
    plain, plain_runs = drive_from(Problem(graph, good, bad), _ci_read(good, bad), broken, 3)
    assert plain.outcome.status is Status.UNTESTABLE
    assert len(ran) <= len([r for r in plain_runs if r.kind is not Kind.CI]) + 3  # one first round of search at most
