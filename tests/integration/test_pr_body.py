"""The revert PR rendered from a real bisection, parsed back as Markdown."""

import re

from markdown_it import MarkdownIt

from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import create_revert
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.domain.bisect.ledger import entries
from bot.domain.subjects import pr_number, strip_pr_number
from bot.service import setup
from bot.service.draft import PrRecord, RevertCase, draft
from bot.service.pr_body import FailingTest


def test_pr_number_from_squash_subject():
    assert pr_number("[Mamba] Fix track boundary (#12345)") == 12345
    assert pr_number("No number here") is None
    assert strip_pr_number("Fix x (#12)") == "Fix x"


def test_revert_pr_body_structure(synth, cli, tmp_path):
    repo = synth(24, 15)
    db = f"sqlite:///{tmp_path / 'pr.db'}"
    r = cli(
        "bisect",
        "--db",
        db,
        "--workers",
        "4",
        "--verify-revert",
        "--metric-regex",
        r"avg_kl_div=(?P<value>\S+)",
        "--threshold",
        "0.002",
        "--repo",
        str(repo.path),
        "--good",
        repo.good,
        "--bad",
        repo.bad,
        "--",
        *repo.command(),
    )
    assert r.code == 0, r.stderr
    store = Store(connect(db))
    loaded = setup.load(store, r.json["id"], GitRepo)
    git_repo = GitRepo(repo.path)
    revert = create_revert(git_repo, r.json["culprit"], repo.bad)  # the branch made by the run, found again
    assert revert.sha == r.json["revert"]["sha"]
    prs = {repo.culprit: PrRecord(1015, "[Mamba] Fix track boundary seqlen under overlap scheduler", "alice")}
    row = store.get(loaded.id)
    pr = draft(
        RevertCase(
            row=row,
            problem=loaded.problem,
            repo=git_repo,
            revert=revert,
            repo_slug="acme/engine",
            branch="main",
            test=FailingTest("test_decode_cache_hit", "avg_kl_div", 0.002),
            fixes=tuple(e.test for e in entries(row.tests) if e.culprit == revert.culprit),
            prs=prs,
            followups=(4242,),
        )
    )

    assert pr.title == 'Revert "[Mamba] Fix track boundary seqlen under overlap scheduler"'
    assert pr.body.splitlines()[0] == "Reverts acme/engine#1015"
    tokens = MarkdownIt("commonmark").enable("table").parse(pr.body)
    headings = [tokens[i + 1].content for i, t in enumerate(tokens) if t.type == "heading_open"]
    assert headings == [
        "Summary",
        "Why this revert",
        "Motivation",
        "Bisect",
        "Implementation",
        "A/B verification",
        "Risk",
        "Related",
    ]
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 3  # metric before/after, bisect, A/B
    cells = [t.content for t in tokens if t.type == "inline"]
    assert any("0.0003" in c for c in cells) and any("0.0065" in c for c in cells)
    assert any("**culprit**" in c for c in cells)
    assert "HEAD fails and HEAD + revert passes on every run" in pr.body
    # HEAD is BAD: BAD's own runs stood for HEAD's side, and the row shows what they read, not an empty cell
    head_row = next(line for line in pr.body.splitlines() if line.startswith("| HEAD |")).split("|")
    assert r.json["ab"]["head_from"] and r.json["ab"]["head_from"] in head_row[3], head_row
    values = [float(v) for v in head_row[4].split(",")]
    assert len(values) == len(r.json["ab"]["head_verdicts"]) and all(v > 0.002 for v in values), head_row
    # the follow-up is a plain reference: no closing keyword that would close it on merge
    assert "#4242" in pr.body and not re.search(r"(?i)\b(close[sd]?|fix(e[sd])?|resolve[sd]?)\s+#4242", pr.body)
    html = MarkdownIt("commonmark").enable("table").render(pr.body)
    assert "<details>" in html and "git bisect start" in html and "first bad commit" in html
    assert revert.sha not in pr.body.split("<details>")[1]  # the replay log holds commits of the range only
    # the case point by point, as SGLang's #31622 makes it
    case = pr.body.split("## Why this revert")[1].split("## Motivation")[0]
    points = re.findall(r"^- \*\*(.+?)\*\*", case, re.M)
    assert points == [
        "Since when",
        "Deterministic or flaky",
        "The window",
        "Why this commit",
        "The A/B",
        "The follow-up",
    ]  # no CI log here: no failure line to quote (the nightly story quotes CI's: tests/e2e/test_github_story.py)
    assert "all read 0.0065 (not a flake)" in case and f"`{repo.good[:12]}` (the last good)" in case
    assert "No other commit of the window touches these files" in case and "`service/config.py`" in case
    assert "the proper fix is being worked on in #4242; re-land #1015 together with it" in case
    assert pr.head_branch == revert.branch and pr.base_branch == "main"
    (tmp_path / "pr.md").write_text(pr.body)


HARD_TITLES = {
    "c" * 40: "[Deps] Require torch>=2.5 for the scheduler's <fast> path",
    "d" * 40: "Split on | in `parse` and *bold* ``ticks``",
    "e" * 40: "Thanks @alice and @org/kernels, cc @bob-x",
}


def _evidence(culprit_title: str):
    from bot.domain.bisect.verdict import RawResult, Verdict
    from bot.domain.outcome import AB as Proof
    from bot.service.pr_body import AB, Culprit, RevertEvidence, Row

    rows = [Row(sha, title, "bad", "0.0065", 100 + i) for i, (sha, title) in enumerate(HARD_TITLES.items())]
    return RevertEvidence(
        repo_slug="acme/engine",
        branch="main",
        culprit=Culprit("d" * 40, "c" * 40, culprit_title, 101, "carol"),
        test=FailingTest("test_kl|div", "avg_kl_div", 0.002),
        rows=rows,
        ab=AB(
            Proof(passed=True, head_verdicts=["bad", "bad"], revert_verdicts=["good", "good"]),
            "a" * 40,
            "b" * 40,
            head_runs=((Verdict.BAD, RawResult(1, 0.0065)),) * 2,
            revert_runs=((Verdict.GOOD, RawResult(0, 0.0003)),) * 2,
        ),
        files=["x.py"],
        diffstat=" x.py | 2 +-\n ```weird``` | 1 +",
        replay_log="git bisect start\n# bad: [dddd] Split on | in `parse`",
        bisection_id=7,
        confidence=0.999,
        runs=9,
        commits=240,
        before=[0.0003],
        after=[0.0065],
    )


def _plain(inline) -> str:
    assert all(c.type != "html_inline" for c in inline.children), inline.content  # no HTML from a title
    return "".join(c.content for c in inline.children if c.type in ("text", "code_inline"))


def test_titles_are_escaped_for_markdown_not_html():
    """Titles holding >, <, ', |, `, * and @mentions: the tables keep their columns, the text reads back as the
    title, no HTML entity appears, and no @login stands outside a code span (so no one is pinged)."""
    from bot.service.pr_body import render

    culprit_title = HARD_TITLES["d" * 40]
    body = render(_evidence(culprit_title), "revert-bisect/101-ddddddd").body
    assert "&gt;" not in body and "&lt;" not in body and "&#39;" not in body and "&amp;" not in body
    tokens = MarkdownIt("commonmark").enable("table").parse(body)
    tables = [i for i, t in enumerate(tokens) if t.type == "table_open"]
    assert len(tables) == 3
    for start in tables:
        end = next(i for i in range(start, len(tokens)) if tokens[i].type == "table_close")
        rows = [i for i in range(start, end) if tokens[i].type == "tr_open"]
        widths = {
            sum(
                1
                for t in tokens[r : next(j for j in range(r, end) if tokens[j].type == "tr_close")]
                if t.type in ("th_open", "td_open")
            )
            for r in rows
        }
        assert len(widths) == 1, widths  # every row has the header's column count
    bisect_start = tables[1]
    cells = [_plain(t) for t in tokens[bisect_start:] if t.type == "inline"]
    for i, title in enumerate(HARD_TITLES.values()):
        assert f"#{100 + i} {title}" in cells, (title, cells)
    summary = next(t for t in tokens if t.type == "inline" and "fails on" in t.content)
    assert f'("{culprit_title}", by @carol)' in _plain(summary)
    assert "test_kl|div" in _plain(summary)
    for t in tokens:
        for child in t.children or []:
            if child.type == "text":
                assert not re.search(r"(?<!\w)@[\w-]", child.content), child.content  # every @login in a code span
    fences = [t.content for t in tokens if t.type == "fence"]
    assert fences == [" x.py | 2 +-\n ```weird``` | 1 +\n", "git bisect start\n# bad: [dddd] Split on | in `parse`\n"]


def test_a_groups_revert_says_the_runs_searched_every_tests_range_and_gits_one_bisection_per_test():
    """The window is this test's own GOOD..BAD; the runs searched the union of the group's ranges for all its tests,
    and git is given each red test's own range (bot.domain.cost.Cost.versus_git)."""
    from dataclasses import replace

    from bot.domain.cost import cost_of
    from bot.service.pr_body import render

    cost = cost_of([600.0] * 20, [], gpus=4, ranges=[12, 40, 30])
    evidence = replace(
        _evidence("Fix x"), commits=12, searched=40, together=3, cost=cost.held(), versus_git=cost.versus_git()
    )
    body = render(evidence, "revert-bisect/101-ddddddd").body
    assert "revert-bisect tested 9 runs over 40 commits for 3 tests bisected together (" in body
    assert (
        "For comparison, `git bisect run` once per red test, each on its own range (3 tests, 12 to 40 commits): "
        "~15 runs, 10.0 GPU-hours, verifying nothing." in body
    )
    alone = render(_evidence("Fix x"), "revert-bisect/101-ddddddd").body
    assert "revert-bisect tested 9 runs over 240 commits and confirmed" in alone  # a bisection of one test
