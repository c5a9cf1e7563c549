"""The synthetic repositories the tests and benchmarks bisect: their history, read back with real git."""

import subprocess

from scenarios.synthetic import build


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def test_linear_history_has_one_culprit_and_marked_unbuildable_commits(tmp_path):
    repo = build(tmp_path / "r", 12, 7, unbuildable=frozenset({3}))
    assert git(repo.path, "rev-list", "--first-parent", "--reverse", f"{repo.good}..{repo.bad}").split() == repo.shas
    broken = [i + 1 for i, sha in enumerate(repo.shas) if "True" in git(repo.path, "show", f"{sha}:service/config.py")]
    assert broken == list(range(7, 13)) and repo.culprit == repo.shas[6]
    has_marker = lambda sha: "BUILD_BROKEN" in git(repo.path, "ls-tree", "--name-only", sha).split()  # noqa: E731
    assert [i + 1 for i, sha in enumerate(repo.shas) if has_marker(sha)] == [3]
    assert git(repo.path, "log", "-1", "--format=%s", repo.shas[6]) == "Change 7 (#1007)"
    assert git(repo.path, "status", "--porcelain") == ""


def test_merge_with_a_side_branch_culprit(tmp_path):
    repo = build(tmp_path / "m", 8, culprit=0, merge_at=5, side_commits=3, side_culprit=2)
    merge = repo.shas[4]
    assert len(git(repo.path, "rev-list", "--parents", "-1", merge).split()) == 3
    assert git(repo.path, "log", "-1", "--format=%s", repo.culprit) == "Side change 2 of feature 5"
    assert "True" in git(repo.path, "show", f"{repo.culprit}:service/config.py")
    assert "False" in git(repo.path, "show", f"{repo.culprit}^:service/config.py")
    assert "False" in git(repo.path, "show", f"{repo.shas[3]}:service/config.py")


def test_a_culprit_outside_the_range_breaks_nothing(tmp_path):
    repo = build(tmp_path / "n", 5, 99)
    assert repo.culprit is None
    assert "False" in git(repo.path, "show", f"{repo.bad}:service/config.py")
