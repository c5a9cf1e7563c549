"""The sandbox's rate limit and conditional requests, as GitHub's docs describe them, and the bot's Actions
adapter using them (a run polled while nothing changes costs nothing against the budget)."""

from __future__ import annotations

import time

import pytest
from github import Auth, Github, GithubException

from bot.adapters.github.actions import GitHubActions
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build


@pytest.fixture
def world(tmp_path):
    scenario = build(tmp_path / "scenario", commits=8, seed=1)
    state = SandboxState(tmp_path / "github")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    base, stop = run_in_thread(state)
    state.actions.base_url = base
    gh = Github(
        base_url=base,
        auth=Auth.Token(seeded.tokens[seeded.maintainer]),
        seconds_between_requests=0,
        seconds_between_writes=0,
        retry=None,
    )
    try:
        yield dict(state=state, seeded=seeded, scenario=scenario, gh=gh, base=base)
    finally:
        state.actions.shutdown()
        stop()


def test_an_unchanged_resource_answers_304_which_costs_nothing(world):
    state, gh = world["state"], world["gh"]
    issue = gh.get_repo(world["seeded"].repo).get_issue(world["scenario"].culprit_pr)
    comment = issue.get_comment(issue.create_comment("first").id)
    used = gh.rate_limiting[0]
    assert comment.etag
    assert comment.update() is False  # If-None-Match: 304
    assert gh.rate_limiting[0] == used
    budget = state.rates.budgets[world["seeded"].maintainer]
    assert budget.not_modified == 1 and state.rates.statuses[304] == 1
    comment.edit("changed")
    assert comment.update() is True and comment.body == "changed"  # a new ETag: 200, counted
    assert gh.rate_limiting[0] == used - 2


def test_a_spent_budget_answers_403_until_the_reset(world):
    state, gh = world["state"], world["gh"]
    state.rates.limit = 3
    repo = gh.get_repo(world["seeded"].repo)
    repo.get_commit("main")
    repo.get_commit("main")  # the third request
    with pytest.raises(GithubException) as refused:
        repo.get_commit("main")
    assert refused.value.status == 403 and "API rate limit exceeded" in refused.value.data["message"]
    assert refused.value.headers["x-ratelimit-remaining"] == "0"
    budget = state.rates.budgets[world["seeded"].maintainer]
    state.rates.clock = lambda: budget.reset  # an hour later
    assert repo.get_commit("main").sha == world["scenario"].bad


def test_a_run_polled_while_it_does_not_change_answers_304(world, tmp_path):
    state, gh, slug = world["state"], world["gh"], world["seeded"].repo
    state.bind_workflow(slug, "sleep.yml", ["sh", "-c", "echo started; exec sleep 120"])
    actions = GitHubActions(gh.get_repo(slug), "sleep.yml")
    run_id = actions.dispatch("main", {})
    assert run_id
    for _ in range(200):
        if actions.state(run_id).status == "in_progress":
            break
        state.actions.wait(run_id, 0.05)
    before = state.rates.statuses[304]
    polled = [actions.state(run_id) for _ in range(5)]
    assert {p.status for p in polled} == {"in_progress"}
    assert state.rates.statuses[304] - before == 5  # neither the run nor its jobs were fetched again
    assert actions.cancel(run_id)
    done = state.actions.wait(run_id, 30)
    assert done.conclusion == "cancelled"
    assert actions.state(run_id).conclusion == "cancelled"  # a changed run: read again


def test_a_status_comment_edited_again_and_again_lists_the_thread_once(world):
    from bot.adapters.github.forge import GitHubForge

    state, slug = world["state"], world["seeded"].repo
    forge = GitHubForge(world["gh"], slug)
    thread = world["scenario"].culprit_pr
    lists = lambda: state.rates.calls[("GET", f"/repos/{slug}/issues/{thread}/comments")]  # noqa: E731
    first, created = forge.comment_once(thread, "status-1", "round 1")
    assert created and lists() == 1
    for n in range(2, 7):
        assert forge.comment_once(thread, "status-1", f"round {n}") == (first, False)
    assert forge.comment_once(thread, "status-1", "round 6") == (first, False)  # unchanged: no request at all
    assert lists() == 1 and state.rates.calls[("PATCH", f"/repos/{slug}/issues/comments/{first}")] == 5
    bodies = [c.body for c in world["gh"].get_repo(slug).get_issue(thread).get_comments() if "status-1" in c.body]
    assert len(bodies) == 1 and bodies[0].endswith("round 6")
    state.comments.pop(first)  # a maintainer deleted it: found missing, posted again
    again, created = forge.comment_once(thread, "status-1", "round 7")
    assert created and again != first


def test_search_has_its_own_budget_of_30_a_minute(world):
    state, gh = world["state"], world["gh"]
    repo = world["seeded"].repo
    counts = [gh.search_issues(f"repo:{repo} is:issue").totalCount for _ in range(30)]
    assert len(set(counts)) == 1 and counts[0] > 0
    with pytest.raises(GithubException) as refused:
        _ = gh.search_issues(f"repo:{repo} is:issue").totalCount
    assert refused.value.status == 403 and "API rate limit exceeded" in refused.value.data["message"]
    headers = refused.value.headers
    assert (headers["x-ratelimit-resource"], headers["x-ratelimit-remaining"], headers["x-ratelimit-limit"]) == (
        "search",
        "0",
        "30",
    )
    assert gh.get_repo(repo).get_commit("main").sha == world["scenario"].bad  # the core budget is untouched
    budget = state.rates.budgets[f"search:{world['seeded'].maintainer}"]
    state.rates.clock = lambda: budget.reset  # a minute later
    assert gh.search_issues(f"repo:{repo} is:issue").totalCount >= 0


def test_search_lags_behind_writes_while_listing_shows_them_at_once(world):
    state, gh = world["state"], world["gh"]
    repo = gh.get_repo(world["seeded"].repo)
    now = [state.search.clock()]
    state.search.clock = lambda: now[0]
    made = repo.create_issue(title="Stop the bot", body="maintenance window", labels=["stop-bot"])
    query = f'repo:{repo.full_name} is:issue is:open label:"stop-bot"'
    assert [i.number for i in gh.search_issues(query)] == []  # just written: not in the index yet
    assert [i.number for i in repo.get_issues(state="open", labels=["stop-bot"])] == [made.number]
    now[0] += state.search.lag_s + 1
    assert [i.number for i in gh.search_issues(query)] == [made.number]
    made.add_to_labels("urgent")  # a write: search keeps the copy it had until the lag passes again
    now[0] = time.time()
    both = f"{query} label:urgent"
    assert [i.number for i in gh.search_issues(both)] == []
    assert [i.number for i in gh.search_issues(query)] == [made.number]
    assert [i.number for i in repo.get_issues(state="open", labels=["stop-bot", "urgent"])] == [made.number]
    now[0] += state.search.lag_s + 1
    assert [i.number for i in gh.search_issues(both)] == [made.number]
