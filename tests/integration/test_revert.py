"""Reverting against real git: plain, merge, conflict, already reverted, resumed."""

import subprocess

import pytest

from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import (
    AlreadyReverted,
    RevertConflict,
    create_revert,
    reverter_for,
    safe_branch,
)
from bot.domain.errors import RevertBisectError
from scenarios.synthetic import build


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def snapshot(path):
    """Everything a revert must leave alone."""
    return (
        git(path, "rev-parse", "HEAD"),
        git(path, "status", "--porcelain"),
        git(path, "branch", "--list"),
        git(path, "worktree", "list", "--porcelain"),
        git(path, "stash", "list"),
    )


def test_revert_on_new_branch_with_gits_wording(synth):
    repo = synth(12, 5)
    before = snapshot(repo.path)
    r = create_revert(GitRepo(repo.path), repo.culprit, repo.bad, reason="Found by revert-bisect.")
    assert r.branch == f"revert-bisect/revert-{repo.culprit[:12]}"
    msg = git(repo.path, "log", "-1", "--format=%B", r.sha)
    assert msg.startswith('Revert "Change 5 (#1005)"\n\nThis reverts commit ' + repo.culprit + ".")
    assert "Found by revert-bisect." in msg
    assert git(repo.path, "rev-parse", f"{r.sha}^") == repo.bad
    assert git(repo.path, "show", f"{r.sha}:service/config.py") == "BROKEN = False"
    assert r.files == ["notes/change_5.txt", "service/config.py"] and "2 files changed" in r.diffstat
    assert snapshot(repo.path)[:2] == before[:2]  # checkout untouched; only a branch was added


def test_merge_commit_is_reverted_against_mainline(tmp_path):
    repo = build(tmp_path / "m", 8, culprit=0, merge_at=5, side_commits=3, side_culprit=2)
    merge = repo.shas[4]
    r = create_revert(GitRepo(repo.path), merge, repo.bad)
    assert git(repo.path, "show", f"{r.sha}:service/config.py") == "BROKEN = False"
    assert "side/5_1.txt" in r.files  # everything the merge brought in goes


def test_conflicting_revert_changes_nothing(synth):
    repo = synth(6, 3)
    # a later commit edits the same line the culprit changed
    (repo.path / "service" / "config.py").write_text("BROKEN = True  # tuned\n")
    git(repo.path, "commit", "-qam", "Tune config (#2000)")
    head = git(repo.path, "rev-parse", "HEAD")
    before = snapshot(repo.path)
    with pytest.raises(RevertConflict) as exc:
        create_revert(GitRepo(repo.path), repo.culprit, head)
    assert exc.value.files == ["service/config.py"]
    assert "service/config.py" in str(exc.value) and "nothing was changed" in str(exc.value)
    assert snapshot(repo.path) == before  # no branch, no worktree, no half-applied state


def test_already_reverted_on_the_branch(synth):
    repo = synth(6, 3)
    git(repo.path, "revert", "--no-edit", repo.culprit)
    with pytest.raises(AlreadyReverted, match="already reverted"):
        create_revert(GitRepo(repo.path), repo.culprit, "HEAD")
    sha, error = reverter_for(GitRepo(repo.path))(repo.culprit, git(repo.path, "rev-parse", "HEAD"))
    assert sha is None and "already reverted" in error


def test_relanded_commit_can_be_reverted_again(synth):
    repo = synth(6, 3)
    git(repo.path, "revert", "--no-edit", repo.culprit)
    git(repo.path, "revert", "--no-edit", "HEAD")  # the reland
    r = create_revert(GitRepo(repo.path), repo.culprit, "HEAD")
    assert r.sha


def test_revert_is_idempotent_after_a_restart(synth):
    repo = synth(6, 3)
    first = create_revert(GitRepo(repo.path), repo.culprit, repo.bad)
    again = create_revert(GitRepo(repo.path), repo.culprit, repo.bad)
    assert again.sha == first.sha
    with pytest.raises(RevertBisectError, match="already exists and is not this revert"):
        create_revert(GitRepo(repo.path), repo.shas[1], repo.bad, branch=first.branch)


@pytest.mark.parametrize(
    "raw, clean",
    [
        ("revert-bisect/revert-abc", "revert-bisect/revert-abc"),
        ("../../etc;rm -rf", "etc-rm-rf"),
        ("a b/..//c", "a-b/c"),
    ],
)
def test_branch_names_are_built_from_safe_parts(raw, clean):
    assert safe_branch(raw) == clean


def test_revert_cli(synth, cli):
    repo = synth(6, 3)
    r = cli("revert", "--repo", str(repo.path), "--culprit", repo.culprit[:10], "--onto", repo.bad)
    assert r.code == 0 and "revert-bisect/revert-" in r.stdout
    bad = cli("revert", "--repo", str(repo.path), "--culprit", "deadbeef")
    assert bad.code == 2 and "not a commit" in bad.stderr and "Traceback" not in bad.stderr
