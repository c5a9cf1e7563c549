"""Running one stored bisection on this machine, with the live display, and writing its outputs."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.markup import escape

from bot.adapters.dispatch.local_pool import LocalPool, worktree_root
from bot.adapters.git.clones import GIT_CLONES
from bot.adapters.git.revert import reverter_for
from bot.adapters.store.store import Store
from bot.cli.documents import document
from bot.cli.progress import LiveProgress
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import Status
from bot.domain.outcome import NOT_RUN_EXITS, BisectionOutcome, RunSeen, culprit_of, explain, outcome_of, run_cause
from bot.domain.reasons import Reason
from bot.ports.store import StepRecord
from bot.service.config import BisectConfig
from bot.service.document import BisectionDocument
from bot.service.driver import Driver, Snapshot
from bot.service.report import EXIT_CODES, replay_log, spent, summary
from bot.service.setup import Loaded

INTERRUPTED = 130
OUTPUT_UNWRITTEN = 2  # the answer is printed, but a --json or --log asked for could not be written
COMMAND_NOT_RUN = 11  # every run exited 126/127: the command never started, at any commit


def exit_code(status: str | Status, reason: str | None = None) -> int:
    """The exit code of a finished bisection: its status's, or 11 when the command could not be run at all."""
    if reason == Reason.COMMAND_NOT_RUN.value:
        return COMMAND_NOT_RUN
    return EXIT_CODES[Status(status)]


def _metric_mode(config: BisectConfig) -> str | None:
    return "regex" if config.metric_regex else "file" if config.metric_file else None


def _seen(step: StepRecord, pool: LocalPool) -> RunSeen:
    log = pool.log_of(step.id, step.runner)
    return RunSeen(step.sha, step.exit_code, step.metric, step.infra_reason, step.log_tail or "", log and str(log))


class _WithLogs:
    """The live display, plus a line under each run that failed or said nothing about its commit: what it did
    and where its whole log is."""

    def __init__(self, progress: LiveProgress, store: Store, loaded: Loaded, pool: LocalPool, err: Console):
        self.progress, self.store, self.loaded, self.pool, self.err = progress, store, loaded, pool, err
        self._runs = 0
        self._told: set[int] = set()

    def __call__(self, snap: Snapshot) -> None:
        self.progress(snap)
        if len(snap.runs) == self._runs:
            return
        self._runs = len(snap.runs)
        config = self.loaded.config
        for step in self.store.get(self.loaded.id).steps:
            if step.id in self._told or step.state != "done" or step.verdict not in ("bad", "skip", "infra"):
                continue
            self._told.add(step.id)
            seen = _seen(step, self.pool)
            cause = run_cause(seen, _metric_mode(config), config.timeout_s)
            where = f"; its log: {seen.log}" if seen.log else ""
            self.err.print(f"        {step.sha[:12]} {cause}{where}", markup=False, highlight=False, soft_wrap=True)


def _explained(store: Store, loaded: Loaded, pool: LocalPool) -> tuple[str, BisectionOutcome]:
    """The finished bisection's status and outcome with the real cause named (bot.domain.outcome.explain): each
    test's, from the runs that carried it, stored (the bisection's derive from them), so that `status` and a later
    `--resume` say the same. A bisection that never learnt its tests (a JUnit report never read) explains its own."""
    row = store.get(loaded.id)
    config = loaded.config

    def told_again(status: str | None, outcome: BisectionOutcome, steps: list, good: str):
        runs = [_seen(s, pool) for s in steps if s.state == "done"]
        return explain(status, outcome, runs, good, _metric_mode(config), config.timeout_s)

    tests = entries(row.tests)
    if not tests:
        status, told = told_again(row.status, outcome_of(row) or BisectionOutcome(), list(row.steps), row.good)
        if status != row.status or told != outcome_of(row):
            store.save_outcome(loaded.id, status or row.status or "", told)
        return _with_git_facts(store, loaded)
    again = []
    for e in tests:
        carried = [s for s in row.steps if e.test in (s.results or {})]
        status, told = told_again(e.status.value if e.status else None, e.told, carried, e.good or row.good)
        again.append(replace(e, status=Status(status) if status else e.status, outcome=told))
    if again != tests:
        store.save_tests(loaded.id, again)
    return _with_git_facts(store, loaded)


def _with_git_facts(store: Store, loaded: Loaded) -> tuple[str, BisectionOutcome]:
    """The ended bisection's status and outcome, with what git tells of its culprit stored beside (its subject; the
    branch its revert was made on, or the revert of it ONTO already has), so that `status ID --json` and the
    dashboard say what `bisect --json` says (bot.service.describe reads them from the outcome)."""
    row = store.get(loaded.id)
    outcome = outcome_of(row) or BisectionOutcome()
    culprit, repo = culprit_of(row.status, outcome), loaded.repo
    if culprit is None:
        return row.status or "", outcome
    facts: dict[str, Any] = {"culprit_subject": repo.subjects([culprit]).get(culprit)}
    if row.revert:
        facts["branch"] = next(iter(repo.branches_at(row.revert)), None)
    elif row.head and row.revert_error and (found := GIT_CLONES.find_revert(repo, culprit, row.head)):
        facts["already_reverted"] = found.as_json()  # the reverter kept only its words: asked of git again
    told = outcome.with_facts(**facts)
    if told != outcome:
        store.save_outcome(loaded.id, row.status or "", told)
    return row.status or "", told


def _summary(doc: BisectionDocument, outcome: BisectionOutcome) -> str:
    """report.summary's sentence; for a command that could not be run, said so rather than a verdict."""
    code = outcome.facts.get("exit_code")
    if outcome.reason != Reason.COMMAND_NOT_RUN.value and code not in NOT_RUN_EXITS:
        return summary(doc)
    if outcome.reason == Reason.COMMAND_NOT_RUN.value:
        return f"not run: the command could not be run at any commit (exit {code}); {spent(doc)}"
    return f"untestable: GOOD could not run the command (exit {code}); {spent(doc)}"


def _write(path: Path, text: str, flag: str, err: Console) -> bool:
    try:
        path.write_text(text)
    except OSError as exc:
        err.print(
            f"revert-bisect: error: cannot write {flag} {path}: {exc.strerror or exc} (the answer is above)",
            markup=False,
            highlight=False,
            soft_wrap=True,
        )
        return False
    return True


def test_rows(doc: BisectionDocument) -> list[str]:
    """A row per test, for stderr: how it ended, its culprit (or best guess) and the runs that carried it."""
    width = max((len(t.test) for t in doc.tests), default=0)
    rows = []
    for t in doc.tests:
        answer = (
            f"{t.culprit[:12]} {(t.culprit_subject or '')[:50]}"
            if t.culprit
            else f"best guess {t.best_guess[:12]}"
            if t.best_guess
            else "-"
        )
        rows.append(f"  {t.test:<{width}}  {t.outcome:<16} {answer}  ({t.runs} run{'' if t.runs == 1 else 's'})")
    return rows


def culprit_lines(doc: BisectionDocument) -> list[str]:
    """What stdout names to revert: each culprit once, `<sha> <subject>` (the tests it broke are on stderr's rows)."""
    named = {t.culprit: t.culprit_subject for t in doc.tests if t.culprit}
    return [f"{sha} {subject or ''}".rstrip() for sha, subject in named.items()]


def run_bisection(
    store: Store,
    loaded: Loaded,
    err: Console,
    out: Console,
    json_out: Path | None = None,
    log_out: Path | None = None,
    cancelled: Callable[[], bool] | None = None,
) -> tuple[int, BisectionDocument | None]:
    """Drive the bisection to its end; (exit code, its document), or (130, None) on Ctrl-C."""
    config, problem = loaded.config, loaded.problem
    shas = list(problem.graph) + [problem.good]
    subjects = loaded.repo.subjects(shas) if len(shas) <= 5000 else {}
    err.print(
        f"revert-bisect #{loaded.id}: {len(problem.graph)} commits in "
        f"{problem.good[:12]}..{problem.bad[:12]}, {config.workers} worker(s)"
    )
    for note in loaded.notes:
        err.print(note, markup=False, highlight=False, soft_wrap=True)
    pool = LocalPool(
        loaded.repo, config.workers, worktree_root(loaded.repo.path, Path(config.workdir) if config.workdir else None)
    )
    try:
        with LiveProgress(err, subjects) as progress:
            Driver(
                store,
                loaded.id,
                problem,
                config,
                pool,
                _WithLogs(progress, store, loaded, pool, err),
                reverter_for(loaded.repo),
                cancelled=cancelled,
            ).run()
    except KeyboardInterrupt:
        err.print(f"[yellow]interrupted[/]: resume with `revert-bisect bisect --resume {loaded.id}`")
        return INTERRUPTED, None  # the worktrees stay registered, for the resumed run
    pool.remove_worktrees()  # finished: nothing will resume it, so the user's clone keeps no worktrees of ours
    status, told = _explained(store, loaded, pool)
    row = store.get(loaded.id)
    doc = document(row, problem, loaded.repo)
    style = "green" if status == Status.FOUND.value else "yellow"
    err.print(f"[{style}]{status}[/]: {escape(doc.message or '')}")
    for line in test_rows(doc):
        err.print(line, markup=False, highlight=False)
    for line in culprit_lines(doc):
        out.print(line, markup=False, highlight=False, soft_wrap=True)  # a script reads it: one line, never wrapped
    for sha in doc.candidates:
        out.print(f"  candidate {sha}")
    if doc.revert and doc.revert.sha:
        out.print(f"revert {doc.revert.sha} on branch {doc.revert.branch}", soft_wrap=True)
    err.print(_summary(doc, told), highlight=False)
    written = True  # checked writable before the first run; a disk that filled meanwhile still loses no answer
    if json_out:
        written &= _write(json_out, doc.model_dump_json(indent=2) + "\n", "--json", err)
    if log_out:
        written &= _write(log_out, replay_log(row, problem, loaded.repo), "--log", err)
    return (exit_code(status, told.reason) if written else OUTPUT_UNWRITTEN), doc
