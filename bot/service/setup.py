"""Turning user input into a stored bisection (validated), and a stored one back into a problem."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from bot.domain.bisect.model import Kind, Phase, Problem
from bot.domain.errors import CommandError, RepoError
from bot.domain.requests import CiReading
from bot.ports import Git
from bot.ports.store import BisectionRecord, BisectionStore, NewBisection, NewStep, StepReport
from bot.service.config import BisectConfig
from runners.step import RUNNER_PYTHON


@dataclass(frozen=True)
class Loaded:
    id: int
    repo: Git
    problem: Problem
    config: BisectConfig
    row: BisectionRecord


def check_command(repo: Git, command: tuple[str, ...]) -> None:
    if not command:
        raise CommandError("no test command: put it after `--`, e.g. `revert-bisect bisect ... -- ./run-test.sh`")
    exe = command[0]
    if exe == RUNNER_PYTHON:  # the interpreter the step runs under, wherever that is
        return
    if "/" in exe:
        path = Path(exe) if os.path.isabs(exe) else repo.path / exe
        if not path.is_file():
            raise CommandError(
                f"test command {exe!r} does not exist (relative paths are taken from the repository root)"
            )
        if not os.access(path, os.X_OK):
            raise CommandError(
                f"test command {exe!r} is not executable (chmod +x it, or run it through its interpreter)"
            )
    elif shutil.which(exe) is None:
        raise CommandError(f"test command {exe!r} is not on PATH")


def create(
    store: BisectionStore,
    repo: Git,
    good_rev: str,
    bad_rev: str,
    config: BisectConfig,
    origin: dict | None = None,
    origin_key: str | None = None,
    ci: Sequence[CiReading] = (),
) -> Loaded:
    check_command(repo, config.command)
    good = repo.resolve(good_rev, "--good")
    bad = repo.resolve(bad_rev, "--bad")
    if good == bad:
        raise RepoError(f"--good and --bad are the same commit {good[:12]}: nothing to bisect")
    if not repo.is_ancestor(good, bad):
        if repo.is_ancestor(bad, good):
            raise RepoError(f"--good {good_rev} is newer than --bad {bad_rev}: swap them")
        raise RepoError(
            f"--good {good_rev} is not an ancestor of --bad {bad_rev}: "
            "pick a GOOD on BAD's history (e.g. `git merge-base`)"
        )
    head = repo.resolve(config.onto or bad, "--onto") if config.verify_revert else None
    if head and not repo.is_ancestor(bad, head):
        raise RepoError(
            f"--onto {config.onto} does not contain --bad {bad_rev}: "
            "the revert must go on a branch that has the culprit"
        )
    graph = repo.range_graph(good, bad)
    new = NewBisection(
        str(repo.path),
        good_rev,
        bad_rev,
        good,
        bad,
        list(config.command),
        config.to_json(),
        head,
        origin,
        origin_key,
        repo.first_parent_log(good, bad),
    )
    bisection_id = store.create(new, Phase.CALIBRATING.value)
    record_ci(store, bisection_id, [c for c in ci if c.sha == good or c.sha in graph])
    return Loaded(
        bisection_id, repo, Problem(graph, good, bad, config.settings(), head), config, store.get(bisection_id)
    )


def record_ci(store: BisectionStore, bisection_id: int, readings: Sequence[CiReading]) -> None:
    """CI's readings, stored as steps already done (kind ci, backend ci): the engine learns from them as from
    any run, and no backend ever dispatches them."""
    ids = store.add_steps(bisection_id, [NewStep(c.sha, Kind.CI.value, 0, backend="ci") for c in readings])
    for step_id, c in zip(ids, readings):
        verdict = "good" if c.passed else "bad"
        store.finish_step(step_id, StepReport(0 if c.passed else 1, c.metric, None, verdict, c.url, 0.0, ""))


def load(store: BisectionStore, bisection_id: int, open_repo: Callable[[str], Git]) -> Loaded:
    """A stored bisection, its clone opened with `open_repo` (bot.ports.Clones.open)."""
    row = store.get(bisection_id)
    repo = open_repo(row.repo)
    config = BisectConfig.from_json(row.settings)
    graph = repo.range_graph(row.good, row.bad)
    return Loaded(bisection_id, repo, Problem(graph, row.good, row.bad, config.settings(), row.head), config, row)
