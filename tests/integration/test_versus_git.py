"""`git bisect run` beside a bisection is given what a person at a terminal would have (issue 33, item 4): each red
test's own GOOD (its last pass) and BAD, narrowed by CI's readings of that test -- against a real store and git."""

from __future__ import annotations

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.domain.cost import cost_of_steps
from bot.domain.requests import CiReading, Member
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.group_rows import git_ranges

URL = "https://github.com/o/r/actions/runs/900"


def _created(repo, tmp_path, good_at: int = 0, ci=(), members=()):
    store = Store(connect(f"sqlite:///{tmp_path / 'versus.db'}"))
    good = repo.shas[good_at - 1] if good_at else repo.good
    config = BisectConfig(command=tuple(repo.command()))
    loaded = setup.create(store, GitRepo(repo.path), good, repo.bad, config, ci=ci, members=members)
    return store.get(loaded.id), loaded.problem


def test_the_nightly_paths_range_is_the_tests_own_last_pass_to_the_red_run(synth, tmp_path):
    # scoped as the nightly path scopes it: GOOD the run the test last passed in (commit 10), BAD the red run (40);
    # CI's readings of both come with it
    repo = synth(40, 29)
    readings = [CiReading(repo.shas[9], True, None, URL), CiReading(repo.shas[39], False, None, URL)]
    row, problem = _created(repo, tmp_path, good_at=10, ci=readings)
    assert git_ranges(row, problem) == [30]
    assert cost_of_steps(row.steps, 4, git_ranges(row, problem)).git_runs == 5


def test_cis_readings_inside_the_range_narrow_gits_range_as_they_would_a_persons(synth, tmp_path):
    repo = synth(40, 29)
    # the test passed in a run at commit 24 and failed in one at 32: `git bisect good`/`bad` those -> 8 commits
    readings = [CiReading(repo.shas[23], True, None, URL), CiReading(repo.shas[31], False, None, URL)]
    row, problem = _created(repo, tmp_path, ci=readings)
    assert git_ranges(row, problem) == [8]


def test_a_group_costs_git_one_bisection_per_red_test_each_from_its_own_last_pass(synth, tmp_path):
    repo = synth(40, 29)
    members = [
        Member("test_a", repo.shas[17]),  # its own last pass at commit 18: 22 commits
        Member(  # the union's GOOD, CI read it passing at 24 and failing at 32: 8 commits
            "test_b",
            repo.good,
            ci=(CiReading(repo.shas[23], True, None, URL), CiReading(repo.shas[31], False, None, URL)),
        ),
    ]
    row, problem = _created(repo, tmp_path, members=members)
    assert len(problem.graph) == 40  # the union, which the group's runs search
    assert git_ranges(row, problem) == [22, 8]
    cost = cost_of_steps(row.steps, 4, git_ranges(row, problem))
    assert cost.git_runs == 5 + 3
    assert "`git bisect run` once per red test, each on its own range (2 tests, 8 to 22 commits): ~8 runs" in (
        cost.versus_git()
    )


def test_a_groups_revert_pr_gives_git_one_bisection_per_red_test_and_its_window_is_the_tests_own(synth, cli, tmp_path):
    """A JUnit group through the real CLI (tests/integration/test_junit_group.py's history: commit 20 breaks two
    tests, 45 a third, a fourth failed once at BAD, a fifth is green), then the revert PR of commit 20's culprit."""
    from bot.adapters.git.revert import create_revert
    from bot.service.draft import RevertCase, draft
    from bot.service.pr_body import FailingTest
    from tests.integration.test_junit_group import KL4, KL8, SCRIPT, env_for
    from tests.support.cli import bisect_args

    repo = synth(64, 20)
    script = tmp_path / "junit_test.py"
    script.write_text(SCRIPT)
    script.chmod(0o755)
    db = f"sqlite:///{tmp_path / 'group.db'}"
    r = cli(
        *bisect_args(repo, "--db", db, "--junit", "report.xml", command=[str(script)]), env=env_for(tmp_path, repo, "g")
    )
    assert r.code == 0, r.stderr
    store = Store(connect(db))
    loaded = setup.load(store, r.json["id"], GitRepo)
    git_repo = GitRepo(repo.path)
    pr = draft(
        RevertCase(
            row=store.get(loaded.id),
            problem=loaded.problem,
            repo=git_repo,
            revert=create_revert(git_repo, repo.culprit, repo.bad),
            repo_slug="o/r",
            branch="main",
            test=FailingTest(KL8, None, None),
            fixes=(KL8, KL4),
        )
    )
    # four tests red at BAD's report were bisected together (the green one by no one): git once per test, 6 each
    assert f"tested {r.json['runs']} runs over 64 commits for 4 tests bisected together (" in pr.body
    assert (
        "For comparison, `git bisect run` once per red test, each on its own range (4 tests, 64 commits): ~24 runs"
        in (pr.body)
    )
    assert f"`{repo.good[:12]}` (the last good) .. `{repo.bad[:12]}` (the first seen failing): 64 commits." in pr.body
