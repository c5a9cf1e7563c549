"""The trust report (bot/domain/trust.py): counts over hand-made rows, re-land detection on a real git repository
(GitRepo.relanded), and the dashboard's /trust page and /api/trust (validated against the app's OpenAPI)."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from pathlib import Path
from types import SimpleNamespace

import pytest
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from sqlalchemy.orm import Session
from starlette.testclient import TestClient

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.models import BisectionRow
from bot.app import create_app
from bot.domain import trust
from bot.domain.errors import RepoError
from bot.domain.guards import GUARDS, Culprit, Repository, revert_refusal, start_refusal
from bot.settings import BotSettings
from bot.wiring import default_workspace
from tests.support.ledger_rows import one_test
from tests.support.policies import NOW, POLICY  # the same policy the guards are tested with

LOCAL = ("127.0.0.1", 50123)
REMOTE = ("10.0.0.5", 1234)
OK_CULPRIT = Culprit("Fix track boundary (#8924)", "ada", NOW - timedelta(days=1), ())
OK_REPO = Repository("main", None, 0)
# The guards' own messages (bot.domain.guards), so the report's reasons follow them.
DAILY_CAP = revert_refusal(POLICY, OK_CULPRIT, Repository("main", None, 2), NOW)
TOO_OLD = revert_refusal(POLICY, Culprit("x (#1)", "a", NOW - timedelta(days=8), ()), OK_REPO, NOW)


# -- the pure report ------------------------------------------------------------------------------


def refused(refusal) -> dict:
    """What bot.service.conclude stores for a refused revert."""
    return dict(revert_refused=str(refusal), revert_refused_reason=refusal.key)


def row(status, repo="octo/widgets", head="h" * 40, origin=True, good="g" * 40, bad="b" * 40, tests=None, **outcome):
    """A finished bisection as stored: of one test (its entry holds the outcome, as bot.domain.bisect.ledger writes
    it) unless `tests` gives several."""
    if tests is None:
        tests = {"t": {"state": {"phase": "done"}, "status": status, "outcome": outcome}}
    return SimpleNamespace(
        repo=f"/srv/clones/{repo}",
        status=status,
        outcome=outcome or None,
        head=head,
        origin={"repo": repo, "test": "t"} if origin else None,
        good=good,
        bad=bad,
        tests=tests,
    )


def test_a_bisection_of_several_tests_answers_for_each_and_one_revert_fixes_the_tests_its_culprit_broke():
    """The nightly's three red tests in one bisection, two culprits: three answers, two culprits flagged, two reverts
    (the first fixes two tests), each asked once whether it was re-landed; a test still running when the group was
    cancelled answers `cancelled`."""
    first, second = "1" * 40, "2" * 40
    group = row(
        "found",
        tests={
            "decode-cache-hit": {"status": "found", "outcome": {"culprit": first, "revert_pr": 9221}},
            "prefix-reuse": {"status": "found", "outcome": {"culprit": first, "revert_pr": 9221}},
            "logprob-start-len": {"status": "found", "outcome": {"culprit": second, "revert_pr": 9223}},
        },
    )
    partly = row(
        "cancelled",
        tests={
            "a": {"status": "not_reproducible", "outcome": {"message": "passes at BAD"}},
            "b": {"state": {"phase": "searching"}, "outcome": {}},
        },
    )
    asked = []
    [t] = trust.report([group, partly], lambda repo, culprit: asked.append(culprit) or False)
    assert (t.bisections, t.confirmed, t.inconclusive, t.cancelled) == (2, 3, 1, 1)
    assert t.statuses == {"found": 3, "not_reproducible": 1, "cancelled": 1}
    assert (t.flagged, t.reverts_opened, t.relanded, t.relanded_unknown) == (2, 2, 0, 0)
    assert sorted(asked) == [first, second]
    assert trust.revert_bases([group]) == {("octo/widgets", first): "h" * 40, ("octo/widgets", second): "h" * 40}


def revert(sha: str, reverted: str, pr: int | None = None) -> SimpleNamespace:
    """A revert on the branch as bot.adapters.git.reverts reads one (bot.ports.BranchRevert)."""
    return SimpleNamespace(sha=sha, subject=f'Revert "{reverted}"', pr=pr, reverted=reverted, reverted_subject="s")


def test_recall_counts_culprits_named_against_reverts_by_others_the_bot_never_named():
    rows = [
        row("found", culprit="c1", revert_pr=11, good="g1", bad="b1"),
        row("found", culprit="c1", revert_pr=11, good="g1", bad="b1"),  # the same culprit found twice: one flagged
        row("found", culprit="c2", **refused(DAILY_CAP), good="g2", bad="b2"),  # named, not reverted by the bot
        row("inconclusive", good="g3", bad="b3"),  # red, never named
        row("found", repo="octo/gizmos", culprit="z1", revert_pr=5),
    ]
    assert trust.ranges(rows) == {
        "octo/widgets": [("g1", "b1"), ("g2", "b2"), ("g3", "b3")],
        "octo/gizmos": [("g" * 40, "b" * 40)],
    }
    reverts = {
        "octo/widgets": [
            revert("r1", "c1", 11),  # the bot's own revert: flagged, not a miss
            revert("r2", "c2", 40),  # a human reverted what the bot named: not a miss
            revert("r3", "m1", 41),  # a human reverted a commit of a red range the bot never named: a miss
            revert("r4", "m1", 42),  # reverted again: still one miss
        ]
    }
    gizmos, widgets = trust.report(rows, lambda repo, culprit: False, reverts)  # sorted by name
    assert (widgets.flagged, widgets.missed, widgets.misses_known) == (2, 1, True)
    assert widgets.recall == 2 / 3
    missed = [i for i in widgets.incidents if i.kind == "missed"]
    assert [(i.culprit, i.revert, i.pr) for i in missed] == [("m1", "r3", 41)]
    assert {i.culprit for i in widgets.incidents if i.kind == "flagged"} == {"c1", "c2"}
    assert (gizmos.flagged, gizmos.missed, gizmos.misses_known, gizmos.recall) == (1, 0, False, None)  # no clone
    total = trust.build(rows, lambda repo, culprit: False, reverts).total
    assert (total.flagged, total.missed, total.misses_known) == (3, 1, True)
    assert trust.report(rows, lambda repo, culprit: None)[1].recall is None  # reverts unknown: no recall


def test_a_revert_relanded_unchanged_counts_against_precision_and_never_for_recall():
    """Precision and recall each from its own events (PyTorch's: precision = right / reverts made, recall = caught /
    regressions reverted by anyone). The bot reverted c1 and c2 (both merged on the branch) and named neither m1, a
    human revert nobody re-landed, nor h1, a human revert re-landed unchanged (not needed: no regression)."""
    rows = [
        row("found", culprit="c1", revert_pr=11),
        row("found", culprit="c2", revert_pr=12),
    ]
    branch = {"octo/widgets": [revert("r1", "c1", 11), revert("r2", "c2", 12), revert("r3", "m1"), revert("r4", "h1")]}

    def report(relanded: set[str]) -> trust.TrustRow:
        (only,) = trust.report(rows, lambda repo, culprit: culprit in relanded, branch)
        return only

    honest = report({"h1"})  # the bot's reverts held
    assert (honest.reverts_opened, honest.relanded, honest.precision) == (2, 0, 1.0)
    assert (honest.regressions, honest.caught, honest.missed, honest.recall) == (3, 2, 1, 2 / 3)

    wrong = report({"h1", "c1"})  # c1 came back unchanged: the bot's revert of it was a false positive
    assert (wrong.reverts_opened, wrong.relanded, wrong.precision, wrong.false_positive_rate) == (2, 1, 0.5, 0.5)
    assert (wrong.regressions, wrong.caught, wrong.missed, wrong.recall) == (2, 1, 1, 1 / 2)  # not a hit, nor a miss
    assert wrong.flagged == 2  # still named: naming is not catching
    assert [(i.kind, i.culprit) for i in wrong.incidents if i.kind != "flagged"] == [
        ("relanded", "c1"),
        ("missed", "m1"),
    ]

    unknown = trust.report(rows, lambda repo, culprit: None, branch)[0]  # nothing could be told: taken at its word
    assert (unknown.precision, unknown.regressions, unknown.caught) == (None, 4, 2)
    assert trust.revert_bases(rows, branch) == {
        ("octo/widgets", "c1"): "h" * 40,  # the bot's: the head its revert was made on
        ("octo/widgets", "c2"): "h" * 40,
        ("octo/widgets", "m1"): "r3",  # someone else's: the revert on the branch
        ("octo/widgets", "h1"): "r4",
    }


def test_a_relanded_revert_is_an_incident_behind_the_false_positive_rate():
    (widgets,) = trust.report(
        [row("found", culprit="c1", revert_pr=11, culprit_subject="Faster (#10)")], lambda r, c: True
    )
    assert [(i.kind, i.culprit, i.pr) for i in widgets.incidents] == [("flagged", "c1", 11), ("relanded", "c1", 11)]


def test_report_counts_per_repository():
    rows = [
        row("found", culprit="c1", revert_pr=11, revert_pr_url="https://x/pull/11"),  # re-landed: a false positive
        row("found", culprit="c2", revert_pr=12),  # not re-landed
        row("found", culprit="c3", revert_pr="#13"),  # unknown
        row("found", culprit="c4", **refused(DAILY_CAP)),
        row("found", culprit="c5", **refused(DAILY_CAP)),
        row("found", culprit="c6", **refused(TOO_OLD)),
        row("found", culprit="c7"),  # found, A/B failed or dry run: neither opened nor refused
        row("ambiguous", candidates=["a", "b"]),
        row("inconclusive"),
        row("no_culprit"),
        row("untestable"),
        row("not_reproducible"),
        row("cancelled"),
        row(None),  # running: not counted
        row("found", repo="octo/gizmos", culprit="g1", revert_pr=5),
        row("found", repo="octo/gizmos", revert_pr=6),  # no culprit sha: unknown, relanded never asked
        row("good_fails", repo="octo/gizmos"),
        row("found", repo="octo/gizmos", culprit="g2", revert_refused="some guard this version does not know"),
        row("untestable", repo="/home/ada/src/local", origin=False),  # a CLI bisection: named by its path
    ]
    answers = {("octo/widgets", "c1"): True, ("octo/widgets", "c2"): False, ("octo/gizmos", "g1"): True}
    asked = []

    def relanded(repo, culprit):
        asked.append((repo, culprit))
        return answers.get((repo, culprit))

    rows_out = trust.report(rows, relanded)
    assert [r.repository for r in rows_out] == ["/srv/clones//home/ada/src/local", "octo/gizmos", "octo/widgets"]
    local, gizmos, widgets = rows_out
    assert sorted(asked) == [
        ("octo/gizmos", "g1"),
        ("octo/widgets", "c1"),
        ("octo/widgets", "c2"),
        ("octo/widgets", "c3"),
    ]

    assert (widgets.bisections, widgets.confirmed, widgets.inconclusive, widgets.cancelled) == (13, 7, 5, 1)
    assert widgets.statuses == {
        "found": 7,
        "ambiguous": 1,
        "inconclusive": 1,
        "no_culprit": 1,
        "untestable": 1,
        "not_reproducible": 1,
        "cancelled": 1,
    }
    assert (widgets.reverts_opened, widgets.relanded, widgets.relanded_unknown, widgets.relanded_known) == (3, 1, 1, 2)
    assert widgets.false_positive_rate == 0.5
    assert widgets.confirmed_rate == 7 / 12
    assert widgets.refused == {"daily_cap": 2, "culprit_too_old": 1} and widgets.reverts_refused == 3

    assert (gizmos.bisections, gizmos.confirmed, gizmos.inconclusive, gizmos.cancelled) == (4, 3, 1, 0)
    assert (gizmos.reverts_opened, gizmos.relanded, gizmos.relanded_unknown) == (2, 1, 1)
    assert gizmos.false_positive_rate == 1.0
    assert gizmos.refused == {"other": 1}

    assert (
        local.bisections,
        local.inconclusive,
        local.reverts_opened,
        local.false_positive_rate,
        local.confirmed_rate,
    ) == (1, 1, 0, None, 0.0)

    report = trust.build(rows, relanded)
    total = report.total
    assert (total.bisections, total.confirmed, total.inconclusive, total.cancelled) == (18, 10, 7, 1)
    assert (total.reverts_opened, total.relanded, total.relanded_unknown, total.reverts_refused) == (5, 2, 2, 4)
    assert total.refused == {"daily_cap": 2, "culprit_too_old": 1, "other": 1}


def test_no_rows_and_all_unknown():
    assert trust.report([], lambda repo, culprit: True) == []
    only = trust.report([row("found", culprit="c", revert_pr=1)], lambda repo, culprit: None)[0]
    assert (only.reverts_opened, only.relanded, only.relanded_unknown, only.false_positive_rate) == (1, 0, 1, None)


def test_each_guard_refusal_is_counted_under_its_key():
    messages = {
        "kill_switch": revert_refusal(POLICY, OK_CULPRIT, Repository("main", 12, 0), NOW),
        "branch": start_refusal(POLICY, None, "release/v1"),
        "culprit_is_revert": revert_refusal(POLICY, Culprit('Revert "x" (#2)', "a", NOW, ()), OK_REPO, NOW),
        "never_revert_author": revert_refusal(POLICY, Culprit("Bump (#3)", "dependabot[bot]", NOW, ()), OK_REPO, NOW),
        "opt_out_label": revert_refusal(POLICY, Culprit("x (#4)", "a", NOW, ("no-revert",)), OK_REPO, NOW),
        "culprit_too_old": TOO_OLD,
        "daily_cap": DAILY_CAP,
    }
    assert {key: trust.refusal_reason(refused(r)) for key, r in messages.items()} == {key: key for key in messages}
    assert set(messages) == set(GUARDS)  # every guard is counted under its own key
    assert trust.refusal_reason({"revert_refused": "the moon is full"}) == "other"
    assert trust.refusal_reason({"revert_refused": "x", "revert_refused_reason": "moon"}) == "other"


def test_revert_bases_are_the_heads_reverts_were_made_on():
    rows = [
        row("found", culprit="c1", revert_pr=1, head="a" * 40),
        row("found", culprit="c1", revert_pr=2, head="b" * 40),
        row("found", culprit="c2", **refused(DAILY_CAP)),
        row("found", culprit="c3", revert_pr=3, head=None),
    ]
    assert trust.revert_bases(rows) == {("octo/widgets", "c1"): "a" * 40}


# -- re-lands in a real repository -----------------------------------------------------------------


def git(path: Path, *args: str) -> str:
    return subprocess.run(["git", "-C", str(path), *args], check=True, capture_output=True, text=True).stdout.strip()


def commit_file(path: Path, name: str, text: str, message: str) -> str:
    (path / name).write_text(text)
    git(path, "add", name)
    git(path, "commit", "-q", "-m", message)
    return git(path, "rev-parse", "HEAD")


@pytest.fixture
def history(tmp_path):
    """main: base, the culprit, more work, H (where the revert is made), the revert, more work."""
    path = tmp_path / "upstream"
    path.mkdir()
    git(path, "init", "-q", "-b", "main")
    commit_file(path, "kernel.py", "def kl():\n    return 0.0001\n", "base")
    culprit = commit_file(path, "kernel.py", "def kl():\n    return 0.0065\n", "Faster kernel (#10)")
    other = commit_file(path, "README", "docs\n", "Docs (#11)")
    head = commit_file(path, "notes.txt", "one\n", "Notes (#12)")
    git(path, "revert", "--no-edit", culprit)
    commit_file(path, "notes.txt", "one\ntwo\n", "More notes (#14)")
    return SimpleNamespace(path=path, culprit=culprit, other=other, head=head)


def test_an_identical_reland_is_found(history):
    path = history.path
    assert GitRepo(path).relanded(history.culprit, history.head, "main") is False  # reverted, not re-landed yet
    git(path, "cherry-pick", history.culprit)  # the same change again, unchanged
    commit_file(path, "notes.txt", "one\ntwo\nthree\n", "Later (#16)")
    assert GitRepo(path).relanded(history.culprit, history.head, "main") is True
    assert GitRepo(path).relanded(history.other, history.head, "main") is False  # never reverted, never re-landed


def test_a_modified_reland_is_not_unchanged(history):
    path = history.path
    commit_file(path, "kernel.py", "def kl():\n    return 0.0002  # fixed\n", "Reland faster kernel, fixed (#15)")
    assert GitRepo(path).relanded(history.culprit, history.head, "main") is False


def test_a_reland_merged_as_a_pr_counts(history):
    """GitHub's merge button: the re-land is a merge commit on main, compared by its diff to the first parent."""
    path = history.path
    git(path, "checkout", "-q", "-b", "reland")
    git(path, "cherry-pick", history.culprit)
    git(path, "checkout", "-q", "main")
    git(path, "merge", "--no-ff", "-q", "-m", "Merge pull request #17 from ada/reland", "reland")
    assert GitRepo(path).relanded(history.culprit, history.head, "main") is True


def test_before_the_revert_does_not_count(history):
    """The culprit is not its own re-land, even when since..ref reaches back past it."""
    assert GitRepo(history.path).relanded(history.culprit, f"{history.culprit}~1", "main") is False


def test_reverts_of_a_bisected_range_on_the_branch_by_message_and_by_quoted_subject(history):
    from bot.adapters.git.reverts import reverts_of_range

    path = history.path
    base = git(path, "rev-parse", f"{history.culprit}~1")
    # a squash-merged revert PR says only `Revert "<subject>" (#N)`, as SGLang's #31622 did
    commit_file(path, "README", "", 'Revert "Docs (#11)" (#20)')
    found = reverts_of_range(GitRepo(path), base, history.head, "main")
    assert [(r.reverted, r.pr) for r in found] == [(history.other, 20), (history.culprit, None)]
    assert found[1].subject == 'Revert "Faster kernel (#10)"' and found[1].reverted_subject == "Faster kernel (#10)"
    # a range the revert's commit is not in: nothing
    assert reverts_of_range(GitRepo(path), history.other, history.head, "main") == []


def test_unknown_commits_raise(history):
    with pytest.raises(RepoError):
        GitRepo(history.path).relanded("0" * 40, history.head, "main")


# -- the dashboard ----------------------------------------------------------------------------------


def check(openapi: OpenAPI, response, pattern: str) -> dict:
    """Validate a real response against the app's own OpenAPI description."""
    path = response.request.url.path
    request = MockRequest("http://testserver", "get", path, path_pattern=pattern)
    openapi.validate_response(
        request,
        MockResponse(
            response.content,
            status_code=response.status_code,
            content_type=response.headers["content-type"].split(";")[0],
        ),
    )
    return response.json()


def populate(history, workspace: Path, db: str) -> None:
    """octo/widgets has a clone in the workspace (its culprit was re-landed unchanged, another was not);
    octo/gizmos has none, so its revert's fate is unknown."""
    git(history.path, "cherry-pick", history.culprit)
    kept = commit_file(history.path, "lib.py", "x = 1\n", "Keep (#20)")
    kept_head = commit_file(history.path, "other.py", "y = 2\n", "After keep (#21)")
    git(history.path, "revert", "--no-edit", kept)
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(history.path), str(workspace / "octo__widgets")], check=True
    )

    def add(status, repo="octo/widgets", head=None, **outcome):
        return BisectionRow(
            repo=str(workspace / repo.replace("/", "__")),
            good_rev="g",
            bad_rev="b",
            good="a" * 40,
            bad="b" * 40,
            command=["./t.sh"],
            settings={},
            phase="done" if status else "searching",
            status=status,
            outcome=outcome or None,
            head=head,
            origin={"repo": repo, "test": "test_kl"},
            tests=one_test(status, outcome, "test_kl"),
        )

    with Session(connect(db)) as s:
        s.add_all(
            [
                add(
                    "found",
                    head=history.head,
                    culprit=history.culprit,
                    revert_pr=31,
                    revert_pr_url="https://github.example/octo/widgets/pull/31",
                ),
                add("found", head=kept_head, culprit=kept, revert_pr=32),
                add("found", culprit="c" * 40, **refused(DAILY_CAP)),
                add("ambiguous"),
                add("untestable"),
                add("cancelled"),
                add(None),
                add("found", repo="octo/gizmos", head="d" * 40, culprit="e" * 40, revert_pr=7),
                add("found", repo="octo/gizmos", culprit="f" * 40, **refused(TOO_OLD)),
                add("inconclusive", repo="octo/gizmos"),
            ]
        )
        s.commit()


@pytest.fixture
def dashboard(tmp_path, history):
    workspace = tmp_path / "workspace"
    db = f"sqlite:///{tmp_path / 'store.db'}"
    populate(history, workspace, db)
    app = create_app(BotSettings(webhook_secret="whsec-trust-tests", db=db, workspace=workspace), handlers={})
    return SimpleNamespace(app=app, client=TestClient(app, client=LOCAL), openapi=OpenAPI.from_dict(app.openapi()))


def test_api_trust_matches_the_schema_and_counts(dashboard):
    data = check(dashboard.openapi, dashboard.client.get("/api/trust"), "/api/trust")
    by_repo = {r["repository"]: r for r in data["repositories"]}
    assert list(by_repo) == ["octo/gizmos", "octo/widgets"]
    widgets, gizmos = by_repo["octo/widgets"], by_repo["octo/gizmos"]
    assert (widgets["bisections"], widgets["confirmed"], widgets["inconclusive"], widgets["cancelled"]) == (6, 3, 2, 1)
    assert (widgets["reverts_opened"], widgets["relanded"], widgets["relanded_unknown"], widgets["relanded_known"]) == (
        2,
        1,
        0,
        True,
    )
    assert widgets["false_positive_rate"] == 0.5
    assert widgets["refused"] == [{"reason": "daily_cap", "label": trust.REASON_LABELS["daily_cap"], "count": 1}]
    assert (gizmos["reverts_opened"], gizmos["relanded"], gizmos["relanded_unknown"], gizmos["relanded_known"]) == (
        1,
        0,
        1,
        False,
    )
    assert gizmos["false_positive_rate"] is None
    assert [(c["reason"], c["count"]) for c in gizmos["refused"]] == [("culprit_too_old", 1)]
    total = data["total"]
    assert (
        total["bisections"],
        total["confirmed"],
        total["inconclusive"],
        total["reverts_opened"],
        total["relanded"],
        total["relanded_unknown"],
        total["reverts_refused"],
    ) == (9, 5, 3, 3, 1, 1, 2)


def test_api_trust_precision_and_recall_from_a_real_branch(tmp_path):
    """The whole path (bot.web.routes -> RelandedInClones -> bot.domain.trust) over a real clone: the bot reverted c1
    (re-landed unchanged since: a false positive) and c2 (squash-merged, held); people reverted c3 and c5 (misses)
    and c4, then re-landed c4 unchanged (not needed: no regression)."""
    up = tmp_path / "upstream"
    up.mkdir()
    git(up, "init", "-q", "-b", "main")
    base = commit_file(up, "base.txt", "0\n", "base")
    c1 = commit_file(up, "kernel.py", "kl = 0.0065\n", "Faster kernel (#10)")
    c2 = commit_file(up, "README", "docs\n", "Docs (#11)")
    c3 = commit_file(up, "cache.py", "on = 1\n", "Cache (#12)")
    c4 = commit_file(up, "notes.txt", "one\n", "Notes (#13)")
    c5 = commit_file(up, "sched.py", "fair = 0\n", "Scheduler (#14)")
    for sha in (c1, c3, c4, c5):
        git(up, "revert", "--no-edit", sha)  # `This reverts commit <sha>`
    git(up, "rm", "-q", "README")
    git(up, "commit", "-q", "-m", 'Revert "Docs (#11)" (#32)')  # the bot's revert PR, squash-merged
    git(up, "cherry-pick", c1)  # re-landed unchanged
    git(up, "cherry-pick", c4)
    workspace = tmp_path / "workspace"
    subprocess.run(["git", "clone", "-q", "--no-checkout", str(up), str(workspace / "octo__widgets")], check=True)
    db = f"sqlite:///{tmp_path / 'store.db'}"

    def found(culprit: str, pr: int) -> BisectionRow:
        return BisectionRow(
            repo=str(workspace / "octo__widgets"),
            good_rev=base,
            bad_rev=c5,
            good=base,
            bad=c5,
            command=["./t.sh"],
            settings={},
            phase="done",
            status="found",
            outcome={"culprit": culprit, "revert_pr": pr},
            head=c5,
            origin={"repo": "octo/widgets", "test": "test_kl"},
            tests=one_test("found", {"culprit": culprit, "revert_pr": pr}, "test_kl"),
        )

    with Session(connect(db)) as s:
        s.add_all([found(c1, 31), found(c2, 32)])
        s.commit()
    app = create_app(BotSettings(webhook_secret="whsec-trust-tests", db=db, workspace=workspace), handlers={})
    client = TestClient(app, client=LOCAL)
    data = check(OpenAPI.from_dict(app.openapi()), client.get("/api/trust"), "/api/trust")
    (widgets,) = data["repositories"]
    assert (widgets["reverts_opened"], widgets["relanded"], widgets["precision"]) == (2, 1, 0.5)
    assert (widgets["regressions"], widgets["caught"], widgets["missed"], widgets["misses_known"]) == (3, 1, 2, True)
    assert widgets["recall"] == 1 / 3 and widgets["flagged"] == 2
    assert {(i["kind"], i["culprit"]) for i in widgets["incidents"] if i["kind"] != "flagged"} == {
        ("relanded", c1),
        ("missed", c3),
        ("missed", c5),
    }
    html = client.get("/trust").text
    row_at = html.index('data-repository="octo/widgets"')
    for col, shown in (("precision", "50%"), ("regressions", "3"), ("caught", "1"), ("recall", "33%")):
        at = html.index(f'data-col="{col}"', row_at)
        assert html[html.index(">", at) + 1 : html.index("</td>", at)] == shown


def test_openapi_describes_api_trust(dashboard):
    spec = dashboard.app.openapi()
    ok = spec["paths"]["/api/trust"]["get"]["responses"]["200"]["content"]["application/json"]["schema"]
    assert ok["$ref"].endswith("/TrustReportView")
    assert "/trust" not in spec["paths"]  # the page stays out of the API description


def test_trust_page_renders_the_numbers(dashboard):
    r = dashboard.client.get("/trust")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    html = r.text

    def cell(repo: str, col: str) -> str:
        start = html.index(f'data-repository="{repo}"')
        cell_at = html.index(f'data-col="{col}"', start)
        return html[html.index(">", cell_at) + 1 : html.index("</td>", cell_at)]

    assert cell("octo/widgets", "reverts_opened") == "2"
    assert cell("octo/widgets", "relanded") == "1"
    assert cell("octo/widgets", "false_positive_rate") == "50%"
    assert cell("octo/widgets", "confirmed") == "3" and cell("octo/widgets", "inconclusive") == "2"
    assert cell("octo/widgets", "reverts_refused") == "1"
    assert cell("octo/gizmos", "reverts_opened") == "1"
    assert "unknown" in cell("octo/gizmos", "relanded")
    assert cell("all repositories", "reverts_opened") == "3"
    assert 'data-reason="daily_cap"' in html and 'data-reason="culprit_too_old"' in html
    assert trust.REASON_LABELS["culprit_too_old"] in html


def test_list_page_links_to_trust(dashboard):
    assert '<a href="/trust">Trust</a>' in dashboard.client.get("/").text


def test_trust_needs_the_same_access_as_the_dashboard(dashboard):
    remote = TestClient(dashboard.app, client=REMOTE)
    assert remote.get("/trust").status_code == 403
    r = remote.get("/api/trust")
    assert r.status_code == 403 and "REVERT_BISECT_DASHBOARD_TOKEN" in r.json()["detail"]
    check(dashboard.openapi, r, "/api/trust")


def test_without_a_workspace_setting_the_default_clone_directory_is_used(tmp_path, history):
    """settings.workspace None: the clones are looked for where the bot makes them (bot.wiring.default_workspace)."""
    settings = BotSettings(webhook_secret="whsec-trust-tests", db=f"sqlite:///{tmp_path / 's.db'}")
    workspace = default_workspace(settings)
    assert workspace.is_relative_to(tmp_path / "xdg-cache")  # conftest points XDG_CACHE_HOME into tmp_path
    populate(history, workspace, settings.db)
    data = TestClient(create_app(settings, handlers={}), client=LOCAL).get("/api/trust").json()
    widgets = next(r for r in data["repositories"] if r["repository"] == "octo/widgets")
    assert (widgets["reverts_opened"], widgets["relanded"], widgets["relanded_unknown"]) == (2, 1, 0)


def test_relanded_answers_are_kept_until_the_branch_moves(tmp_path, history, monkeypatch):
    """The trust page runs git once per (culprit, branch head): a page load on an unchanged clone asks nothing."""
    from bot.adapters.git.relanded import RelandedInClones

    git(history.path, "cherry-pick", history.culprit)
    workspace = tmp_path / "ws"
    subprocess.run(
        ["git", "clone", "-q", "--no-checkout", str(history.path), str(workspace / "octo__widgets")], check=True
    )
    calls = []
    real = GitRepo.relanded
    monkeypatch.setattr(GitRepo, "relanded", lambda self, *a: calls.append(a) or real(self, *a))
    reader = RelandedInClones(workspace)
    bases = {("octo/widgets", history.culprit): history.head}
    for _ in range(3):
        assert reader(bases)("octo/widgets", history.culprit) is True
    assert len(calls) == 1
    commit_file(history.path, "later.txt", "x\n", "Later (#30)")
    git(workspace / "octo__widgets", "fetch", "-q", "origin", "+refs/heads/*:refs/remotes/origin/*")
    assert reader(bases)("octo/widgets", history.culprit) is True
    assert len(calls) == 2  # the branch moved: asked again
    assert reader({})("octo/widgets", history.culprit) is None  # no base: not asked
