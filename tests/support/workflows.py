"""Workflow files run on the sandbox's Actions, for the tests that hold it to GitHub's behaviour: a repository made
from files, a run dispatched and awaited, its log's lines without GitHub's timestamps."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

from sandbox import SandboxState

STAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{7}Z ")  # GitHub's runner: 7 fractional digits


def make_repo(state: SandboxState, root: Path, slug: str, files: dict[str, str]) -> None:
    src = root / slug.replace("/", "-")
    subprocess.run(["git", "init", "-q", "-b", "main", str(src)], check=True)
    for path, text in files.items():
        (src / path).parent.mkdir(parents=True, exist_ok=True)
        (src / path).write_text(text)
    subprocess.run(["git", "-C", str(src), "add", "-A"], check=True)
    subprocess.run(
        ["git", "-C", str(src), "-c", "user.name=a", "-c", "user.email=a@b", "commit", "-qm", "files"], check=True
    )
    state.add_user(slug.split("/")[0])
    state.create_repo(slug, source=src)


def run_of(state: SandboxState, slug: str, workflow: str, inputs: dict, timeout: float = 120):
    run_id = state.start_run(slug, workflow, "main", event="workflow_dispatch", inputs=inputs)
    return state.actions.wait(run_id, timeout)


def texts(run) -> list[str]:
    """The log's lines without their timestamps (each checked to carry one)."""
    assert all(STAMP.match(line) for line in run.log), [line for line in run.log if not STAMP.match(line)]
    return [STAMP.sub("", line) for line in run.log]


def texts_of(job) -> list[str]:
    return [STAMP.sub("", line) for line in job.log]
