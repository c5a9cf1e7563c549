"""Turning user input into a stored bisection (validated), and a stored one back into a problem."""

from __future__ import annotations

import os
import shlex
import shutil
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from pathlib import Path

from bot.domain.bisect.ledger import Entry
from bot.domain.bisect.model import Phase, Problem
from bot.domain.errors import CommandError, RepoError, RevertBisectError
from bot.domain.requests import CiReading, Member
from bot.ports import Git
from bot.ports.store import BisectionRecord, BisectionStore, NewBisection
from bot.service.config import BisectConfig
from runners.git import run as git_run
from runners.step import RUNNER_PYTHON


@dataclass(frozen=True)
class Loaded:
    id: int
    repo: Git
    problem: Problem
    config: BisectConfig
    row: BisectionRecord
    notes: tuple[str, ...] = ()  # what the pre-checks found the user should know (how the command will run)


def check_command(
    repo: Git,
    command: tuple[str, ...],
    bad: str | None = None,
    good: str | None = None,
    cwd: Path | None = None,
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The command as it will run, and what the user should know about that (one line each).

    A relative program (`./test.sh`) is each commit's own when BAD has it; one BAD lacks -- a script the user keeps
    untracked in the clone, as with `git bisect run` -- runs from the user's checkout (the repository root, else
    `cwd`) by its absolute path, still in each commit's worktree: otherwise every run would exit 127. So does a
    script given to an interpreter (`python test.py`, `sh test.sh`)."""
    command, notes = _program(repo, command, bad, good, cwd)
    if bad is None:
        return command, notes
    arguments, more = _script_arguments(repo, command, bad, cwd)
    return arguments, notes + more


def _script_arguments(
    repo: Git, command: tuple[str, ...], bad: str, cwd: Path | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """Each argument naming a file of the user's checkout that BAD lacks, as its absolute path."""
    out, notes = [command[0]], []
    for arg in command[1:]:
        rel = os.path.normpath(arg)
        places = [repo.path / rel] + ([cwd / arg] if cwd is not None else [])
        found = None if arg.startswith("-") or os.path.isabs(arg) else next((p for p in places if p.is_file()), None)
        if found is None or _in_commit(repo, bad, rel):
            out.append(arg)
            continue
        where = os.path.abspath(found)
        out.append(where)
        notes.append(f"{arg} is not in the tested commits: passing {where} from your checkout, to each run")
    return tuple(out), tuple(notes)


def _program(
    repo: Git, command: tuple[str, ...], bad: str | None, good: str | None, cwd: Path | None
) -> tuple[tuple[str, ...], tuple[str, ...]]:
    if not command:
        raise CommandError("no test command: put it after `--`, e.g. `revert-bisect bisect ... -- ./run-test.sh`")
    exe = command[0]
    if exe == RUNNER_PYTHON:  # the interpreter the step runs under, wherever that is
        return command, ()
    if "/" not in exe:
        if shutil.which(exe) is None:
            raise CommandError(f"test command {exe!r} is not on PATH")
        return command, ()
    if os.path.isabs(exe):
        _runnable(Path(exe), exe, "does not exist")
        return command, ()
    rel = os.path.normpath(exe)
    if bad is None or _in_commit(repo, bad, rel):
        mine = repo.path / rel
        if bad is None or mine.exists():  # the checkout's copy says whether the commits' is executable
            _runnable(mine, exe, "does not exist (relative paths are taken from the repository root)")
        if bad is None:
            return command, ()
        if good is not None and not _in_commit(repo, good, rel):
            return command, (
                f"{exe} is in BAD {bad[:12]} but not in GOOD {good[:12]}: the commits without it cannot run it",
            )
        return command, (f"{exe} is in the tested commits: running each commit's own copy, in its worktree",)
    places = [repo.path / rel] + ([cwd / exe] if cwd is not None and (cwd / exe) != repo.path / rel else [])
    for path in places:
        if path.is_file():
            _runnable(path, exe, "does not exist")
            where = os.path.abspath(path)
            return (where, *command[1:]), (
                f"{exe} is not in the tested commits: running {where} from your checkout, in each commit's worktree",
            )
    looked = " nor ".join(str(p) for p in places)
    raise CommandError(
        f"test command {exe!r} does not exist: BAD {bad[:12]} does not have it, nor is it at {looked} "
        "(relative paths are taken from the repository root)"
    )


def _in_commit(repo: Git, sha: str, rel: str) -> bool:
    """Whether commit `sha` has a file at `rel` (relative to the repository root)."""
    if rel.startswith(".."):
        return False
    found = git_run(repo.path, "cat-file", "-t", f"{sha}:{rel}", check=False)
    return found.returncode == 0 and found.stdout.strip() == "blob"


def _runnable(path: Path, exe: str, missing: str) -> None:
    if not path.is_file():
        raise CommandError(f"test command {exe!r} {missing}")
    if not os.access(path, os.X_OK):
        raise CommandError(f"test command {exe!r} is not executable (chmod +x it, or run it through its interpreter)")


def check_writable(path: Path, flag: str) -> Path:
    """`path` (for `flag`, e.g. --json) as an absolute path, once it is known that a file can be written there:
    checked before the first run, so a bisection never ends on an answer it cannot write. Leaves nothing behind."""
    path = Path(os.path.abspath(path))
    if path.is_dir():
        raise RevertBisectError(f"cannot write {flag} {path}: it is a directory (name a file in it)")
    existed = path.exists()
    try:
        with open(path, "a"):
            pass
    except OSError as exc:
        raise RevertBisectError(f"cannot write {flag} {path}: {_why(exc, path)}") from None
    if not existed:
        path.unlink(missing_ok=True)
    return path


def check_workdir(path: Path) -> Path:
    """--workdir as an absolute path, once it is known that its worktrees can be made there (nothing is left)."""
    path = Path(os.path.abspath(path))
    base = path
    while not base.exists() and base != base.parent:
        base = base.parent
    if not base.is_dir():
        raise RevertBisectError(f"cannot use --workdir {path}: {base} is a file, not a directory")
    try:
        os.rmdir(tempfile.mkdtemp(prefix=".revert-bisect-check-", dir=base))
    except OSError as exc:
        raise RevertBisectError(f"cannot use --workdir {path}: {_why(exc, base)}") from None
    return path


def _why(exc: OSError, path: Path) -> str:
    """An OSError in words, naming the directory that is missing when that is the cause."""
    why = (exc.strerror or str(exc)).lower()
    parent = path.parent
    if isinstance(exc, FileNotFoundError) and not parent.exists():
        missing = parent
        while not missing.parent.exists():
            missing = missing.parent
        return f"{why}: the directory {missing} does not exist (create it, or name another path)"
    if isinstance(exc, NotADirectoryError):
        return f"{why}: a part of the path is a file"
    return why


def create(
    store: BisectionStore,
    repo: Git,
    good_rev: str,
    bad_rev: str,
    config: BisectConfig,
    origin: dict | None = None,
    origin_key: str | None = None,
    ci: Sequence[CiReading] = (),
    cwd: Path | None = None,
    members: Sequence[Member] = (),
    test: str | None = None,
) -> Loaded:
    """The bisection stored, validated first; `cwd`: where the CLI was started (a relative test command the
    repository's root lacks is looked for there too); `ci`: CI's readings of the one test; `members`: the red tests
    bisected together, each with its own GOOD and CI's readings of it (bot.domain.bisect.group), when there are
    several; `test`: the one test's id (as asked for; its command when None). CI's readings inside the range are kept
    with their test (bot.domain.bisect.ledger.Entry.ci), never as steps: no backend ever runs them."""
    if not config.command:
        check_command(repo, config.command)  # says how to give one
    good = repo.resolve(good_rev, "--good")
    bad = repo.resolve(bad_rev, "--bad")
    command, notes = check_command(repo, config.command, bad, good, cwd)
    config = replace(config, command=command)
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
    in_range = lambda readings: tuple(c for c in readings if c.sha == good or c.sha in graph)  # noqa: E731
    tests = tuple(replace(e, ci=in_range(e.ci)) for e in tests_of(config, members, repo, test, ci))
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
        tests,
    )
    bisection_id = store.create(new, Phase.CALIBRATING.value)
    return Loaded(
        bisection_id, repo, Problem(graph, good, bad, config.settings(), head), config, store.get(bisection_id), notes
    )


def tests_of(
    config: BisectConfig, members: Sequence[Member], repo: Git, test: str | None, ci: Sequence[CiReading]
) -> tuple[Entry, ...]:
    """The bisection's tests: a JUnit report's are learnt from BAD's report (bot.service.discovery: none until then);
    red tests of a run, each with its own GOOD and CI's readings; else its one test, named as asked for (`test`) or by
    its command, with `ci`."""
    if config.junit:
        return ()
    if members:
        return tuple(Entry(m.test, good=repo.resolve(m.good, f"{m.test}'s GOOD"), ci=tuple(m.ci)) for m in members)
    return (Entry(test or shlex.join(config.command), ci=tuple(ci)),)


def load(store: BisectionStore, bisection_id: int, open_repo: Callable[[str], Git]) -> Loaded:
    """A stored bisection, its clone opened with `open_repo` (bot.ports.Clones.open)."""
    row = store.get(bisection_id)
    repo = open_repo(row.repo)
    config = BisectConfig.from_json(row.settings)
    graph = repo.range_graph(row.good, row.bad)
    return Loaded(bisection_id, repo, Problem(graph, row.good, row.bad, config.settings(), row.head), config, row)
