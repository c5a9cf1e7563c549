"""The CLI as the tests call it."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import sqlalchemy


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


def interrupted(db: str, argv: list[str], after: int) -> subprocess.Popen:
    """`revert-bisect <argv>` on store `db`, Ctrl-C'd once `after` of its runs finished (or within 60 s); the
    process is returned after it ended, its stderr unread."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "bot.cli.main", *argv], stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    engine = sqlalchemy.create_engine(db)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and proc.poll() is None:
        time.sleep(0.1)
        try:
            with engine.connect() as conn:
                if conn.execute(sqlalchemy.text("SELECT count(*) FROM steps WHERE state = 'done'")).scalar() >= after:
                    break
        except sqlalchemy.exc.OperationalError:
            continue
    engine.dispose()
    proc.send_signal(signal.SIGINT)  # Ctrl-C
    return proc
