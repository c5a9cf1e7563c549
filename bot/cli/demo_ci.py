"""The demo's nightly CI, as SGLang's runs: scheduled runs of the scenario's nightly workflow every few commits
before tonight's (so CI's own readings of the KL test exist inside the range), each failed run's failed jobs
re-run once by the repository's retry automation (like SGLang's /rerun-failed-ci), through the sandbox's REST API.

The nightly has several jobs -- two CPU suite partitions, the accuracy stage that alone runs the KL test, a
pull-request-only job skipped on schedule -- and a CPU partition fails now and then for reasons of its own, so a
run is seldom green as a whole: the bot reads the KL test's own history to choose GOOD."""

from __future__ import annotations

import json
import re
import time
from dataclasses import dataclass

import httpx
from rich.console import Console
from rich.table import Table

from bot.domain.bisect.ledger import entries

NIGHTLY = ".github/workflows/nightly-test.yml"
ACCURACY_JOB = "stage-b-test-accuracy"
READING = re.compile(r"avg_kl_div=([0-9.eE+-]+)")
EVERY_MIN = 3  # commits between scheduled runs, at least
RUNS = 5  # scheduled runs before tonight's, about


@dataclass(frozen=True)
class ScheduledRun:
    sha: str
    run_id: int
    conclusion: str
    attempts: int
    kl: str  # the accuracy job's word on the KL test: passed / failed, with its reading


def schedule_points(shas: list[str], commits: int) -> list[str]:
    """The commits scheduled runs landed on before tonight's (HEAD's): the first, then every few."""
    every = max(EVERY_MIN, commits // RUNS)
    return shas[:-1][::every]


def retry_failed(base: str, repo: str, token: str, run_id: int) -> bool:
    """The retry automation: POST .../runs/{id}/rerun-failed-jobs; False when GitHub refused (nothing failed)."""
    answer = httpx.post(
        f"{base}/repos/{repo}/actions/runs/{run_id}/rerun-failed-jobs",
        headers={"Authorization": f"token {token}"},
        json={},
        timeout=30,
    )
    return answer.status_code == 201


def accuracy_word(run) -> str:
    """What the accuracy job of the run's newest attempt said of the KL test, for the table."""
    job = next((j for j in run.latest_jobs() if j.name.startswith(ACCURACY_JOB)), None)
    if job is None or job.conclusion not in ("success", "failure"):
        return f"no signal ({job.conclusion if job else 'no job'})"
    readings = READING.findall(job.text)
    value = f" (avg_kl_div={float(readings[-1]):.4f})" if readings else ""
    return ("passed" if job.conclusion == "success" else "failed") + value


def history(state, seeded, base: str, shas: list[str], commits: int, deadline: float) -> list[ScheduledRun]:
    """Run the nightly at each schedule point, then re-run each failed run's failed jobs once, as the repository's
    automation does; the runs as they ended."""
    token = seeded.tokens[seeded.maintainer]
    ids = [
        state.start_run(seeded.repo, NIGHTLY, sha, event="schedule", branch_of_sha="main")
        for sha in schedule_points(shas, commits)
    ]
    runs = [state.actions.wait(run_id, left(deadline)) for run_id in ids]
    for run in runs:
        if run.conclusion == "failure":
            retry_failed(base, seeded.repo, token, run.id)
    runs = [state.actions.wait(run.id, left(deadline)) for run in runs]
    return [ScheduledRun(r.head_sha, r.id, r.conclusion, r.attempt, accuracy_word(r)) for r in runs]


def show(err: Console, runs: list[ScheduledRun], pr_of: dict[str, int]) -> None:
    table = Table(title="the nightly's scheduled runs before tonight's (each failed run's failed jobs re-run once)")
    for column in ("commit", "PR", "run", "attempts", "conclusion", "the KL test (stage-b-test-accuracy)"):
        table.add_column(column)
    for r in runs:
        pr = pr_of.get(r.sha)
        table.add_row(r.sha[:12], f"#{pr}" if pr else "", str(r.run_id), str(r.attempts), r.conclusion, r.kl)
    err.print(table)
    green = sum(r.conclusion == "success" for r in runs)
    err.print(f"{green} of {len(runs)} runs green as a whole; the bot reads the KL test's own history for GOOD")


def left(deadline: float) -> float:
    """Seconds to the deadline, at least one (a wait's timeout)."""
    return max(1.0, deadline - time.monotonic())


def show_choice(err: Console, db: str, runs: list[ScheduledRun]) -> None:
    """How the bot scoped tonight's run, from its store: GOOD (from the KL test's own history), and the CI readings
    it took as free evidence beside its own runs on the bisect runner."""
    from sqlalchemy import create_engine, text

    engine = create_engine(db)
    try:
        with engine.connect() as conn:
            row = conn.execute(text("SELECT id, good, tests FROM bisections ORDER BY id LIMIT 1")).first()
            if row is None:
                return
            counted = text("SELECT kind, count(*) FROM steps WHERE bisection_id = :b GROUP BY kind")
            kinds = {kind: n for kind, n in conn.execute(counted, {"b": row[0]})}
    finally:
        engine.dispose()
    good = next((r for r in runs if r.sha == row[1]), None)
    how = f"scheduled run {good.run_id}, {good.conclusion} as a whole, the KL test {good.kl}" if good else "?"
    tests = json.loads(row[2]) if isinstance(row[2], str) else row[2]
    ci = sum(len(e.ci) for e in entries(tests))
    err.print(
        f"the bot chose GOOD = {row[1][:12]} ({how}); it took {ci} CI readings as free evidence "
        f"and ran {sum(kinds.values())} runs on the bisect runner"
    )
