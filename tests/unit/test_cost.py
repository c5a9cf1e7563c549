"""What a bisection cost on its runners, beside git bisect run's on the same range (bot.domain.cost)."""

from bot.domain.bisect.simulate import linear_graph
from bot.domain.cost import cost_of, git_bisect_runs, git_range


def test_git_bisect_halves_the_range_until_one_commit_is_left():
    assert [git_bisect_runs(n) for n in (1, 2, 3, 4, 5, 64, 65, 240)] == [0, 1, 2, 2, 3, 6, 7, 8]


def test_the_cost_counts_cancelled_runs_and_states_gpu_hours_beside_git():
    # 10 finished runs of 15 minutes and 2 cancelled after 5 minutes each, on 4-GPU runners, 64 commits
    cost = cost_of([900.0] * 10, [300.0, 300.0], gpus=4, ranges=[64])
    assert (cost.runs, cost.cancelled, cost.cancelled_s, cost.runner_s) == (10, 2, 600.0, 9600.0)
    assert (cost.git_runs, cost.git_runner_s) == (6, 6 * 900)  # 9600 s x 4 GPUs = 10.7 GPU-hours; git's 6.0
    assert cost.describe() == (
        "10 runs, 10.7 GPU-hours on 4-GPU runners, 2 cancelled runs included; "
        "`git bisect run` on the same range: ~6 runs, 6.0 GPU-hours, verifying nothing"
    )
    # a CLI command: no GPU count, runner-hours
    assert cost_of([600.0] * 3, [], gpus=0, ranges=[8]).describe() == (
        "3 runs, 0.5 runner-hours; `git bisect run` on the same range: ~3 runs, 0.5 runner-hours, verifying nothing"
    )


def test_runs_of_seconds_are_stated_in_minutes_on_both_sides():
    # a demo's or a quick test's runs: "0.0 hours" says nothing; both sides in one unit to compare them
    quick = cost_of([20.0] * 7, [], gpus=0, ranges=[59])
    assert quick.describe() == (
        "7 runs, 2.3 runner-minutes; `git bisect run` on the same range: ~6 runs, 2.0 runner-minutes, verifying nothing"
    )
    # the unit follows the larger side: our runs in minutes would hide git's hours
    assert cost_of([60.0], [], gpus=4, ranges=[64]).held() == "0.1 GPU-hours on 4-GPU runners"


def test_git_is_given_the_tests_own_range_as_ci_left_it():
    # c0 (the union's GOOD) .. c30 (BAD): the range a person starts from is the test's own last pass to BAD
    graph, good, bad = linear_graph(30)
    assert git_range(graph, good, bad) == 30
    assert git_range(graph, "c18", bad) == 12  # a group's member passed at c18: its own GOOD
    # CI read it passing at c22 and failing at c26 (and at BAD): git starts from c22..c26, as `git bisect good c22`
    # and `git bisect bad c26` would
    assert git_range(graph, "c18", bad, passed=["c22"], failed=["c26", bad]) == 4
    assert git_range(graph, good, bad, passed=["c99"], failed=["x"]) == 30  # readings outside the range: ignored
    # a merge: `git bisect start M G` bisects the side branch's commits too (git rev-list G..M)
    merged = {"m": ("c2", "s1"), "s1": ("c1",), "c2": ("c1",), "c1": ("g",)}
    assert git_range(merged, "g", "m") == 4 and git_range(merged, "g", "m", passed=["c2"]) == 2


def test_a_group_costs_git_one_bisection_per_red_test_on_its_own_range():
    # three red tests: 4, 12 and 30 commits from their own last passes -> 2 + 4 + 5 halvings
    cost = cost_of([600.0] * 20, [], gpus=4, ranges=[4, 12, 30])
    assert (cost.git_runs, cost.git_ranges) == (11, (4, 12, 30))
    assert cost.versus_git() == (
        "`git bisect run` once per red test, each on its own range (3 tests, 4 to 30 commits): ~11 runs, "
        "7.3 GPU-hours, verifying nothing"
    )
    same = cost_of([600.0] * 20, [], gpus=4, ranges=[24, 24])
    assert "each on its own range (2 tests, 24 commits): ~10 runs" in same.versus_git()
