import math
import random
from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from bot.bisect.engine import decide
from bot.bisect.model import Kind, Phase, Probe, Problem, Run, Settings, State, Status
from bot.bisect.simulate import FlakyTest, git_bisect, linear_graph, simulate
from bot.bisect.verdict import MetricRule, RawResult, Verdict


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
    assert result.rounds[Kind.SEARCH] <= bound(n, k)
    assert result.rounds[Kind.CALIBRATE] == math.ceil(4 / k)
    assert result.rounds[Kind.CONFIRM] == math.ceil(4 / k)  # culprit and parent, twice each


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


def drive(problem, outcome_of, workers=4, state=State(), revert=None):
    """Synchronous rounds against a results function; returns (decision, runs).

    `revert` holds the State fields the caller sets when the engine asks for a revert."""
    runs = []
    for _ in range(500):
        d = decide(problem, state, runs, (), workers)
        state = replace(d.state, **revert) if d.wants_revert else d.state
        if d.outcome:
            return d, runs
        runs += [Run(p.sha, p.kind, outcome_of(p.sha), p.round) for p in d.probes]
    raise AssertionError("did not finish")


def exits(bad_from: int, special: dict[int, int] = {}):
    return lambda sha: RawResult(special.get(int(sha[1:]), 1 if int(sha[1:]) >= bad_from else 0))


def test_not_reproducible_when_bad_passes():
    graph, good, bad = linear_graph(16)
    d, runs = drive(Problem(graph, good, bad), exits(99))
    assert d.outcome.status is Status.NOT_REPRODUCIBLE and "passes on BAD" in d.outcome.message
    assert all(r.kind is Kind.CALIBRATE for r in runs)


def test_good_fails():
    graph, good, bad = linear_graph(16)
    d, _ = drive(Problem(graph, good, bad), exits(0))
    assert d.outcome.status is Status.GOOD_FAILS and "older --good" in d.outcome.message


def test_untestable_endpoint():
    graph, good, bad = linear_graph(16)
    d, _ = drive(Problem(graph, good, bad), exits(5, {16: 125}))
    assert d.outcome.status is Status.UNTESTABLE and "BAD" in d.outcome.message


def test_skipped_commits_bordering_the_answer_are_reported_as_ambiguous():
    graph, good, bad = linear_graph(32)
    d, _ = drive(Problem(graph, good, bad), exits(12, {10: 125, 11: 125}))
    assert d.outcome.status is Status.AMBIGUOUS
    assert d.outcome.candidates == ("c10", "c11", "c12")


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
    calls = {"n": 0}

    def contradict(sha):
        calls["n"] += 1
        return RawResult(1 if sha == "c0" and calls["n"] == 1 else exits(8)(sha).exit_code)

    d, _ = drive(Problem(graph, good, bad, Settings(flake_rate=0.0)), contradict)
    assert d.outcome.status is Status.INCONCLUSIVE and "--flake-rate auto" in d.outcome.message


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
    d, _ = drive(Problem(graph, good, bad, Settings(metric=rule)), lambda sha: RawResult(0, 0.0015 if sha == "c8" else 0.0003))
    assert d.outcome.status is Status.NOT_REPRODUCIBLE and "within the threshold" in d.outcome.message


def test_calibration_runs_endpoints_twice_each_in_parallel():
    graph, good, bad = linear_graph(10)
    d = decide(Problem(graph, good, bad), State(), [], (), 4)
    assert sorted(p.sha for p in d.probes) == ["c0", "c0", "c10", "c10"]
    assert {p.kind for p in d.probes} == {Kind.CALIBRATE}


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
    "m1": ("g",), "m2": ("m1",), "s1": ("m1",), "s2": ("s1",), "s3": ("s2",), "m3": ("m2", "s3"), "m4": ("m3",),
}


def test_merge_culprit_is_descended_into():
    bad_set = {"s2", "s3", "m3", "m4"}
    outcome_of = lambda sha: RawResult(1 if sha in bad_set else 0)  # noqa: E731
    d, runs = drive(Problem(MERGE_GRAPH, "g", "m4", Settings(descend_merges=True)), outcome_of, workers=2)
    assert d.outcome.status is Status.FOUND
    assert d.outcome.culprit == "s2" and d.outcome.first_parent_culprit == "m3"
    flat, _ = drive(Problem(MERGE_GRAPH, "g", "m4"), outcome_of, workers=2)
    assert flat.outcome.culprit == "m3" and flat.outcome.first_parent_culprit == "m3"


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
            # culprit, parent, head and head+revert, x=2 each, all in one round
            assert sorted((p.sha, p.kind.value) for p in d.probes) == sorted(
                [("c17", "confirm"), ("c16", "confirm"), ("c30", "ab_head"), ("REVERT", "ab_revert")] * 2)
        if d.outcome:
            break
        runs += [Run(p.sha, p.kind, outcome_of(p.sha), p.round) for p in d.probes]
    assert d.outcome.status is Status.FOUND and d.outcome.culprit == "c17"
    assert d.outcome.ab.passed and "revert is proven" in d.outcome.message


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
