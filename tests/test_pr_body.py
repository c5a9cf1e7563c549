"""The revert PR rendered from a real bisection, parsed back as Markdown."""

import re

from markdown_it import MarkdownIt

from bot.gitrepo import GitRepo
from bot.orchestrator import setup
from bot.revert.draft import PrRecord, draft
from bot.revert.git_revert import create_revert
from bot.revert.pr_body import FailingTest, pr_number, strip_pr_number
from bot.store.db import connect
from bot.store.store import Store


def test_pr_number_from_squash_subject():
    assert pr_number("[Mamba] Fix track boundary (#12345)") == 12345
    assert pr_number("No number here") is None
    assert strip_pr_number("Fix x (#12)") == "Fix x"


def test_revert_pr_body_structure(synth, cli, tmp_path):
    repo = synth(24, 15)
    db = f"sqlite:///{tmp_path / 'pr.db'}"
    r = cli("bisect", "--db", db, "--workers", "4", "--verify-revert", "--metric-regex", r"avg_kl_div=(?P<value>\S+)", "--threshold", "0.002",
            "--repo", str(repo.path), "--good", repo.good, "--bad", repo.bad, "--", *repo.command())
    assert r.code == 0, r.stderr
    store = Store(connect(db))
    loaded = setup.load(store, r.json["id"])
    git_repo = GitRepo(repo.path)
    revert = create_revert(git_repo, r.json["culprit"], repo.bad)  # the branch made by the run, found again
    assert revert.sha == r.json["revert"]["sha"]
    prs = {repo.culprit: PrRecord(1015, "[Mamba] Fix track boundary seqlen under overlap scheduler", "alice")}
    pr = draft(store.get(loaded.id), loaded.problem, git_repo, revert, repo_slug="acme/engine", branch="main",
               test=FailingTest("test_decode_cache_hit", "avg_kl_div", 0.002), prs=prs, followups=[4242])

    assert pr.title == 'Revert "[Mamba] Fix track boundary seqlen under overlap scheduler"'
    assert pr.body.splitlines()[0] == "Reverts acme/engine#1015"
    tokens = MarkdownIt("commonmark").enable("table").parse(pr.body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == ["Summary", "Motivation", "Bisect", "Implementation", "A/B verification", "Risk", "Related"]
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 3  # metric before/after, bisect, A/B
    cells = [t.content for t in tokens if t.type == "inline"]
    assert any("0.0003" in c for c in cells) and any("0.0065" in c for c in cells)
    assert any("**culprit**" in c for c in cells)
    assert "HEAD fails and HEAD + revert passes on every run" in pr.body
    # the follow-up is a plain reference: no closing keyword that would close it on merge
    assert "#4242" in pr.body and not re.search(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\s+#4242", pr.body)
    html = MarkdownIt("commonmark").enable("table").render(pr.body)
    assert "<details>" in html and "git bisect start" in html and "first bad commit" in html
    assert revert.sha not in pr.body.split("<details>")[1]  # the replay log holds commits of the range only
    assert pr.head_branch == revert.branch and pr.base_branch == "main"
    (tmp_path / "pr.md").write_text(pr.body)
