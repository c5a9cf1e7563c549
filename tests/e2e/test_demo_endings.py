"""The demo ends when the story ends: a bisection that cannot succeed, or an interrupt, ends it at once,
with the reason printed and no process left behind."""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

import yaml
from rich.console import Console
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from bot.cli import demo_github
from bot.domain.bisect.model import Status
from bot.service.report import EXIT_CODES

REPO = Path(__file__).resolve().parents[2]


def _processes_mentioning(marker: str, besides: tuple[int, ...] = ()) -> list[str]:
    """Command lines of live processes that name `marker` (the demo's directory is in every one it starts), this
    one and `besides` left out."""
    found = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit() or int(pid) in (os.getpid(), *besides):
            continue
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if marker in cmdline and state != "Z":
            found.append(f"{pid}: {cmdline}")
    return found


def test_a_demo_whose_steps_cannot_run_says_why_and_exits_soon_after_the_bisection_ends(tmp_path):
    policies = tmp_path / "policies"
    policies.mkdir()
    policy = yaml.safe_load((REPO / "policies" / "example.yaml").read_text())
    policy["tests"][0]["runner"]["env"] = {
        "project": "no-such-dir/pyproject.toml",
        "offline": True,
    }  # no commit can be set up
    (policies / "example.yaml").write_text(yaml.safe_dump(policy))
    workdir = tmp_path / "demo"
    stream = io.StringIO()
    console = Console(file=stream, width=200)
    result = demo_github.run(
        workdir,
        commits=8,  # the fewest a scenario has: three scheduled runs of the nightly before tonight's, not five
        seed=0,
        flake_rate=0.0,
        unbuildable=0,
        keep=False,
        err=console,
        out=console,
        timeout_s=600,
        policies=policies,
        regressions=1,  # the KL test alone: its runner is the one made unusable
    )
    returned = datetime.now(UTC)
    said = stream.getvalue()
    assert result.exit_code == 1 and result.pr_url is None, said
    assert "no revert PR" in said and "ended untestable" in said, said
    assert "no-such-dir/pyproject.toml does not exist at this commit" in said  # the first failing steps' reason
    assert str(workdir / "bot.log") in said  # where to look
    with create_engine(f"sqlite:///{workdir / 'bot.db'}").connect() as conn:
        finished = conn.execute(text("SELECT finished_at FROM bisections")).scalar_one()
    finished = datetime.fromisoformat(str(finished)).replace(tzinfo=UTC)
    assert (returned - finished).total_seconds() < 30
    assert _processes_mentioning(str(workdir)) == []


def test_an_interrupted_demo_leaves_no_process_behind(tmp_path):
    workdir = tmp_path / "demo"
    cli = shutil.which("revert-bisect", path=str(Path(sys.executable).parent)) or "revert-bisect"
    proc = subprocess.Popen(
        # the cheapest story that reaches its steps (an interrupt ends any alike): 8 commits, three scheduled runs
        # before tonight's instead of five; the KL test alone, the nightly's two other accuracy files being 60% of the
        # test processes its history runs
        [cli, "demo", "--dir", str(workdir), "--commits", "8", "--regressions", "1"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 240
        while time.monotonic() < deadline and proc.poll() is None:  # the bot is up and bisecting
            if (workdir / "bot.db").exists() and _steps_started(workdir / "bot.db"):
                break
            time.sleep(0.5)
        assert proc.poll() is None, proc.communicate()[1][-3000:]
        # the precondition: the demo's own children (sandbox, bot, steps) run, so "none left" below means something
        assert _processes_mentioning(str(workdir), besides=(proc.pid,)), "the demo started no process of its own?"
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 130, stderr[-3000:]
    assert "interrupted after" in stderr
    deadline = time.monotonic() + 10  # the last kill's zombies are reaped by init
    while (left := _processes_mentioning(str(workdir))) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert left == []


def _steps_started(db: Path) -> bool:
    try:
        with create_engine(f"sqlite:///{db}").connect() as conn:
            return conn.execute(text("SELECT count(*) FROM steps")).scalar_one() > 0
    except OperationalError as exc:  # the bot has not made its tables yet, or holds the write lock: not yet
        if "no such table" in str(exc) or "locked" in str(exc):
            return False
        raise


def test_the_local_demo_is_bounded_by_its_timeout(tmp_path):
    workdir = tmp_path / "demo"
    cli = shutil.which("revert-bisect", path=str(Path(sys.executable).parent)) or "revert-bisect"
    t0 = time.monotonic()
    proc = subprocess.run(
        # a story that cannot end in 6 s on any machine, and ends the same way every time: 500 commits, a
        # deterministic test (a flaky one may end early, "not reproducible"), one runner -- its 16 runs are
        # 16 interpreters importing torch, one after another, after the scheduled run and building the history
        [cli, "demo", "--local", "--dir", str(workdir), "--workers", "1", "--commits", "500", "--flake-rate", "0"]
        + ["--timeout", "6"],
        capture_output=True,
        text=True,
        timeout=240,
    )
    elapsed = time.monotonic() - t0
    assert proc.returncode == EXIT_CODES[Status.CANCELLED], proc.stderr[-3000:]  # the bisection's own exit code
    assert "gave up after 6s" in proc.stderr and "no revert PR would be opened" in proc.stderr
    assert elapsed < 6 + 60  # the run in flight when time ran out is allowed to finish being stopped
    assert _processes_mentioning(str(workdir)) == []
