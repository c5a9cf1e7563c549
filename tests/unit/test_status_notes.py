"""The final status comment says what publishing skipped on the way (a reviewer GitHub refused) or why GitHub
refused the revert branch: the bisection's thread learns it without the dashboard."""

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
