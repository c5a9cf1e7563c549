"""The status comment while a bisection waits on runners or loses runs to infrastructure."""

from __future__ import annotations

from bot.domain.bisect.model import Phase, Problem
from bot.domain.bisect.simulate import linear_graph
from bot.domain.bisect.verdict import Verdict
from bot.service.driver import Snapshot
from bot.service.status import render_status


def test_waiting_steps_and_infra_reasons_are_shown():
    graph, good, bad = linear_graph(8)
    snap = Snapshot(
        1,
        Phase.SEARCHING,
        8,
        runs=[(good, "calibrate", Verdict.GOOD, 0.0), (bad, "calibrate", Verdict.INFRA, None)],
        in_flight=["c" * 40, "d" * 40],
        waiting=["cccccccccccc: queued 12 min for a runner labelled self-hosted, 4-gpu-h100"],
        infra=[(bad, "run 77 timed out on gpu-h100-07 (https://github.com/o/r/actions/runs/77)")],
    )
    text = render_status("kl", Problem(graph, good, bad), snap, None)
    assert "| searching | 2 (good 1, infra 1) | 1 | 1 |" in text  # one running, one still queued
    assert (
        "Waiting for a runner (1 steps):\n- `cccccccccccc: queued 12 min for a runner labelled self-hosted, 4-gpu-h100`"
        in text
    )
    assert f"- `{bad[:12]}`: run 77 timed out on gpu-h100-07" in text and "never counted as evidence" in text
    quiet = render_status("kl", Problem(graph, good, bad), Snapshot(1, Phase.SEARCHING, 8), None)
    assert "Waiting" not in quiet and "infrastructure" not in quiet


def test_runner_errors_and_test_names_are_markdown_escaped():
    """Error text from runners and git goes into the comment as text: no HTML, no emphasis, no ping, one line."""
    from markdown_it import MarkdownIt

    graph, good, bad = linear_graph(8)
    why = "env failed: <frozen runpy> *boom* (ask @alice)\nsecond line"
    snap = Snapshot(
        1, Phase.SEARCHING, 8, runs=[(good, "calibrate", Verdict.GOOD, 0.0)], in_flight=[], infra=[(bad, why)]
    )
    comment = render_status("test_`kl`", Problem(graph, good, bad), snap, None)
    inlines = [t for t in MarkdownIt("commonmark").enable("table").parse(comment) if t.type == "inline"]
    children = [c for t in inlines for c in t.children]
    item = next(t for t in inlines if "env failed" in t.content)
    assert not [c.type for c in item.children if c.type in ("html_inline", "em_open", "strong_open", "softbreak")]
    assert (
        "".join(c.content for c in item.children if c.type in ("text", "code_inline"))
        == f"{bad[:12]}: {' '.join(why.split())}"
    )
    assert not any("@alice" in c.content for c in item.children if c.type == "text")  # in a code span: no ping
    assert any(c.type == "code_inline" and c.content == "test_`kl`" for c in children)


def test_a_red_runs_bisection_says_why_it_started_when_it_did():
    graph, good, bad = linear_graph(8)
    now = render_status(
        "kl", Problem(graph, good, bad), None, None, started="at once: re-run attempt 2 of the run failed again"
    )
    assert "\n\nStarted at once: re-run attempt 2 of the run failed again." in now
    assert "Started" not in render_status("kl", Problem(graph, good, bad), None, None)  # a comment's: it says nothing
