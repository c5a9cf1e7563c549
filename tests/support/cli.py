"""The CLI as the tests call it."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import sqlalchemy


def as_read(text: str) -> str:
    """Terminal output as a person reads it: without the boxes rich draws around panels and tables, every run of
    whitespace (a wrapped line's break included) one space."""
    return " ".join(text.translate({ord(c): " " for c in "│╭╮╰╯─┃┏┓┗┛━┡┩╇┳┻┼┬┴├┤└┘┌┐"}).split())


def no_traceback(r) -> None:
    assert "Traceback" not in r.stderr and "Traceback" not in r.stdout, r.stderr


def bisect_args(repo, *extra, command=None):
    return [
        "bisect",
        "--repo",
        str(repo.path),
        "--good",
        repo.good,
        "--bad",
        repo.bad,
        *extra,
        "--",
        *(command or repo.command()),
    ]


def interrupted(db: str, argv: list[str], after: int, hold: Path) -> subprocess.Popen:
    """`revert-bisect <argv>` (a synthetic repository's test) on store `db`, Ctrl-C'd once `after` of its runs
    finished; every later run waits while the file `hold` exists (scenarios.synthetic), so the bisection cannot
    have ended first however slow the machine. The process is returned unended, its stderr unread."""
    hold.touch()
    env = {**os.environ, "SYNTH_RUN_LOG": f"{hold}.runs", "SYNTH_HOLD": str(hold), "SYNTH_HOLD_AFTER": str(after)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", *argv],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
        # as a terminal starts it: pytest-xdist's workers ignore SIGINT, and an ignored signal stays ignored across
        # exec, so the Ctrl-C below would never reach the bisection
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    engine = sqlalchemy.create_engine(db)
    deadline = time.monotonic() + 120
    done = 0
    while done < after:
        if proc.poll() is not None or time.monotonic() > deadline:
            raise AssertionError(f"{done} of {after} runs done, then: {proc.communicate()[1][-3000:]}")
        time.sleep(0.1)
        try:
            with engine.connect() as conn:
                done = conn.execute(sqlalchemy.text("SELECT count(*) FROM steps WHERE state = 'done'")).scalar() or 0
        except sqlalchemy.exc.OperationalError:  # no table yet, or the bisection holds the write lock
            continue
    engine.dispose()
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    return proc
