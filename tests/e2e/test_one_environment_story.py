"""Issue 30's acceptance on the nightly path itself: a red scheduled run's signed `workflow_run` webhook is all the
bot gets (as in test_github_story's nightly story), and the bisect runner -- the sandbox's self-hosted runner --
errors at every commit with an error CI's log never showed. The bot reverts nothing and ends with an infra outcome
naming the runner (bot.domain.bisect.ci_failure), through the real service, store, GitHub API and step workflow."""

from __future__ import annotations

import json

import sqlalchemy

from bot.cli.demo_ci import accuracy_word
from tests.support.sandbox import wait_for
from tests.support.world import SECRET, comments, open_reverts

NIGHTLY = ".github/workflows/nightly-test.yml"


def test_on_the_nightly_path_a_runner_that_errors_at_every_commit_reverts_nothing_and_names_the_runner(
    world, monkeypatch
):
    scenario, state, repo = world["scenario"], world["state"], world["seeded"].repo
    green = state.start_run(repo, NIGHTLY, scenario.good, event="schedule", branch_of_sha="main")
    assert accuracy_word(state.actions.wait(green, 120)).startswith("passed")
    red = state.start_run(repo, NIGHTLY, "main", event="schedule")
    red_run = state.actions.wait(red, 120)
    assert red_run.conclusion == "failure" and accuracy_word(red_run).startswith("failed")  # the KL check's metric
    # From now on the runner's environment is not CI's: every run of the test there raises before its check (a
    # ValueError where an OOM or a missing model file would be) -- an error CI's log never showed, at every commit.
    monkeypatch.setenv("MINI_SGLANG_TEST_MAX_RETRY", "unset")
    state.add_hook(world["bot"] + "/webhooks/github", SECRET)
    state.actions.deliver(repo, "workflow_run", state.actions.event_payload(red_run, "completed"))  # the red run's

    def ended():
        with world["watch"].engine.connect() as conn:
            rows = conn.execute(sqlalchemy.text("SELECT id, status, outcome FROM bisections")).all()
        return rows if rows and all(status is not None for _, status, _ in rows) else None

    ((bisection, status, outcome),) = wait_for(ended, timeout=420, bot=world["watch"], expect=("untestable",))
    outcome = json.loads(outcome) if isinstance(outcome, str) else outcome
    assert status == "untestable" and outcome.get("reason") == "runner_error", outcome
    runner = outcome["facts"]["runner"]
    assert runner and f"runner {runner}" in outcome["message"] and "ValueError" in outcome["message"], outcome
    assert outcome.get("culprit") is None and outcome.get("ab") is None, outcome
    with world["watch"].engine.connect() as conn:
        steps = conn.execute(
            sqlalchemy.text("SELECT kind, state, verdict, runner, infra_reason FROM steps WHERE bisection_id = :b"),
            {"b": bisection},
        ).all()
    ran = [s for s in steps if s.kind != "ci" and s.state == "done"]
    assert ran and all(s.verdict == "infra" and f"runner {s.runner}: " in (s.infra_reason or "") for s in ran), steps
    assert not [s for s in steps if s.kind in ("ab_head", "ab_revert")]
    assert not open_reverts(world)
    assert not [c for c in comments(world, scenario.culprit_pr) if "revert" in c["body"].lower()]
