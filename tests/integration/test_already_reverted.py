"""A culprit already reverted on ONTO, against real git: by a squash-merged revert PR (`Revert "<subject>" (#N)`,
no body), by `git revert` (the `This reverts commit` line), by a commit whose patch is the inverse and whose
message says nothing, and reverted then re-landed. Each gives the typed answer, the CLI its own exit code."""

import re
import subprocess
import time
from types import SimpleNamespace

import pytest

from bot.adapters.git.already import find_revert
from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import AlreadyReverted, create_revert, reverter_for
from bot.service.report import EXIT_CODES
from tests.support.cli import bisect_args

ALREADY_REVERTED_EXIT = 10


def git(repo, *args):
    return subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit(repo, message, *files):
    if files:
        git(repo, "add", *files)
    git(repo, "commit", "-q", "--allow-empty-message", "-m", message)
    return git(repo, "rev-parse", "HEAD")


def squash_revert(repo, culprit, message, extra=None):
    """What a squash-merged revert PR leaves: the inverse change (plus `extra`, a changelog line), one bare subject."""
    git(repo, "revert", "--no-commit", culprit)
    if extra:
        (repo / "CHANGELOG.md").write_text(extra)
        git(repo, "add", "CHANGELOG.md")
    return commit(repo, message)


def later_config_edit(repo):
    """A later commit on the culprit's line: reverting on top of it conflicts, which hid the earlier revert."""
    (repo / "service" / "config.py").write_text("BROKEN = False  # tuned\n")
    return commit(repo, "Tune config (#3000)", "service/config.py")


@pytest.fixture
def repo(synth):
    return synth(6, 3)  # the culprit is `Change 3 (#1003)`


def test_squash_merged_revert_is_found_by_its_subject(repo):
    by = squash_revert(repo.path, repo.culprit, 'Revert "Change 3 (#1003)" (#2001)', extra="- reverted #1003\n")
    head = later_config_edit(repo.path)
    found = find_revert(GitRepo(repo.path), repo.culprit, head, "main")
    assert (found.sha, found.pr, found.how) == (by, 2001, "subject")  # its patch is not the bare inverse
    assert str(found) == f"{repo.culprit[:12]} is already reverted by {by[:12]} (#2001) on main: nothing to do"


def test_revert_button_subject_without_the_culprits_pr_number(repo):
    by = squash_revert(repo.path, repo.culprit, 'Revert "Change 3" (#2001)', extra="- reverted\n")
    assert find_revert(GitRepo(repo.path), repo.culprit, "HEAD").sha == by


def test_git_revert_commit_is_found_by_its_message(repo):
    git(repo.path, "revert", "--no-edit", repo.culprit)
    by = git(repo.path, "rev-parse", "HEAD")
    later_config_edit(repo.path)
    found = find_revert(GitRepo(repo.path), repo.culprit, "HEAD")
    assert (found.sha, found.pr, found.how) == (by, None, "message")


def test_silent_inverse_patch_is_found_by_patch_id(repo):
    by = squash_revert(repo.path, repo.culprit, "Tidy the service config")
    later_config_edit(repo.path)
    found = find_revert(GitRepo(repo.path), repo.culprit, "HEAD")
    assert (found.sha, found.how) == (by, "patch")


def test_revert_naming_another_commit_is_not_this_one(repo):
    """Same title, but its `This reverts commit` line names another commit (and it leaves the culprit's change)."""
    (repo.path / "CHANGELOG.md").write_text("- reverted change 1\n")
    commit(repo.path, f'Revert "Change 3 (#1003)"\n\nThis reverts commit {repo.shas[0]}.', "CHANGELOG.md")
    assert find_revert(GitRepo(repo.path), repo.culprit, "HEAD") is None


@pytest.mark.parametrize(
    "reland", ["cherry-pick", "reapply-subject", "revert-of-revert-subject", "revert-of-revert-message"]
)
def test_reverted_then_relanded_is_reverted_again(repo, reland):
    path = repo.path
    revert = squash_revert(path, repo.culprit, 'Revert "Change 3 (#1003)" (#2001)', extra="- reverted\n")
    if reland == "cherry-pick":  # the same patch again, under a new title
        git(path, "cherry-pick", "-n", repo.culprit)
        commit(path, "Land change 3 again (#2002)")
    else:  # the patch differs (a fix rides along): only the wording tells
        git(path, "cherry-pick", "-n", repo.culprit)
        (path / "FIX.md").write_text("the proper fix\n")
        git(path, "add", "FIX.md")
        message = {
            "reapply-subject": 'Reapply "Change 3 (#1003)" (#2002)',
            "revert-of-revert-subject": 'Revert "Revert "Change 3 (#1003)"" (#2002)',
            "revert-of-revert-message": f"Bring change 3 back\n\nThis reverts commit {revert}.",
        }[reland]
        commit(path, message)
    assert find_revert(GitRepo(path), repo.culprit, "HEAD") is None
    r = create_revert(GitRepo(path), repo.culprit, "HEAD")
    assert git(path, "show", f"{r.sha}:service/config.py") == "BROKEN = False"


def test_reverted_relanded_and_reverted_again_names_the_last_revert(repo):
    path = repo.path
    squash_revert(path, repo.culprit, 'Revert "Change 3 (#1003)" (#2001)')
    git(path, "cherry-pick", repo.culprit)
    again = squash_revert(path, repo.culprit, 'Revert "Change 3 (#1003)" (#2003)', extra="- again\n")
    found = find_revert(GitRepo(path), repo.culprit, "HEAD")
    assert (found.sha, found.pr) == (again, 2003)


def test_changes_undone_by_several_commits_count_as_reverted(repo):
    path = repo.path
    (path / "service" / "config.py").write_text("BROKEN = False\n")
    commit(path, "Turn it off", "service/config.py")
    git(path, "rm", "-q", "notes/change_3.txt")
    commit(path, "Drop a note")
    found = find_revert(GitRepo(path), repo.culprit, "HEAD", "main")
    assert (found.sha, found.how) == (None, "tree")
    assert "already reverted on main: its changes are gone there" in str(found)
    assert find_revert(GitRepo(path), repo.culprit, f"{repo.culprit}^") is None  # never on it: not "reverted"


def test_an_empty_revert_never_reaches_git_commit(tmp_path):
    """The culprit's line is undone by a commit that also changes another line of the file: no commit reverts
    it, the files differ, yet `git revert --no-commit` changes nothing."""
    path = tmp_path / "r"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    lines = [f"line {i}" for i in range(12)]
    (path / "f.txt").write_text("\n".join(lines) + "\n")
    commit(path, "base", "f.txt")
    (path / "f.txt").write_text("\n".join(["line 0", "BROKEN", *lines[2:]]) + "\n")
    culprit = commit(path, "Break it (#1)", "f.txt")
    (path / "f.txt").write_text("\n".join([*lines[:10], "tuned", "line 11"]) + "\n")
    commit(path, "Tune line 10 (#2)", "f.txt")
    before = git(path, "branch", "--list")
    assert find_revert(GitRepo(path), culprit, "HEAD") is None
    with pytest.raises(AlreadyReverted) as exc:
        create_revert(GitRepo(path), culprit, "main")
    assert (
        exc.value.found.how == "empty" and "reverting" in str(exc.value) and "on main changes nothing" in str(exc.value)
    )
    assert git(path, "branch", "--list") == before and git(path, "status", "--porcelain") == ""


def test_the_bisections_reverter_reports_it_instead_of_failing(repo):
    by = squash_revert(repo.path, repo.culprit, 'Revert "Change 3 (#1003)" (#2001)')
    sha, error = reverter_for(GitRepo(repo.path))(repo.culprit, git(repo.path, "rev-parse", "HEAD"))
    assert sha is None and f"already reverted by {by[:12]} (#2001)" in error


def test_cli_revert_onto_the_revert_and_onto_a_later_commit(repo, cli):
    assert ALREADY_REVERTED_EXIT not in EXIT_CODES.values() and ALREADY_REVERTED_EXIT not in (2, 130)
    by = squash_revert(repo.path, repo.culprit, 'Revert "Change 3 (#1003)" (#2001)')
    on_it = cli("revert", "--repo", str(repo.path), "--culprit", repo.culprit[:8], "--onto", by)
    later_config_edit(repo.path)
    later = cli("revert", "--repo", str(repo.path), "--culprit", repo.culprit[:8], "--onto", "main")
    for r, ref in ((on_it, by[:12]), (later, "main")):
        assert r.code == ALREADY_REVERTED_EXIT, r.stderr
        assert f"already reverted by {by[:12]} (#2001) on {ref}" in r.stdout
        assert "Traceback" not in r.stderr + r.stdout and "conflicts" not in r.stdout + r.stderr
    assert git(repo.path, "branch", "--list", "revert-bisect/*") == ""  # nothing was made
    assert "10 CULPRIT is already reverted on ONTO" in " ".join(cli("revert", "--help").stdout.split())


def test_bisect_verify_revert_onto_a_branch_that_reverted_it(synth, cli):
    repo = synth(10, 4)
    git(repo.path, "checkout", "-q", "-b", "release")
    by = squash_revert(repo.path, repo.culprit, 'Revert "Change 4 (#1004)" (#2001)')
    r = cli(*bisect_args(repo, "--workers", "2", "--verify-revert", "--onto", "release"))
    assert r.code == 0, r.stderr
    assert "Traceback" not in r.stderr and f"already reverted by {by[:12]} (#2001)" in r.stderr
    assert r.json["culprit"] == repo.culprit and r.json["ab"] is None
    revert = r.json["revert"]
    assert revert["status"] == "already_reverted" and revert["sha"] is None
    assert revert["reverted_by"] == dict(
        sha=by, pr=2001, subject='Revert "Change 4 (#1004)" (#2001)', ref=revert["onto"], how="patch"
    )


@pytest.mark.e2e  # a whole story: a real bisection of the miniature incident through the sandbox and the bot
def test_the_bot_comments_on_the_merged_revert_pr_instead_of_opening_another(tmp_path):
    """A maintainer squash-merged a revert PR (`Revert "<subject>" (#N)`, no body) after the red nightly; a
    bisection of that nightly's range finds the culprit and proves its revert on the red head, then sees the
    revert on main: no branch, no PR, no tracking issue; the evidence is one comment on #N, and the outcome says so."""
    from bot.adapters.store.db import connect
    from bot.adapters.store.store import Store
    from sandbox import gitstore
    from tests.support.world import (
        DECLARED_DETERMINISTIC,
        comments,
        deliver_comment,
        open_reverts,
        policies_with,
        sandbox_and_bot,
    )

    stack = sandbox_and_bot(tmp_path, policies=policies_with(tmp_path, DECLARED_DETERMINISTIC))
    world = next(stack)
    try:
        scenario, state, slug = world["scenario"], world["state"], world["seeded"].repo
        bare = state.repo(slug).path
        clone = tmp_path / "maintainer"
        git(tmp_path, "clone", "-q", str(bare), str(clone))
        subject = git(clone, "log", "-1", "--format=%s", scenario.culprit)
        number = max(p["number"] for p in scenario.prs) + 50
        by = squash_revert(clone, scenario.culprit, f'Revert "{subject}" (#{number})')
        git(clone, "push", "-q", "origin", "HEAD:main")
        state.add_pull(
            slug,
            number=number,
            title=f'Revert "{subject}"',
            user="sandbox-maintainer",
            head="sandbox-maintainer/revert",
            base="main",
            merged=True,
            merge_commit_sha=by,
            head_sha=by,
            base_sha=scenario.bad,
        )
        issues_before = set(state.repos[slug.lower()].issues)
        branches_before = set(gitstore.branches(bare))
        followup = scenario.followup["number"]
        deliver_comment(
            world,
            "sandbox-maintainer",
            f"/revert-bisect decode-cache-hit good={scenario.good[:12]} bad={scenario.bad[:12]}",
            followup,
        )

        store, deadline = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}")), time.monotonic() + 300
        while True:  # until the status comment shows how the bisection ended (fails at once if it ended otherwise)
            rows = store.recent(5)
            ended = rows[0].status if rows and rows[0].status else None
            final = [c["body"] for c in comments(world, followup) if ended and f"**{ended}**" in c["body"]]
            if final or time.monotonic() > deadline:
                break
            time.sleep(0.5)
        assert ended == "found", f"bisection ended {ended!r}"
        assert (
            final
            and f"Revert PR: none opened: {scenario.culprit[:12]} is already reverted by {by[:12]} (#{number}) on main"
            in final[0]
        )
        evidence = [c["body"] for c in comments(world, number)]
        assert (
            len(evidence) == 1
            and "already reverts on `main`" in evidence[0]
            and f"#{scenario.culprit_pr}" in evidence[0]
        )
        # proven on the red head, before the revert landed
        assert re.search(r"HEAD fails \(\d+ runs?[;)].*, HEAD \+ revert passes \(\d+ runs?\)", evidence[0]), evidence
        assert not open_reverts(world) and not comments(world, scenario.culprit_pr)
        assert (
            set(gitstore.branches(bare)) == branches_before and set(state.repos[slug.lower()].issues) == issues_before
        )
        outcome = store.get(rows[0].id).outcome
        assert outcome["already_reverted"]["sha"] == by and outcome["already_reverted"]["pr"] == number
        assert outcome["evidence_on"] == number and "revert_pr" not in outcome
    finally:
        stack.close()


def test_a_revert_without_a_pr_number_puts_the_evidence_on_the_culprit_pr(tmp_path):
    """publish's existing-revert path with a revert pushed straight to the branch (its subject names no PR)."""
    from pathlib import Path

    from bot.adapters.git.already import RevertFound
    from bot.adapters.git.clones import GIT_CLONES
    from bot.adapters.github.forge import GitHubForge, connect
    from bot.adapters.policy_files import load
    from bot.ports import CulpritFacts
    from bot.service.publish import Clone, Published, Publisher, Target
    from sandbox import SandboxState, run_in_thread, seed_from_scenario
    from scenarios.mamba_track_boundary import build

    scenario = build(tmp_path / "scenario", commits=10, seed=2)
    state = SandboxState(tmp_path / "sandbox")
    seeded = seed_from_scenario(state, tmp_path / "scenario")
    base, stop = run_in_thread(state)
    try:
        token = seeded.tokens["revert-bisect-bot"]
        forge = GitHubForge(connect(base, token, throttle=False), seeded.repo)
        policy = load(Path(__file__).resolve().parents[2] / "policies" / "example.yaml")
        found = RevertFound(scenario.culprit, "ab" * 20, "Tidy the config", "main", "patch")
        pulls_before = [p.number for p in forge.repo.get_pulls(state="all")]
        for _ in range(2):  # a retry comments once
            # nothing is pushed when the culprit is reverted already: the target's clone is only a directory
            clone = Clone(
                clones=GIT_CLONES,
                repo=SimpleNamespace(path=tmp_path),  # type: ignore[arg-type]
                remote_url=f"{base}/{seeded.repo}.git",
                token=token,
            )
            target = Target(
                forge=forge, policy=policy, repo_slug=seeded.repo, clone=clone, bisection_id=5, tests=("kl",)
            )
            facts = CulpritFacts(scenario.culprit_pr, None, None, ())
            result = Publisher(target).confirm(found, "P=0.999", facts)
            assert result == Published(None, None, None, existing_revert=None, evidence_on=scenario.culprit_pr)
        comments = [c.body for c in forge.repo.get_issue(scenario.culprit_pr).get_comments()]
        assert (
            len(comments) == 1
            and "which `abababababab` already reverts on `main`" in comments[0]
            and "bisection #5" in comments[0]
        )
        assert [p.number for p in forge.repo.get_pulls(state="all")] == pulls_before
    finally:
        stop()
