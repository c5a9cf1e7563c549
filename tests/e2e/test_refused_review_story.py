"""The `/revert-bisect` story when the culprit's author is an outside contributor: GitHub refuses to request their
review (422, "Reviews may only be requested from collaborators"); the bot skips them, says so in the status
comment, and publishes the rest: the revert PR, the comment on the culprit PR and the follow-up link."""

from __future__ import annotations

from tests.support.sandbox import wait_for
from tests.support.world import command_near_the_culprit, comments, deliver_comment, open_reverts


def test_an_outside_contributors_culprit_is_reverted_without_their_review_request(world):
    scenario, state, repo = world["scenario"], world["state"], world["seeded"].repo
    culprit_pr, followup = scenario.culprit_pr, scenario.followup["number"]
    author = next(p["author"] for p in scenario.prs if p["number"] == culprit_pr)
    with state.lock:
        state.repo(repo).permissions.pop(author, None)  # an outside contributor: no role on the repository
    deliver_comment(world, "sandbox-maintainer", command_near_the_culprit(scenario), followup)

    status = wait_for(
        lambda: [c for c in comments(world, followup) if "**revert-bisect**" in c["body"] and "Revert PR" in c["body"]],
        timeout=300,
        bot=world["watch"],
    )
    pulls = open_reverts(world)
    assert len(pulls) == 1 and pulls[0]["requested_reviewers"] == []  # nobody GitHub would refuse
    body = status[0]["body"]
    assert f"Revert PR: #{pulls[0]['number']}" in body
    assert f"review not requested from {author}: Reviews may only be requested from collaborators" in body
    culprit_comments = [c["body"] for c in comments(world, culprit_pr) if f"opened #{pulls[0]['number']}" in c["body"]]
    assert len(culprit_comments) == 1  # publishing went on past the refused review request
    assert any(f"#{culprit_pr}" in c["body"] and "reverts" in c["body"] for c in comments(world, followup))
