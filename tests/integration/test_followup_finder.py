"""The follow-up finder (bot/adapters/github/followups.py over bot/domain/followup.py) through real PyGithub against
the sandbox serving SGLang's real incident: it must pick #29792 from PRs of the same weeks, and without it open a
tracking issue."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.github.followups import Caps, FollowupFinder
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.policy_files import load
from bot.service.publish import Publisher, Target
from sandbox import SandboxState, run_in_thread
from tests.support.incident import BOT, incident, seed_incident

POLICY = load(Path(__file__).resolve().parents[2] / "policies" / "example.yaml")


@pytest.fixture
def served(tmp_path):
    def serve(*leave_out: int):
        state = SandboxState(tmp_path / f"sandbox-{len(leave_out)}")
        slug = seed_incident(state, leave_out=leave_out)
        base, stop = run_in_thread(state)
        stops.append(stop)
        return state, GitHubForge(connect(base, f"sandbox-token-{BOT}", throttle=False), slug)

    stops: list = []
    yield serve
    for stop in stops:
        stop()


def publisher(forge: GitHubForge) -> Publisher:
    return Publisher(Target(forge, POLICY, forge.slug, None, "", "", 7, "kl", None))  # type: ignore[arg-type]


def test_the_finder_picks_29792_from_the_decoys_and_says_what_it_searched(served):
    _, forge = served()
    found = forge.followup_for(incident()["culprit"])
    assert found.best == 29792
    assert "_mamba_check_track_boundary" in found.why and "batch_result_processor.py" in found.why
    assert 31622 not in found.related and 33118 not in found.related  # the closed revert; another file
    assert "timeline" in found.searched and "open PRs" in found.searched and "searches" in found.searched
    assert "in:title" in found.searched


def test_without_29792_nothing_fits_and_a_tracking_issue_is_opened(served):
    state, forge = served(29792)
    followup, found = publisher(forge).followup(31369, None)
    assert found is not None and found.best is None
    issue = state.repo(forge.slug).issues[followup]
    assert issue.pull is None and "#31369" in issue.title and issue.user == BOT
    # asked again (a retried publish): the same issue, never a second one
    assert publisher(forge).followup(31369, None)[0] == followup


def test_the_reads_are_capped(served):
    _, forge = served()
    finder = FollowupFinder(forge.repo, Caps(open_pull_pages=1, searches=1, candidates_read=2, file_pages=1))
    found = finder.find(31369)
    counts = finder.reads.counts
    assert counts["search"] == 1 and counts["open PRs"] == 1
    assert counts["files"] <= 3 + 2  # the culprit's pages and two candidates', one page each
    assert found.best == 29792  # the likeliest candidates are read first


def test_search_alone_finds_it_when_the_open_prs_are_not_read(served):
    _, forge = served()
    finder = FollowupFinder(forge.repo, Caps(open_pull_pages=0, candidates_read=1))
    found = finder.find(31369)
    assert found.best == 29792 and finder.reads.counts.get("open PRs", 0) == 0


def test_a_prs_files_are_paged_as_github_pages_them_with_their_patches(served):
    state, forge = served()
    pull = state.repo(forge.slug).issues[29792].pull
    pull.files = [
        {"filename": f"f{i:03}.py", "status": "modified", "additions": 1, "deletions": 0, "patch": "@@ -1 +1 @@\n+x"}
        for i in range(45)
    ]
    url = f"{forge.repo.url}/pulls/29792/files"
    headers, first = forge.repo.requester.requestJsonAndCheck("GET", url)
    assert len(first) == 30 and 'rel="next"' in headers["link"]  # 30 a page by default
    _, second = forge.repo.requester.requestJsonAndCheck("GET", url, parameters={"page": 2})
    assert [f["filename"] for f in first + second] == [f"f{i:03}.py" for i in range(45)]
    assert first[0]["patch"].startswith("@@") and first[0]["changes"] == 1 and first[0]["blob_url"]
    _, big = forge.repo.requester.requestJsonAndCheck("GET", url, parameters={"per_page": 500})
    assert len(big) == 45  # at most 100 a page


def test_the_miniatures_follow_up_shaped_like_29792_is_found_by_its_function(tmp_path):
    """The miniature with its follow-up as SGLang's real one was (scenario followup="pr"): an open PR by another
    author, opened before the culprit merged, changing the culprit's function, never naming it. Before the finder read
    files and functions, the bot opened its own tracking issue here and never named the PR."""
    from sandbox import seed_from_scenario
    from scenarios.mamba_track_boundary import build

    scenario = build(tmp_path / "scenario", commits=12, seed=5, followup="pr")
    follow = scenario.followup
    assert follow["kind"] == "pr" and f"#{scenario.culprit_pr}" not in follow["body"]
    state = SandboxState(tmp_path / "sandbox")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    base, stop = run_in_thread(state)
    try:
        forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
        files = list(forge.repo.get_pull(follow["number"]).get_files())  # from its branch, as git has it
        assert [f.filename for f in files] == ["mini_sglang/scheduler.py"] and "@@" in files[0].patch
        found = forge.followup_for(scenario.culprit_pr)
        assert found.best == follow["number"]
        assert "mini_sglang/scheduler.py" in found.why and "`process_decode_result`" in found.why
    finally:
        stop()


def test_a_candidate_whose_files_cannot_be_read_is_ranked_without_them(served):
    from github import GithubException

    class Gone(FollowupFinder):  # GitHub hides a PR removed as spam: its files answer 404
        def _files(self, number: int, pages: int):
            if number == 33118:
                raise GithubException(404, {"message": "Not Found"}, {})
            return super()._files(number, pages)

    _, forge = served()
    found = Gone(forge.repo).find(31369)
    assert found.best == 29792 and "#33118's files could not be read (404)" in found.searched
