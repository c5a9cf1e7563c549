"""The CLI as a newcomer meets it: --version, help that fits 80 columns uncut, clear errors, the outcome
in words, no worktrees or lock files left in the user's clone and data directory."""

import importlib.metadata
import os
import re
import subprocess
import sys
import threading
import time

import pytest
import typer

from bot.adapters.dispatch.local_pool import worktree_root
from bot.cli.main import app
from bot.service.document import BisectionDocument, DocStep
from bot.service.report import summary
from runners import locks
from tests.support.cli import bisect_args, interrupted


def flat(text: str) -> str:
    return " ".join(text.split())


def worktrees(repo) -> list[str]:
    listed = subprocess.run(
        ["git", "-C", str(repo.path), "worktree", "list", "--porcelain"], capture_output=True, text=True, check=True
    ).stdout
    return [line.removeprefix("worktree ") for line in listed.splitlines() if line.startswith("worktree ")]


def test_version(cli):
    r = cli("--version")
    assert r.code == 0, r.stderr
    assert r.stdout == f"revert-bisect {importlib.metadata.version('revert-bisect')}\n"


def test_the_cli_and_the_bot_start_without_what_only_a_command_needs():
    """`revert-bisect --help`, `--version` and every command's parsing start without the store, git, numpy or scipy
    (about 1 s of CPU each: a CLI process runs often, in scripts and in the tests); the bot starts without scipy,
    which only a sampled metric needs (bot.domain.bisect.stats._special)."""
    import subprocess
    import sys

    script = "import sys, {module}; print(' '.join(sorted({{m.partition('.')[0] for m in sys.modules}} & {heavy!r})))"
    for module, heavy in (
        ("bot.cli.main", {"sqlalchemy", "git", "github", "numpy", "scipy", "torch"}),
        ("bot.app", {"scipy", "torch"}),
    ):
        proc = subprocess.run(
            [sys.executable, "-c", script.format(module=module, heavy=heavy)], capture_output=True, text=True
        )
        assert proc.returncode == 0, proc.stderr
        assert proc.stdout.strip() == "", f"importing {module} loads {proc.stdout.strip()}"


GROUP = typer.main.get_command(app)
HELP_COMMANDS = [name for name in GROUP.commands if name != "sandbox"]  # sandbox hands --help to its own parser


@pytest.mark.parametrize("name", ["", *HELP_COMMANDS])
def test_help_fits_80_columns_and_cuts_nothing(name, cli):
    r = cli(*([name] if name else []), "--help", env={"COLUMNS": "80"})
    assert r.code == 0, r.stderr
    lines = r.stdout.splitlines()
    assert max(map(len, lines)) <= 80, [line for line in lines if len(line) > 80]
    assert not [
        line for line in lines if line.rstrip().endswith(("…", "...")) and not line.startswith("Usage:")
    ]  # "[ARGS]..." is no cut
    # every help text of the source appears whole: not truncated, and no word broken across lines
    shown = flat(r.stdout)
    if name:
        command = GROUP.commands[name]
        texts = [command.help, command.epilog or ""] + [p.help for p in command.params if getattr(p, "help", None)]
    else:
        texts = [GROUP.help] + [c.help.split("\n\n")[0] for n, c in GROUP.commands.items()]
    for text in texts:
        assert flat(text) in shown, text


def test_required_options_are_shown_as_required(cli):
    bisect = flat(cli("bisect", "--help", env={"COLUMNS": "80"}).stdout)
    for option in ("--repo PATH", "--good REV", "--bad REV"):
        assert re.search(re.escape(option) + r" [^[]*\[required unless --resume\]", bisect), option
    revert = flat(cli("revert", "--help", env={"COLUMNS": "80"}).stdout)
    assert re.search(r"--repo \S+ The git repository\. \[required\]", revert)
    assert re.search(r"--culprit \S+ The commit to revert\. \[required\]", revert)


def test_missing_required_options_are_one_clear_line(synth, cli):
    repo = synth(6, 3)
    r = cli("bisect", "--repo", str(repo.path), "--bad", repo.bad, "--", "true")
    assert r.code == 2
    assert r.stderr.strip() == "revert-bisect: error: missing --good (or pass --resume ID)"
    r = cli("revert", "--repo", str(repo.path))
    assert r.code == 2 and "Missing option '--culprit'" in r.stderr and "Traceback" not in r.stderr


def test_found_summary_in_words_and_no_worktree_or_lock_left(synth, cli, tmp_path):
    repo = synth(24, 15)
    r = cli(*bisect_args(repo, "--workers", "3"))
    assert r.code == 0, r.stderr
    runs = r.json["runs_by_kind"]
    ran = [s for s in r.json["steps"] if s["state"] in ("done", "lost")]  # every step is listed, cancelled ones too
    assert sum(runs.values()) == r.json["runs"] == len(ran)
    kinds = ", ".join(
        f"{runs[kind]} {words}"
        for kind, words in (("calibrate", "calibration"), ("search", "search"), ("confirm", "confirmation"))
        if kind in runs
    )
    sentence = f"found {repo.culprit[:10]} in {r.json['runs']} runs over {r.json['rounds']} rounds ({kinds})"
    sentence += f"; {r.json['runner_seconds'] / 60:.1f} runner-minutes"  # every run's time, as the JSON sums it
    git = r.json["git_bisect_run"]  # beside git bisect run's estimate on the same 24 commits: ceil(log2 24) runs
    assert git["runs"] == 5 and git["runner_seconds"] > 0
    sentence += f"; git bisect run: ~5 runs, ~{git['runner_seconds'] / 60:.1f} runner-minutes"
    assert set(runs) <= {"calibrate", "search", "confirm"} and "search" in runs
    spent_s = sum(s["duration_s"] for s in ran) + r.json["cancelled"]["runner_seconds"]
    assert abs(r.json["runner_seconds"] - spent_s) <= 0.1  # finished runs' durations and the cancelled ones' time
    assert sentence in r.stderr.splitlines(), r.stderr
    assert "{" not in r.stderr  # no Python dict printed
    assert worktrees(repo) == [str(repo.path.resolve())]
    root = worktree_root(repo.path)
    assert (root / "steps").is_dir() and not list(root.glob("wt-*"))  # the logs stay, the worktrees and their locks go
    data = tmp_path / "xdg-data" / "revert-bisect"
    assert (data / "revert-bisect.db").exists() and not list(data.glob("*.migrate-lock"))


def test_not_reproducible_and_good_fails_say_what_the_endpoint_did(synth, cli):
    repo = synth(10, 99)
    r = cli(*bisect_args(repo, "--workers", "2"))
    assert r.code == 4, r.stderr
    n = sum(s["sha"] == repo.bad and s["state"] == "done" for s in r.json["steps"])
    assert f"not reproducible: BAD passed {n} of {n} runs; {r.json['runs']} runs over " in r.stderr
    r = cli(*bisect_args(repo, "--workers", "2", command=["false"]))
    assert r.code == 5, r.stderr
    n = sum(s["sha"] == repo.good and s["state"] == "done" for s in r.json["steps"])
    assert f"GOOD fails too: GOOD failed {n} of {n} runs; " in r.stderr
    assert worktrees(repo) == [str(repo.path.resolve())]


def report(status, steps, **kw) -> BisectionDocument:
    base = dict(
        id=1,
        repo="/r",
        command=["./t.sh"],
        good="g" * 40,
        bad="b" * 40,
        good_rev="v1",
        bad_rev="main",
        phase="done",
        status=status,
        rounds=2,
        runs=len(steps),
        runs_by_kind={"calibrate": len(steps)},
        runner_seconds=0.0,
        cancelled={"runs": 0, "runner_seconds": 0.0},
        git_bisect_run={"runs": 0, "runner_seconds": 0.0, "ranges": []},
        steps=steps,
    )
    return BisectionDocument.model_validate({**base, **kw})


def step(sha, verdict, kind="calibrate"):
    return DocStep(id=1, sha=sha, kind=kind, round=1, state="done", verdict=verdict)


def test_summary_of_each_other_outcome():
    g, b = "g" * 40, "b" * 40
    assert (
        summary(report("untestable", [step(g, "skip"), step(g, "skip"), step(b, "bad"), step(b, "bad")]))
        == "untestable: GOOD gave no result; 4 runs over 2 rounds (4 calibration)"
    )
    assert (
        summary(
            report(
                "no_culprit",
                [step(b, "bad"), step(b, "good", "confirm"), step(b, "good", "confirm")],
                runs_by_kind={"calibrate": 1, "confirm": 2},
            )
        )
        == "no culprit: BAD passed 2 of 3 runs; 3 runs over 2 rounds (1 calibration, 2 confirmation)"
    )
    assert (
        summary(report("inconclusive", [step(b, "bad")], best_guess="c" * 40, confidence=0.93, rounds=1))
        == "inconclusive: best guess cccccccccc at P=0.930; 1 run over 1 round (1 calibration)"
    )
    ambiguous = report("ambiguous", [step(b, "bad")], best_guess="c" * 40, candidates=["a" * 40, "c" * 40])
    assert summary(ambiguous).startswith("ambiguous: the culprit is one of 2 commits ending at cccccccccc; ")
    assert summary(report("cancelled", [], runs_by_kind={}, rounds=0)) == "cancelled; 0 runs over 0 rounds"
    spent = report("cancelled", [], runs_by_kind={}, rounds=0, cancelled={"runs": 2, "runner_seconds": 90.0})
    assert summary(spent) == "cancelled; 0 runs over 0 rounds; 2 runs cancelled after 1.5 runner-minutes"
    ran = report("cancelled", [step(b, "bad")], rounds=1, runner_seconds=150.0)
    assert summary(ran) == "cancelled; 1 run over 1 round (1 calibration); 2.5 runner-minutes"
    git = {"runs": 8, "runner_seconds": 2400.0, "ranges": [200]}
    beside = report("found", [step(b, "bad")], culprit="c" * 40, rounds=1, runner_seconds=600.0, git_bisect_run=git)
    assert summary(beside).endswith("; 10.0 runner-minutes; git bisect run: ~8 runs, ~40.0 runner-minutes")


def test_workdir_holds_the_worktrees_and_is_kept_for_resume(synth, cli, tmp_path):
    repo = synth(12, 5)
    seen = tmp_path / "cwds"
    script = tmp_path / "where.sh"
    script.write_text(f'#!/bin/sh\npwd >> "{seen}"\nexec {sys.executable} {repo.test_script}\n')
    script.chmod(0o755)
    workdir = tmp_path / "work"
    r = cli(*bisect_args(repo, "--workers", "2", "--workdir", str(workdir), command=[str(script)]))
    assert r.code == 0, r.stderr
    root = worktree_root(repo.path, workdir)
    cwds = set(seen.read_text().split())
    assert cwds and all(cwd.startswith(f"{root}/wt-") for cwd in cwds), cwds
    assert (root / "steps").is_dir() and not list(root.glob("wt-*"))
    assert not worktree_root(repo.path).exists()  # nothing in the default place
    assert worktrees(repo) == [str(repo.path.resolve())]


def test_interrupted_bisection_keeps_its_worktrees_until_resumed(synth, tmp_path):
    repo = synth(40, 27, sleep=0.3)
    db = f"sqlite:///{tmp_path / 'ctrl-c.db'}"
    workdir = tmp_path / "work"
    argv = ["bisect", "--db", db, "--workers", "2", "--workdir", str(workdir)]
    argv += ["--repo", str(repo.path), "--good", repo.good, "--bad", repo.bad, "--", *repo.command()]
    proc = interrupted(db, argv, after=3, hold=tmp_path / "hold")
    _, stderr = proc.communicate(timeout=60)
    assert proc.returncode == 130, stderr
    assert "--resume 1" in stderr
    root = worktree_root(repo.path, workdir)
    kept = worktrees(repo)
    assert len(kept) == 3 and all(path.startswith(f"{root}/wt-") for path in kept[1:]), kept  # main + 2 workers
    resumed = subprocess.run(
        [sys.executable, "-m", "bot.cli.main", "bisect", "--db", db, "--resume", "1"],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert repo.culprit in resumed.stdout
    assert worktrees(repo) == [str(repo.path.resolve())]
    assert not list((tmp_path).glob("*.migrate-lock"))


def _blocked_on(inode: int) -> bool:
    """A process waits for a lock on the file with this inode (/proc/locks: "N: -> FLOCK ... dev:ino start end")."""
    with open("/proc/locks") as table:
        return any("->" in line and line.split()[6].rsplit(":", 1)[1] == str(inode) for line in table)


def test_lock_file_removed_by_its_holder_never_admits_two(tmp_path):
    path = tmp_path / "x.lock"
    first = locks.take(path)
    got = []
    waiter = threading.Thread(target=lambda: got.append(locks.take(path)))
    waiter.start()  # opens the file that `first` holds, and blocks on it
    inode = os.stat(path).st_ino
    deadline = time.monotonic() + 30
    while not _blocked_on(inode) and time.monotonic() < deadline:  # the kernel lists a waiter as "->"
        time.sleep(0.01)
    assert _blocked_on(inode) and not got
    locks.release_and_remove(first, path)
    waiter.join(5)
    second = got[0]
    # the waiter holds the file now at the path (a new one), so a newcomer is kept out
    assert os.fstat(second.fileno()).st_ino == os.stat(path).st_ino
    assert locks.take(path, wait=False) is None
    locks.release_and_remove(second, path)
    assert not path.exists()


def test_concurrent_first_starts_migrate_once_and_leave_no_lock(tmp_path):
    url = f"sqlite:///{tmp_path / 'fresh.db'}"
    code = (
        "import sys; from bot.adapters.store.db import connect, is_current; "
        "sys.exit(0 if is_current(connect(sys.argv[1])) else 1)"
    )
    procs = [subprocess.Popen([sys.executable, "-c", code, url], stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for proc in procs:
        _, stderr = proc.communicate(timeout=120)
        assert proc.returncode == 0, stderr
    assert not list(tmp_path.glob("*.migrate-lock"))
