"""Running one stored bisection on this machine, with the live display, and writing its outputs."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

from rich.console import Console

from bot.adapters.dispatch.local_pool import LocalPool, worktree_root
from bot.adapters.git.clones import GIT_CLONES
from bot.adapters.git.revert import reverter_for
from bot.adapters.store.store import Store
from bot.cli.progress import LiveProgress
from bot.cli.wording import said
from bot.domain.bisect.model import Status
from bot.service.driver import Driver
from bot.service.report import EXIT_CODES, replay_log, summary, to_json
from bot.service.setup import Loaded

INTERRUPTED = 130


def run_bisection(
    store: Store,
    loaded: Loaded,
    err: Console,
    out: Console,
    json_out: Path | None = None,
    log_out: Path | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[int, dict | None]:
    """Drive the bisection to its end; (exit code, JSON report), or (130, None) on Ctrl-C."""
    config, problem = loaded.config, loaded.problem
    shas = list(problem.graph) + [problem.good]
    subjects = loaded.repo.subjects(shas) if len(shas) <= 5000 else {}
    err.print(
        f"revert-bisect #{loaded.id}: {len(problem.graph)} commits in "
        f"{problem.good[:12]}..{problem.bad[:12]}, {config.workers} worker(s)"
    )
    pool = LocalPool(
        loaded.repo, config.workers, worktree_root(loaded.repo.path, Path(config.workdir) if config.workdir else None)
    )
    try:
        with LiveProgress(err, subjects) as progress:
            outcome = Driver(
                store, loaded.id, problem, config, pool, progress, reverter_for(loaded.repo), cancelled=cancelled
            ).run()
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: resume with `revert-bisect bisect --resume {loaded.id}`")
        return INTERRUPTED, None  # the worktrees stay registered, for the resumed run
    pool.remove_worktrees()  # finished: nothing will resume it, so the user's clone keeps no worktrees of ours
    row = store.get(loaded.id)
    report = to_json(row, problem, loaded.repo, GIT_CLONES)
    message = said(outcome.message, outcome.reason, outcome.facts)
    report["message"] = message  # the JSON is read by CLI users: the remedy in flags, as on stderr
    if json_out:
        json_out.write_text(json.dumps(report, indent=2) + "\n")
    if log_out:
        log_out.write_text(replay_log(row, problem, loaded.repo))
    style = "green" if outcome.status is Status.FOUND else "yellow"
    err.print(f"[{style}]{outcome.status.value}[/]: {message}")
    if outcome.culprit:
        out.print(f"{outcome.culprit} {report['culprit_subject'] or ''}".rstrip())
    for sha in outcome.candidates:
        out.print(f"  candidate {sha}")
    if report.get("revert") and report["revert"]["sha"]:
        out.print(f"revert {report['revert']['sha']} on branch {report['revert']['branch']}")
    err.print(summary(report), highlight=False)
    return EXIT_CODES[outcome.status], report
