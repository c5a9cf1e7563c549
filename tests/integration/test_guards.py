"""Safety guards on opening a revert PR (bot/domain/guards.py): each one refuses, with its policy key."""

from __future__ import annotations

from datetime import timedelta

import pytest

from bot.domain.guards import Culprit, Repository, revert_refusal, start_refusal
from tests.support.policies import NOW, POLICY

OK_CULPRIT = Culprit("[Mamba] Fix track boundary (#8924)", "yufei-chen", NOW - timedelta(days=1), ("bug",))
OK_REPO = Repository("main", None, 0)


def test_an_ordinary_culprit_passes():
    assert revert_refusal(POLICY, OK_CULPRIT, OK_REPO, NOW) is None


@pytest.mark.parametrize(
    "culprit, repo, expected",
    [
        (
            OK_CULPRIT,
            Repository("main", 12, 0),
            "kill switch is on: issue #12 carries `stop-bot` (`revert.kill_switch_label`)",
        ),
        (OK_CULPRIT, Repository("release/v0.5", None, 0), "not one of the branches"),
        (Culprit('Revert "[Mamba] Fix track boundary (#8924)" (#8930)', "a", NOW, ()), OK_REPO, "itself a revert"),
        (
            Culprit('Reland "[Mamba] Fix track boundary" (#8931)', "a", NOW, ()),
            OK_REPO,
            "itself a revert (or a re-land)",
        ),
        (
            Culprit("Bump torch from 2.4 to 2.5 (#9000)", "dependabot[bot]", NOW, ()),
            OK_REPO,
            "`revert.never_revert_authors`",
        ),
        (Culprit("x (#1)", "a", NOW, ("bug", "no-revert")), OK_REPO, "carries `no-revert` (`revert.opt_out_label`)"),
        (
            Culprit("x (#1)", "a", NOW - timedelta(days=8), ()),
            OK_REPO,
            "landed 8 days ago, more than `revert.max_culprit_age_days` = 7",
        ),
        (OK_CULPRIT, Repository("main", None, 2), "2 revert PR(s) were opened today, the policy's `revert.daily_cap`"),
    ],
)
def test_each_guard_refuses_with_its_reason(culprit, repo, expected):
    assert expected in revert_refusal(POLICY, culprit, repo, NOW)


def test_just_under_the_limits_passes():
    assert (
        revert_refusal(
            POLICY, Culprit("x (#1)", "a", NOW - timedelta(days=6, hours=23), ()), Repository("main", None, 1), NOW
        )
        is None
    )


def test_start_is_refused_only_by_the_kill_switch_or_a_foreign_branch():
    assert start_refusal(POLICY, None, "main") is None
    assert "kill switch" in start_refusal(POLICY, 3, "main")


def test_only_commits_on_the_watched_branch_are_bisected(tmp_path):
    import subprocess

    from bot.adapters.git.repo import GitRepo
    from bot.domain.errors import RepoError
    from bot.service.intake import off_branch

    def git(*a):
        return subprocess.run(
            ["git", "-C", str(tmp_path), *a], check=True, capture_output=True, text=True
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    for i in range(3):
        git("-c", "user.name=a", "-c", "user.email=a@b", "commit", "-q", "--allow-empty", "-m", f"main {i}")
    first, head = git("rev-list", "--max-parents=0", "HEAD"), git("rev-parse", "HEAD")
    git("checkout", "-q", "-b", "fork-pr")
    git("-c", "user.name=m", "-c", "user.email=m@x", "commit", "-q", "--allow-empty", "-m", "untrusted code")
    fork = git("rev-parse", "HEAD")
    repo = GitRepo(tmp_path)
    assert off_branch(repo, first, head, "main") is None
    assert off_branch(repo, first, fork, "main") == f"bad={fork} is not on main: only commits merged there are bisected"
    with pytest.raises(RepoError):
        off_branch(repo, "f" * 40, head, "main")


def test_a_range_longer_than_bisect_max_commits_is_refused_saying_how_to_narrow_it(tmp_path):
    """Counted over what the search may blame: the first-parent chain, or every commit with `first_parent: false`."""
    import subprocess

    from bot.adapters.git.repo import GitRepo
    from bot.service.intake import too_long

    def git(*a):
        return subprocess.run(
            ["git", "-C", str(tmp_path), "-c", "user.name=a", "-c", "user.email=a@b", *a],
            check=True,
            capture_output=True,
            text=True,
        ).stdout.strip()

    git("init", "-q", "-b", "main")
    git("commit", "-q", "--allow-empty", "-m", "base")
    good = git("rev-parse", "HEAD")
    git("checkout", "-q", "-b", "side")
    for i in range(3):
        git("commit", "-q", "--allow-empty", "-m", f"side {i}")
    git("checkout", "-q", "main")
    git("commit", "-q", "--allow-empty", "-m", "main 1")
    git("merge", "-q", "--no-ff", "-m", "merge side", "side")
    repo, bad = GitRepo(tmp_path), git("rev-parse", "HEAD")  # first parent: main 1, the merge (2); all: 5

    def policy(**bisect):
        return POLICY.model_copy(update={"bisect": POLICY.bisect.model_copy(update=bisect)})

    assert too_long(repo, good, bad, policy(max_commits=2), "t") is None
    refusal = too_long(repo, good, bad, policy(max_commits=1), "t")
    assert refusal == (
        "the range has 2 commits, more than `bisect.max_commits` (1): ask for a narrower range with "
        "`/revert-bisect t good=<sha>` (a later good commit) or raise the key"
    )
    assert too_long(repo, good, bad, policy(max_commits=4, first_parent=False), "t").startswith(
        "the range has 5 commits"
    )
    assert too_long(repo, good, bad, policy(max_commits=5, first_parent=False), "t") is None


def test_first_parent_false_searches_every_commit_as_all_commits_does():
    from bot.service.config import bisect_config

    test = POLICY.tests[0]
    assert not bisect_config(POLICY, test, "origin/main", False).settings().descend_merges
    every = POLICY.model_copy(update={"bisect": POLICY.bisect.model_copy(update={"first_parent": False})})
    config = bisect_config(every, test, "origin/main", False)
    assert config.settings().descend_merges and config.descend_merges  # --all-commits (bot.cli.commands_bisect)
    assert bisect_config(POLICY, test, "origin/main", True).verify_revert is False  # dry-run: no revert to prove
