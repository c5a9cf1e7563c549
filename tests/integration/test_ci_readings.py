"""CI's readings through the service: stored with their test (its ledger entry, never as steps), learnt from by
the engine, never dispatched, and shown as CI's in the revert PR's bisect table -- against real git and a real
store, the steps run by the local pool."""

from __future__ import annotations

import io

from markdown_it import MarkdownIt
from rich.console import Console

from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import create_revert
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli.session import run_bisection
from bot.domain.bisect.ledger import entries
from bot.domain.requests import CiReading
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.draft import RevertCase, draft
from bot.service.pr_body import FailingTest


def _bisect(repo, tmp_path, name: str, ci: list[CiReading]):
    store = Store(connect(f"sqlite:///{tmp_path / name}.db"))
    config = BisectConfig(command=tuple(repo.command()), workers=2, verify_revert=True)
    loaded = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, config, ci=ci)
    quiet = Console(file=io.StringIO())
    code, report = run_bisection(store, loaded, quiet, quiet)
    return code, report, store, loaded


def test_ci_readings_narrow_the_range_and_show_as_cis_in_the_pr(synth, tmp_path):
    repo = synth(40, 29)
    every = [8, 16, 24, 32]  # scheduled runs every 8 commits: passed before the culprit, failed after
    ci = [CiReading(repo.shas[i - 1], i < 29, None, f"https://github.com/o/r/actions/runs/{900 + i}") for i in every]
    code, report, store, loaded = _bisect(repo, tmp_path, "ci", ci)
    plain_code, plain, plain_store, _ = _bisect(repo, tmp_path, "plain", [])
    assert code == plain_code == 0 and report.culprit == plain.culprit == repo.culprit

    row = store.get(loaded.id)
    (test,) = entries(row.tests)
    assert list(test.ci) == ci  # kept with the test they read
    runner_steps = list(row.steps)
    assert {s.kind for s in runner_steps} <= {"calibrate", "search", "confirm", "ab_head", "ab_revert"}
    tested = {s.sha for s in runner_steps if s.kind == "search"}
    assert tested and all(repo.shas.index(sha) + 1 in range(25, 33) for sha in tested)  # between CI's 24 and 32
    assert len(runner_steps) < len(plain_store.get(plain.id).steps)  # fewer runs spent than without CI's readings
    culprit_pos = repo.shas.index(repo.culprit)
    assert {repo.culprit, repo.shas[culprit_pos - 1]} <= {s.sha for s in runner_steps}  # the runner tested both

    git_repo = GitRepo(repo.path)
    pr = draft(
        RevertCase(
            row=row,
            problem=loaded.problem,
            repo=git_repo,
            revert=create_revert(git_repo, repo.culprit, repo.bad),
            repo_slug="o/r",
            branch="main",
            test=FailingTest("test_x", None, None),
            fixes=tuple(e.test for e in entries(row.tests) if e.culprit == repo.culprit),
        )
    )
    cells = [t.content for t in MarkdownIt("commonmark").enable("table").parse(pr.body) if t.type == "inline"]
    assert sum("CI: good" in c or "CI: bad" in c for c in cells) == len(ci)  # one verdict cell per CI reading
    assert f", read {len(ci)} of CI's scheduled runs inside the range for free," in pr.body
    assert f"tested {len(runner_steps)} runs" in pr.body
    # git is given what CI's readings leave, as a person would: passed at 24, failed at 32 -> 8 commits, 3 halvings
    assert "`git bisect run` on the same range: ~3 runs" in pr.body
