"""The final status comment says what publishing skipped on the way (a reviewer GitHub refused) or why GitHub
refused the revert branch, and names a best guess as one: the bisection's thread learns it without the dashboard."""

from __future__ import annotations

from bot.adapters.store.models import BisectionRow
from bot.domain.bisect.model import Problem
from bot.domain.bisect.simulate import linear_graph
from bot.service.status import render_status


def row(**outcome) -> BisectionRow:
    return BisectionRow(id=7, status="found", outcome={"message": "found the culprit", **outcome}, steps=[])


def test_a_skipped_reviewer_is_noted_under_the_revert_pr():
    graph, good, bad = linear_graph(8)
    note = (
        "review not requested from outside-contributor: Reviews may only be requested from collaborators. "
        "One or more of the users or teams you specified is not a collaborator of the o/r repository."
    )
    text = render_status("kl", Problem(graph, good, bad), None, row(notes=[note]), "#12")
    lines = text.splitlines()
    at = lines.index("Revert PR: #12")
    assert lines[at + 1].startswith("- review not requested from outside-contributor: Reviews may only be requested")
    assert "not a collaborator of the o/r repository" in lines[at + 1]


def test_without_notes_nothing_is_added():
    graph, good, bad = linear_graph(8)
    text = render_status("kl", Problem(graph, good, bad), None, row(), "#12")
    assert "review not requested" not in text and "- " not in text.split("Revert PR: #12")[1].split("runs")[0]


def test_a_refused_push_is_the_revert_pr_line():
    graph, good, bad = linear_graph(8)
    why = (
        "not opened: GitHub refused the push of revert-bisect/12-abcdef0: the revert changes "
        ".github/workflows/ci.yml, a workflow file, and the bot's credentials lack the `workflows` permission"
    )
    text = render_status("kl", Problem(graph, good, bad), None, row(revert_refused=why), why)
    assert "Revert PR: not opened: GitHub refused the push" in text and "`workflows` permission" in text


def test_an_answer_short_of_a_culprit_says_its_best_guess_and_that_nothing_is_reverted():
    """Issue 33: the comment names an inconclusive search's commit as the best guess it is, with its P, never as the
    culprit; a group's test that ended so shows it in its row."""
    graph, good, bad = linear_graph(8)
    guess = "9" * 40
    said = "stopped after 40 runs without reaching confidence 0.99 (best guess P=0.930)"
    ended = BisectionRow(
        id=7,
        status="inconclusive",
        outcome={"message": said, "culprit": None, "best_guess": guess, "confidence": 0.93},
        steps=[],
    )
    text = render_status("kl", Problem(graph, good, bad), None, ended)
    assert f"**inconclusive**: {said}" in text
    assert "No culprit named: the best guess `999999999999` (P=0.93) is not confirmed, so nothing is reverted." in text
    found = render_status("kl", Problem(graph, good, bad), None, row(culprit="c" * 40), "#12")
    assert "best guess" not in found and "No culprit named" not in found
    group = BisectionRow(
        id=8,
        status="inconclusive",
        outcome={"message": "1 culprit for 2 tests", "best_guess": guess, "confidence": 0.93},
        tests={
            "t1": {"status": "found", "outcome": {"message": "found", "culprit": "c" * 40, "confidence": 0.999}},
            "t2": {"status": "inconclusive", "outcome": {"message": said, "best_guess": guess, "confidence": 0.93}},
        },
        steps=[],
    )
    rows = render_status("kl", Problem(graph, good, bad), None, group).splitlines()
    assert "| `t1` | found | `cccccccccccc` |  |" in rows
    assert "| `t2` | inconclusive | best guess `999999999999` (P=0.93) |  |" in rows
