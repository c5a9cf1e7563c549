"""A linear git history for tests and benches: c0..cn on `main`, each commit writing the files it is given."""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path


def linear_history(
    path: Path,
    n: int,
    files: Callable[[int], Mapping[str, str]],
    dated: bool = False,
    author: str = "dev",
    message: Callable[[int], str] = "change {}".format,
) -> list[str]:
    """A new repository at `path` with n + 1 commits, commit i (`message(i)`) writing `files(i)` (a file of its own
    per commit keeps a culprit's revert clean). `dated`: fixed dates from 2026-01-01T01:00Z, one second apart, so the
    same commits (the same shas, the same draws of a test seeded by them) on every run. The shas, c0 first."""

    def git(*args: str, env: Mapping[str, str] | None = None) -> str:
        done = subprocess.run(["git", *args], cwd=path, check=True, capture_output=True, text=True, env=env)
        return done.stdout.strip()

    path.mkdir(parents=True, exist_ok=True)
    git("init", "-q", "-b", "main")
    git("config", "user.email", f"{author}@example.com")
    git("config", "user.name", author)
    shas = []
    for i in range(n + 1):
        for name, text in files(i).items():
            (path / name).write_text(text)
        git("add", "-A")
        when = f"2026-01-01T01:{i // 60:02d}:{i % 60:02d}Z"
        dates = {**os.environ, "GIT_AUTHOR_DATE": when, "GIT_COMMITTER_DATE": when} if dated else None
        git("commit", "-q", "-m", message(i), env=dates)
        shas.append(git("rev-parse", "HEAD"))
    return shas
