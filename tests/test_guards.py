"""Safety guards on opening a revert PR (bot/flow/guards.py): each one refuses, with its policy key."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

import pytest

from bot.flow.guards import Culprit, Repository, revert_refusal, start_refusal
from bot.policy.load import parse

NOW = datetime(2026, 11, 30, 12, tzinfo=timezone.utc)
POLICY = parse("""
repository: o/r
branches: [main]
watch: [{workflow: nightly}]
tests: [{id: t, match: t, probe: {name: command, command: [./t.sh]}}]
revert: {daily_cap: 2, max_culprit_age_days: 7, opt_out_label: no-revert, kill_switch_label: stop-bot,
         never_revert_authors: ["dependabot[bot]"]}
""", "p.yaml")
OK_CULPRIT = Culprit("[Mamba] Fix track boundary (#8924)", "yufei-chen", NOW - timedelta(days=1), ("bug",))
OK_REPO = Repository("main", None, 0)


def test_an_ordinary_culprit_passes():
    assert revert_refusal(POLICY, OK_CULPRIT, OK_REPO, NOW) is None


@pytest.mark.parametrize("culprit, repo, expected", [
    (OK_CULPRIT, Repository("main", 12, 0), "kill switch is on: issue #12 carries `stop-bot` (`revert.kill_switch_label`)"),
    (OK_CULPRIT, Repository("release/v0.5", None, 0), "not one of the branches"),
    (Culprit('Revert "[Mamba] Fix track boundary (#8924)" (#8930)', "a", NOW, ()), OK_REPO, "itself a revert"),
    (Culprit('Reland "[Mamba] Fix track boundary" (#8931)', "a", NOW, ()), OK_REPO, "itself a revert (or a re-land)"),
    (Culprit("Bump torch from 2.4 to 2.5 (#9000)", "dependabot[bot]", NOW, ()), OK_REPO, "`revert.never_revert_authors`"),
    (Culprit("x (#1)", "a", NOW, ("bug", "no-revert")), OK_REPO, "carries `no-revert` (`revert.opt_out_label`)"),
    (Culprit("x (#1)", "a", NOW - timedelta(days=8), ()), OK_REPO, "landed 8 days ago, more than `revert.max_culprit_age_days` = 7"),
    (OK_CULPRIT, Repository("main", None, 2), "2 revert PR(s) were opened today, the policy's `revert.daily_cap`"),
])
def test_each_guard_refuses_with_its_reason(culprit, repo, expected):
    assert expected in revert_refusal(POLICY, culprit, repo, NOW)


def test_just_under_the_limits_passes():
    assert revert_refusal(POLICY, Culprit("x (#1)", "a", NOW - timedelta(days=6, hours=23), ()), Repository("main", None, 1), NOW) is None


def test_start_is_refused_only_by_the_kill_switch_or_a_foreign_branch():
    assert start_refusal(POLICY, None, "main") is None
    assert "kill switch" in start_refusal(POLICY, 3, "main")


def test_only_commits_on_the_watched_branch_are_bisected(tmp_path):
    import subprocess

    from bot.errors import RepoError
    from bot.flow.local_bisections import off_branch
    from bot.gitrepo import GitRepo

    git = lambda *a: subprocess.run(["git", "-C", str(tmp_path), *a], check=True, capture_output=True, text=True).stdout.strip()  # noqa: E731
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
