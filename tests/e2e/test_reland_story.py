"""After the revert: the bot's revert PR is merged in the sandbox (GitHub's squash merge, a `pull_request` `closed`
webhook with `merged: true`), the culprit PR is told how to re-land it; someone else reverts a commit of the bisected
range the bot never named, and /trust counts it as a miss: recall as PyTorch measures it."""

from __future__ import annotations

import subprocess

import httpx
import sqlalchemy

from bot.adapters.git.clones import GIT_CLONES
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.store.store import Store
from bot.ports.store import ClaimedJob
from bot.service.reland import RevertMerged
from tests.support.sandbox import wait_for
from tests.support.world import SECRET, comments, deliver_comment, gh, open_reverts


def _git(*args: str, cwd=None) -> str:
    return subprocess.run(["git", *args], cwd=cwd, check=True, capture_output=True, text=True).stdout.strip()


def test_a_merged_revert_says_how_to_reland_and_a_human_revert_the_bot_never_named_is_a_miss(world):
    scenario, repo, state = world["scenario"], world["seeded"].repo, world["state"]
    followup, culprit_pr = scenario.followup["number"], scenario.culprit_pr
    deliver_comment(world, "sandbox-maintainer", f"/revert-bisect decode-cache-hit good={scenario.good[:12]}", followup)
    (pr,) = wait_for(lambda: open_reverts(world), bot=world["watch"])
    body = pr["body"]
    print(body)  # the side-by-side with SGLang's #31622 in the report is made from this
    case = body.split("## Why this revert")[1].split("## Motivation")[0]
    assert "AssertionError: avg_kl_div=" in case and "> threshold=0.002" in case  # the failing check, as printed
    assert f"log at `{scenario.culprit[:12]}` (the culprit) printed it" in case
    assert "identical on every retry" in case or "reading from" in case
    assert f"`{scenario.good[:12]}` (the last good)" in case and "**Why this commit**" in case
    assert f"the proper fix is being worked on in #{followup}" in case
    status = wait_for(
        lambda: [c for c in comments(world, followup) if "**revert-bisect**" in c["body"] and "searched" in c["body"]]
    )
    assert f"follow-up: #{followup}" in status[0]["body"] and "the culprit PR" in status[0]["body"]  # what was searched

    # a maintainer merges the revert as SGLang does (squash); GitHub sends `pull_request` `closed`, merged
    state.add_hook(world["bot"] + "/webhooks/github", SECRET, events=("pull_request",), repo=repo)
    merged = gh(world, "PUT", f"/repos/{repo}/pulls/{pr['number']}/merge", json={"merge_method": "squash"})
    assert merged.status_code == 200 and merged.json()["merged"] is True
    assert gh(world, "PUT", f"/repos/{repo}/pulls/{pr['number']}/merge", json={}).status_code == 405  # once
    delivery = wait_for(lambda: [d for d in state.hook_deliveries if d["event"] == "pull_request"])[0]
    payload = delivery["payload"]
    assert (payload["action"], payload["pull_request"]["merged"]) == ("closed", True)
    assert payload["pull_request"]["merge_commit_sha"] == merged.json()["sha"]

    # the bot routes that delivery to its job `revert_merged` (bot.ingress.webhooks.routes, bot.wiring)
    wait_for(lambda: [c for c in comments(world, culprit_pr) if "To re-land it" in c["body"]], bot=world["watch"])
    # a redelivery of it, run on the bot's own store, says nothing twice
    engine = sqlalchemy.create_engine(f"sqlite:///{world['tmp'] / 'bot.db'}")
    forge = GitHubForge(connect(world["base"], world["seeded"].tokens["revert-bisect-bot"], throttle=False), repo)
    job = RevertMerged(Store(engine), lambda slug: forge)
    job(ClaimedJob(2, "revert_merged", delivery["guid"], "pull_request", payload, 2))
    said = [c for c in comments(world, culprit_pr) if "To re-land it" in c["body"]]
    assert len(said) == 1
    text = said[0]["body"]
    assert f"#{pr['number']}, was merged on `main` as `{merged.json()['sha'][:12]}`" in text
    assert f"`git revert {merged.json()['sha'][:12]}`, then the fix on top" in text
    assert f"The proper fix is being worked on in #{followup}" in text
    assert job.revert_merged(repo, followup, None, "main") is None  # not a revert of the bot's: nothing said

    # someone else reverts a commit of the bisected range that the bot never named
    range_files = {p["sha"]: set(p["files"]) for p in scenario.prs}
    later = lambda i: set().union(*(range_files[s] for s in scenario.shas[i + 1 :]))  # noqa: E731
    index = max(
        i
        for i in range(1, len(scenario.shas))
        if scenario.shas[i] != scenario.culprit
        and range_files[scenario.shas[i]]
        and not range_files[scenario.shas[i]] & later(i)
    )
    missed = scenario.shas[index]
    work = world["tmp"] / "human"
    token = world["seeded"].tokens["sandbox-maintainer"]
    auth = f"http.extraHeader=Authorization: Bearer {token}"
    _git("-c", auth, "clone", "-q", f"{world['base']}/{repo}.git", str(work))
    ident = ("-c", "user.name=Maintainer", "-c", "user.email=m@sandbox.invalid")
    _git(*ident, "revert", "--no-edit", missed, cwd=work)
    _git("-c", auth, "push", "-q", "origin", "HEAD:main", cwd=work)

    clone = world["tmp"] / "clones" / repo.replace("/", "__")
    GIT_CLONES.sync(f"{world['base']}/{repo}.git", clone, world["seeded"].tokens["revert-bisect-bot"])
    trust = httpx.get(world["bot"] + "/api/trust", timeout=30).json()
    (row,) = [r for r in trust["repositories"] if r["repository"] == repo]
    assert (row["flagged"], row["missed"], row["misses_known"], row["recall"]) == (1, 1, True, 0.5)
    # the bot's squash-merged revert is read off the branch as a regression it caught; its culprit did not come back
    assert (row["regressions"], row["caught"], row["reverts_opened"], row["precision"]) == (2, 1, 1, 1.0)
    kinds = {(i["kind"], i["culprit"]) for i in row["incidents"]}
    assert ("missed", missed) in kinds and ("flagged", scenario.culprit) in kinds
    assert "Missed (reverted by others)" in httpx.get(world["bot"] + "/trust", timeout=30).text
