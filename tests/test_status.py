"""The status comment while a bisection waits on runners or loses runs to infrastructure."""

from __future__ import annotations

from bot.bisect.model import Phase, Problem
from bot.bisect.simulate import linear_graph
from bot.bisect.verdict import Verdict
from bot.flow.status import render_status
from bot.orchestrator.driver import Snapshot


def test_waiting_steps_and_infra_reasons_are_shown():
    graph, good, bad = linear_graph(8)
    snap = Snapshot(1, Phase.SEARCHING, 8, runs=[(good, "calibrate", Verdict.GOOD, 0.0), (bad, "calibrate", Verdict.INFRA, None)],
                    in_flight=["c" * 40, "d" * 40], waiting=["cccccccccccc: queued 12 min for a runner labelled self-hosted, 4-gpu-h100"],
                    infra=[(bad, "run 77 timed out on gpu-h100-07 (https://github.com/o/r/actions/runs/77)")])
    text = render_status("kl", Problem(graph, good, bad), snap, None)
    assert "| searching | 2 (good 1, infra 1) | 1 | 1 |" in text  # one running, one still queued
    assert "Waiting for a runner (1 steps):\n- `cccccccccccc: queued 12 min for a runner labelled self-hosted, 4-gpu-h100`" in text
    assert f"- `{bad[:12]}`: run 77 timed out on gpu-h100-07" in text and "never counted as evidence" in text
    quiet = render_status("kl", Problem(graph, good, bad), Snapshot(1, Phase.SEARCHING, 8), None)
    assert "Waiting" not in quiet and "infrastructure" not in quiet
