"""The follow-up finder (bot/adapters/github/followups.py over bot/domain/followup.py) through real PyGithub against
the sandbox serving SGLang's real incident with git behind it (tests/support/followup_world.py): #29792 retitled among
over 200 open PRs, 50 of them updated after it, beside decoys made to fool hunk headers and titles. It must link
#29792 and name nothing else; without it, open a tracking issue that names nothing else either."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.adapters.github.followups import Budget, FollowupFinder
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.policy_files import load
from bot.service.publish import Publisher, Target
from sandbox import SandboxState, run_in_thread
from tests.support.followup_world import BRP, RETITLED, init_world, sglang_world
from tests.support.incident import BOT

POLICY = load(Path(__file__).resolve().parents[2] / "policies" / "example.yaml")


@pytest.fixture
def served(tmp_path):
    def serve(*leave_out: int, retitled: bool = True):
        where = f"{len(leave_out)}-{retitled}"
        state = SandboxState(tmp_path / f"sandbox-{where}")
        slug = sglang_world(state, tmp_path / f"world-{where}", leave_out=leave_out, retitled=retitled)
        base, stop = run_in_thread(state)
        stops.append(stop)
        return state, GitHubForge(connect(base, f"sandbox-token-{BOT}", throttle=False), slug)

    stops: list = []
    yield serve
    for stop in stops:
        stop()


@pytest.fixture
def small(tmp_path):
    """The small world of tests.support.followup_world.init_world (the decoys' own classes), served: (state, forge)."""
    state = SandboxState(tmp_path / "sandbox")
    slug = init_world(state, tmp_path / "world")
    base, stop = run_in_thread(state)
    yield state, GitHubForge(connect(base, f"sandbox-token-{BOT}", throttle=False), slug)
    stop()


def publisher(forge: GitHubForge) -> Publisher:
    no_clone = None  # the finder reads the forge and the policy only
    target = Target(forge=forge, policy=POLICY, repo_slug=forge.slug, clone=no_clone, bisection_id=7, tests=("kl",))  # type: ignore[arg-type]
    return Publisher(target)


DECOYS = (34001, 34002, 30437, 31488, 31622)  # same words, a method added after, two of the same class, the revert


def test_the_finder_links_the_retitled_29792_among_200_open_prs_and_names_nothing_else(served):
    state, forge = served()
    assert sum(1 for i in state.repo(forge.slug).issues.values() if i.pull and i.state == "open") >= 200
    assert state.repo(forge.slug).issues[29792].title == RETITLED
    found = forge.followup_for(31369)
    assert found.best == 29792
    assert found.why == f"changes `BatchResultProcessor._mamba_check_track_boundary` in `{BRP}`"
    passed = {p.number: p.reason for p in found.passed_over}
    assert passed == {
        34001: "other_definitions",
        34002: "other_definitions",
        30437: "other_definitions",
        31488: "other_definitions",
        31622: "closed",
    }
    assert "timeline" in found.searched and "open PRs" in found.searched and "in:title" in found.searched


def test_the_hunk_headers_name_the_class_as_gits_default_driver_prints_them(served):
    _, forge = served()
    _, files = forge.repo.requester.requestJsonAndCheck("GET", f"{forge.repo.url}/pulls/34001/files")
    assert [
        h for h in files[0]["patch"].splitlines() if h.startswith("@@")
    ] == [  # its method is _mamba_prefix_cache_update
        "@@ -15,7 +15,7 @@ class BatchResultProcessor:"
    ]


def test_the_hunk_headers_stay_gits_default_drivers_whatever_the_callers_git_config(tmp_path, monkeypatch):
    """A developer's global `*.py diff=python` must not make the sandbox print `def name(` where GitHub need not."""
    from sandbox import gitstore

    attributes, config = tmp_path / "attributes", tmp_path / "gitconfig"
    attributes.write_text("*.py diff=python\n")
    config.write_text(f"[core]\n\tattributesFile = {attributes}\n")
    monkeypatch.setattr(gitstore, "_ENV", {**gitstore._ENV, "GIT_CONFIG_GLOBAL": str(config)})
    state = SandboxState(tmp_path / "sandbox")
    slug = init_world(state, tmp_path / "world")
    base, stop = run_in_thread(state)
    try:
        forge = GitHubForge(connect(base, f"sandbox-token-{BOT}", throttle=False), slug)
        _, files = forge.repo.requester.requestJsonAndCheck("GET", f"{forge.repo.url}/pulls/12/files")
        assert files[0]["patch"].startswith("@@ -10,7 +10,7 @@ class Scheduler:")
    finally:
        stop()


def test_init_of_another_class_is_not_the_culprits(small):
    _, forge = small
    found = forge.followup_for(10)
    assert found.best == 11 and "`Scheduler.__init__`" in found.why
    assert {p.number: p.reason for p in found.passed_over} == {12: "other_definitions", 13: "other_definitions"}
    _, files = forge.repo.requester.requestJsonAndCheck("GET", f"{forge.repo.url}/pulls/12/files")
    assert files[0]["patch"].startswith("@@ -10,7 +10,7 @@ class Scheduler:")  # Worker's hunk, headed Scheduler


def test_open_prs_by_last_update_come_oldest_first_unless_the_direction_says_desc(small):
    """pulls/list's `direction`: "Default: `desc` when sort is `created` or sort is not specified, otherwise `asc`"
    -- a finder that asks for `sort=updated` alone reads the stalest PRs first."""
    _, forge = small
    listed = lambda **kw: [  # noqa: E731
        p["number"]
        for p in forge.repo.requester.requestJsonAndCheck(
            "GET", f"{forge.repo.url}/pulls", parameters={"state": "open", **kw}
        )[1]
    ]
    assert listed(sort="updated") == [11, 12, 13]
    assert listed(sort="updated", direction="desc") == [13, 12, 11]


def test_without_29792_nothing_fits_and_a_tracking_issue_naming_nothing_else_is_opened(served):
    state, forge = served(29792)
    followup, found = publisher(forge).followup(31369, None)
    assert found is not None and found.best is None
    issue = state.repo(forge.slug).issues[followup]
    assert issue.pull is None and "#31369" in issue.title and issue.user == BOT
    assert not any(f"#{n}" in (issue.body or "") for n in DECOYS)
    # asked again (a retried publish): the same issue, never a second one
    assert publisher(forge).followup(31369, None)[0] == followup


def test_the_reads_stay_within_the_budget(served):
    state, forge = served()
    finder = FollowupFinder(forge.repo)
    state.rates.calls.clear()
    found = finder.find(31369)
    assert found.best == 29792
    made = sum(state.rates.calls.values())
    assert made == sum(finder.reads.counts.values()) <= finder.budget.most
    assert finder.reads.counts["open PRs"] <= 3 and finder.reads.counts["search"] <= 2
    small = FollowupFinder(forge.repo, Budget(open_pull_pages=1, files=40, searches=0))
    assert small.find(31369).best is None  # 51st by last update: past 40 PRs' files, the fix is not read
    assert small.reads.counts["files"] <= 40 and "search" not in small.reads.counts


def test_search_alone_finds_it_under_its_recorded_title_but_not_retitled(served):
    _, forge = served(retitled=False)
    finder = FollowupFinder(forge.repo, Budget(open_pull_pages=0))
    found = finder.find(31369)
    assert found.best == 29792 and finder.reads.counts.get("open PRs", 0) == 0
    _, forge = served()  # "[HiCache] Correct lookahead bookkeeping for hybrid models": only its files find it
    found = FollowupFinder(forge.repo, Budget(open_pull_pages=0)).find(31369)
    assert found.best is None and [p.number for p in found.passed_over] == [31622]


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


def test_a_large_diff_comes_without_its_patch_and_a_file_by_its_blob(served):
    import base64

    state, forge = served()
    pull = state.repo(forge.slug).issues[30437].pull
    url = f"{forge.repo.url}/pulls/30437/files"
    _, (entry,) = forge.repo.requester.requestJsonAndCheck("GET", url)
    _, blob = forge.repo.requester.requestJsonAndCheck("GET", f"{forge.repo.url}/git/blobs/{entry['sha']}")
    assert blob["encoding"] == "base64" and "_mamba_lazy_spec_update" in base64.b64decode(blob["content"]).decode()
    pull.files = [{**entry, "additions": 401, "deletions": 0}]  # past the 400 lines GitHub loads for one file
    _, (large,) = forge.repo.requester.requestJsonAndCheck("GET", url)
    assert "patch" not in large
    found = forge.followup_for(31369)
    assert found.best == 29792 and {p.number: p.reason for p in found.passed_over}[30437] == "unread"


def test_a_culprit_without_its_patch_fetches_no_candidates_text_and_calls_them_unread(small):
    state, forge = small
    url = f"{forge.repo.url}/pulls/10/files"
    _, (entry,) = forge.repo.requester.requestJsonAndCheck("GET", url)
    state.repo(forge.slug).issues[10].pull.files = [{**entry, "additions": 401}]  # past what GitHub loads: no patch
    finder = FollowupFinder(forge.repo)
    found = finder.find(10)
    assert found.best is None
    assert {p.number: p.reason for p in found.passed_over} == {11: "unread", 12: "unread", 13: "unread"}
    assert "texts" not in finder.reads.counts  # no candidate's text is worth a request then


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
        assert found.why == "changes `Scheduler.process_decode_result` in `mini_sglang/scheduler.py`"
    finally:
        stop()


def test_a_candidate_whose_files_cannot_be_read_is_ranked_without_them(served):
    from github import GithubException

    class Gone(FollowupFinder):  # GitHub hides a PR removed as spam: its files answer 404
        def _change(self, number: int, pages: int, culprit):
            if number == 33118:
                raise GithubException(404, {"message": "Not Found"}, {})
            return super()._change(number, pages, culprit)

    _, forge = served()
    found = Gone(forge.repo).find(31369)
    assert found.best == 29792 and "#33118's files could not be read (404)" in found.searched
