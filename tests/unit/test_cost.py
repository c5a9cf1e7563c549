"""What a bisection cost on its runners, beside git bisect run's on the same range (bot.domain.cost)."""

from bot.domain.cost import cost_of, git_bisect_runs


def test_git_bisect_halves_the_range_until_one_commit_is_left():
    assert [git_bisect_runs(n) for n in (1, 2, 3, 4, 5, 64, 65, 240)] == [0, 1, 2, 2, 3, 6, 7, 8]


def test_the_cost_counts_cancelled_runs_and_states_gpu_hours_beside_git():
    # 10 finished runs of 15 minutes and 2 cancelled after 5 minutes each, on 4-GPU runners, 64 commits
    cost = cost_of([900.0] * 10, [300.0, 300.0], gpus=4, commits=64)
    assert (cost.runs, cost.cancelled, cost.cancelled_s, cost.runner_s) == (10, 2, 600.0, 9600.0)
    assert (cost.git_runs, cost.git_runner_s) == (6, 6 * 900)  # 9600 s x 4 GPUs = 10.7 GPU-hours; git's 6.0
    assert cost.describe() == (
        "10 runs, 10.7 GPU-hours on 4-GPU runners, 2 cancelled runs included; "
        "`git bisect run` on the same range: ~6 runs, 6.0 GPU-hours, verifying nothing"
    )
    # a CLI command: no GPU count, runner-hours
    assert cost_of([600.0] * 3, [], gpus=0, commits=8).describe() == (
        "3 runs, 0.5 runner-hours; `git bisect run` on the same range: ~3 runs, 0.5 runner-hours, verifying nothing"
    )


def test_runs_of_seconds_are_stated_in_minutes_on_both_sides():
    # a demo's or a quick test's runs: "0.0 hours" says nothing; both sides in one unit to compare them
    quick = cost_of([20.0] * 7, [], gpus=0, commits=59)
    assert quick.describe() == (
        "7 runs, 2.3 runner-minutes; `git bisect run` on the same range: ~6 runs, 2.0 runner-minutes, verifying nothing"
    )
    # the unit follows the larger side: our runs in minutes would hide git's hours
    assert cost_of([60.0], [], gpus=4, commits=64).held() == "0.1 GPU-hours on 4-GPU runners"
