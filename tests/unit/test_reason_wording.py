"""The engine's reasons, worded per surface: the CLI in its flags, GitHub in policy keys and commands."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli import wording as cli
from bot.domain.bisect.engine import decide
from bot.domain.bisect.model import Problem, Run, Settings, State
from bot.domain.bisect.simulate import linear_graph
from bot.domain.bisect.verdict import RawResult
from bot.domain.reasons import Reason
from bot.service import setup
from bot.service import wording as github
from bot.service.config import BisectConfig
from bot.service.driver import Driver
from bot.service.status import render_status
from runners.spec import StepResult, StepSpec
from scenarios.synthetic import build

FLAG = re.compile(r"--[a-z]")
FACTS = dict(endpoint="GOOD", side="good", sha="a" * 40, confidence=0.99, runner="gpu-h100-07", why="OOM")


@pytest.mark.parametrize("reason", list(Reason))
def test_each_reason_is_a_flag_on_the_cli_and_no_flag_on_github(reason):
    on_cli = cli.said("finding", reason, FACTS)
    on_github = github.said("kl", "finding", reason, FACTS)
    assert on_cli.startswith("finding; ") and FLAG.search(on_cli), on_cli
    assert on_github.startswith("finding; ") and not FLAG.search(on_github), on_github


def test_an_outcome_without_a_reason_or_with_an_unknown_one_reads_as_stored():
    assert cli.said("stored prose; pass an older --good") == "stored prose; pass an older --good"
    assert github.said("kl", "found it", "a_code_from_a_later_version", {}) == "found it"


def _good_fails(problem: Problem):
    """The engine, fed GOOD and BAD failing on every calibration run, until it answers."""
    state, runs = State(), []
    for _ in range(10):
        d = decide(problem, state, runs, free=2)
        if d.outcome is not None:
            return d.outcome
        state = d.state
        runs += [Run(p.sha, p.kind, RawResult(exit_code=1), p.round) for p in d.probes]
    raise AssertionError("no outcome")


def test_a_good_fails_status_comment_says_how_to_pass_an_older_good_commit():
    graph, good, bad = linear_graph(8)
    problem = Problem(graph, good, bad, Settings())
    out = _good_fails(problem)
    assert out.reason is Reason.GOOD_FAILS and out.facts["sha"] == good
    assert "pass an older --good" in cli.said(out.message, out.reason, out.facts)
    stored = dict(message=out.message, reason=out.reason.value, facts=dict(out.facts))  # as the driver stores it
    row = SimpleNamespace(status="good_fails", outcome=stored, steps=[], tests=None)
    comment = render_status("kl-decode", problem, None, row)
    assert "pass an older good commit: `/revert-bisect kl-decode good=<sha>`" in comment, comment
    assert f"fails on GOOD {good[:12]}" in comment and not FLAG.search(comment)


class EveryStepFails:
    """A backend on which the test fails everywhere, GOOD included: the bisection ends good_fails."""

    free = 2

    def __init__(self):
        self.pending: list[StepSpec] = []

    def submit(self, spec: StepSpec) -> None:
        self.pending.append(spec)

    def wait(self, timeout: float | None) -> list[StepResult]:
        now = datetime.now(UTC)
        done, self.pending = self.pending, []
        return [StepResult(s.step_id, s.sha, 1, None, None, "fake", 0.0, "", now, now) for s in done]

    def cancel(self, step_ids: list[int]) -> None:
        pass

    def waiting(self) -> dict[int, str]:
        return {}

    def adopt(self, spec: StepSpec, since: datetime) -> bool:
        return False

    def close(self) -> None:
        pass


def test_the_stored_outcome_keeps_the_reason_for_the_status_comment(tmp_path):
    """What the driver stores is what the comment renders from: the reason and its facts survive the store."""
    repo = build(tmp_path / "repo", 8, 3)
    store = Store(connect(f"sqlite:///{tmp_path / 'bot.db'}"))
    loaded = setup.create(store, GitRepo(repo.path), repo.good, repo.bad, BisectConfig(command=("true",), workers=2))
    Driver(store, loaded.id, loaded.problem, loaded.config, EveryStepFails()).run()
    row = store.get(loaded.id)
    assert row.status == "good_fails" and row.outcome["reason"] == "good_fails"
    comment = render_status("kl-decode", loaded.problem, None, row)
    assert "pass an older good commit: `/revert-bisect kl-decode good=<sha>`" in comment and not FLAG.search(comment)
