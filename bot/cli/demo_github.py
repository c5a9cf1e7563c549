"""`revert-bisect demo`: the miniature incident told through GitHub -- the sandbox and the bot on loopback.

The sandbox (a local GitHub, in this process) is seeded with the scenario; its emulated self-hosted
runner runs the nightly as SGLang's runs (bot/cli/demo_ci.py): scheduled runs every few commits, none green as a
whole, failed jobs re-run once; tonight's, at HEAD, fails the KL test. The bot (`revert-bisect
serve`, a separate process) hears only the signed `workflow_run` webhook, and through PyGithub and
git over HTTP bisects, reverts, proves the revert and opens the PR.
"""

from __future__ import annotations

import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import httpx
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax

from bot.cli import demo_ci
from bot.cli.demo_watch import Ended, StoryWatch
from runners.proc import stop_group
from sandbox import SandboxState, free_port, run_in_thread, seed_from_scenario

NIGHTLY = demo_ci.NIGHTLY
POLICIES = Path(__file__).resolve().parents[2] / "policies"
DEMO_TIMEOUT_S = 900.0  # the whole story, scenario build to revert PR; measured here: about 35 s


@dataclass(frozen=True)
class GithubDemoResult:
    exit_code: int
    pr_url: str | None


def run(
    workdir: Path,
    *,
    commits: int,
    seed: int,
    flake_rate: float,
    unbuildable: int,
    keep: bool,
    err: Console,
    out: Console,
    timeout_s: float = DEMO_TIMEOUT_S,
    policies: Path = POLICIES,
    regressions: int = 2,
) -> GithubDemoResult:
    from scenarios.mamba_track_boundary import build

    t0 = time.monotonic()
    build(
        workdir / "scenario",
        commits=commits,
        seed=seed,
        flake_rate=flake_rate,
        unbuildable=unbuildable,
        regressions=regressions,
    )
    state = SandboxState(workdir / "sandbox")
    seeded = seed_from_scenario(state, workdir / "scenario")
    scenario = seeded.scenario
    base, stop_sandbox = run_in_thread(state)
    served = ServedBot.start(workdir, base, seeded.tokens["revert-bisect-bot"], policies)
    bot, bot_url, secret, logs, db = served.proc, served.url, served.secret, served.logs, served.db
    _opening(err, "revert-bisect demo, through GitHub", base, seeded, bot_url, workdir)
    restore = _sigterm_interrupts()
    try:
        deadline = t0 + timeout_s
        _wait_up(bot_url + "/healthz", bot)
        err.print("the nightly's scheduled runs so far (the bot was installed today: it heard none of them) ...")
        earlier = demo_ci.history(state, seeded, base, scenario["shas"], commits, deadline)
        demo_ci.show(err, earlier, {p["sha"]: p["number"] for p in scenario["prs"]})
        state.add_hook(bot_url + "/webhooks/github", secret)
        red = state.start_run(seeded.repo, NIGHTLY, scenario["default_branch"], event="schedule")
        red_run = state.actions.wait(red, demo_ci.left(deadline))
        err.print(
            f"tonight's scheduled run at {red_run.head_sha[:12]}: [red]{red_run.conclusion}[/], the KL test "
            f"{demo_ci.accuracy_word(red_run)} -> the workflow_run webhook goes to the bot"
        )
        if demo_ci.retry_failed(base, seeded.repo, seeded.tokens[seeded.maintainer], red):
            rerun = state.actions.wait(red, demo_ci.left(deadline))
            err.print(
                f"the retry automation re-ran its failed jobs (attempt {rerun.attempt}): {rerun.conclusion}, the KL "
                f"test {demo_ci.accuracy_word(rerun)}; a re-run sends no webhook: the bot reads the run itself"
            )
        watch = StoryWatch(db, lambda: bot.poll() is None, clock=time.monotonic)
        expected = [n for n in (scenario["culprit_pr"], scenario.get("second_culprit_pr")) if n]
        prs: list[dict] = []
        ended = None
        with Live(console=err, refresh_per_second=4, transient=True) as live:
            while len(prs) < len(expected) and ended is None:
                live.update(f"{watch.progress()}  ({time.monotonic() - t0:.0f}s)")
                prs = _revert_prs(base, seeded)
                if len(prs) < len(expected):
                    ended = watch.ended(len(prs)) or (
                        Ended(f"gave up after {timeout_s:.0f}s") if time.monotonic() > deadline else None
                    )
                    time.sleep(0.5)
        if not prs:
            _explain(err, ended, logs, time.monotonic() - t0)
            return GithubDemoResult(1, None)
        for pr in prs:
            _show(err, base, seeded, scenario, pr, state)
        demo_ci.show_choice(err, db, earlier)
        _show_trust(err, bot_url)
        reverted = sorted(filter(None, (_reverted_pr(pr, seeded.repo) for pr in prs)))
        correct = reverted == sorted(expected)
        err.print(
            f"expected culprits {', '.join(f'#{n}' for n in expected)}: "
            f"{'[green]correct[/]' if correct else '[red]wrong[/] (reverted ' + str(reverted) + ')'}; "
            f"{time.monotonic() - t0:.0f}s in all"
        )
        pr = prs[0]
        for each in prs:
            out.print(each["html_url"])
        if keep:
            err.print(
                "Both servers stay up for you to browse "
                f"(e.g. curl -H 'Authorization: token {seeded.tokens[seeded.maintainer]}' "
                f"{base}/repos/{seeded.repo}/pulls/{pr['number']}); Ctrl-C stops them."
            )
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
        return GithubDemoResult(0 if correct else 1, pr["html_url"])
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted after {time.monotonic() - t0:.0f}s[/]; stopping the bot and the sandbox ({logs})"
        )
        return GithubDemoResult(130, None)
    finally:
        served.stop()
        state.actions.shutdown()
        stop_sandbox()
        restore()


@dataclass
class ServedBot:
    """The bot serving the sandbox's webhooks, a process of the demo's: its URL, its webhook secret, its log."""

    proc: subprocess.Popen
    url: str
    secret: str
    log: IO[str]
    logs: str  # where to look, in words
    db: str  # its store's URL

    @classmethod
    def start(cls, workdir: Path, github: str, token: str, policies: Path) -> ServedBot:
        secret, port = secrets.token_hex(16), free_port()
        db = f"sqlite:///{workdir / 'bot.db'}"
        env = {
            **os.environ,
            "REVERT_BISECT_WEBHOOK_SECRET": secret,
            "REVERT_BISECT_GITHUB_URL": github,
            "REVERT_BISECT_GITHUB_TOKEN": token,
            "REVERT_BISECT_POLICIES": str(policies),
            "REVERT_BISECT_WORKSPACE": str(workdir / "bot-clones"),
        }
        log = open(workdir / "bot.log", "w")
        # A process group of its own: whatever the bot starts goes with it when the demo ends, however it ends.
        proc = subprocess.Popen(
            [sys.executable, "-m", "bot.cli.main", "serve", "--port", str(port), "--db", db],
            env=env,
            stdout=log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )
        logs = f"the bot's log {workdir / 'bot.log'}; the runs' logs under {workdir / 'sandbox'}"
        return cls(proc, f"http://127.0.0.1:{port}", secret, log, logs, db)

    def stop(self) -> None:
        stop_group(self.proc)
        self.log.close()


def _opening(err: Console, title: str, base: str, seeded, bot_url: str, workdir: Path) -> None:
    """Where the sandbox and the bot answer, and the maintainer's token to look with. Wrapped inside its panel
    (soft_wrap=False): the console's soft wrap would drop the panel's wrapped lines on a narrow terminal."""
    err.print(
        Panel.fit(
            f"GitHub sandbox {base}  (repository {seeded.repo}, maintainer token {seeded.tokens[seeded.maintainer]})\n"
            f"revert-bisect bot {bot_url}  (log {workdir / 'bot.log'})",
            title=title,
        ),
        soft_wrap=False,
    )


def _explain(err: Console, ended: Ended | None, logs: str, elapsed: float) -> None:
    err.print(f"[red]no revert PR[/]: {ended.why if ended else 'the story ended'} ({elapsed:.0f}s)")
    for line in ended.failing_steps if ended else ():
        err.print(f"  {line}", highlight=False)
    err.print(f"see {logs}", highlight=False)


def _sigterm_interrupts() -> Callable[[], None]:
    """SIGTERM (a CI runner, systemd, `timeout`) unwinds like Ctrl-C, so the bot and the runs are stopped."""
    if threading.current_thread() is not threading.main_thread():
        return lambda: None

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    return lambda: signal.signal(signal.SIGTERM, previous)


def _wait_up(url: str, proc: subprocess.Popen, timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the bot exited with {proc.returncode}")
        try:
            if _HTTP.get(url, timeout=1).status_code == 200:
                return
        except httpx.HTTPError:
            pass
        time.sleep(0.2)
    raise RuntimeError("the bot did not start")


# The demo's reads of the sandbox, polled twice a second while the bot works, through one client: httpx.get builds a
# client and an SSL context loading the CA bundle per call (about 20 ms of CPU), which was half the demo process's own
# CPU. No keep-alive: nothing to go stale between polls.
_HTTP = httpx.Client(limits=httpx.Limits(max_keepalive_connections=0))


def _api(base: str, seeded, path: str, **params):
    answer = _HTTP.get(
        base + path, params=params, headers={"Authorization": f"token {seeded.tokens[seeded.maintainer]}"}, timeout=10
    )
    answer.raise_for_status()
    return answer.json()


def _revert_prs(base: str, seeded) -> list[dict]:
    """The revert PRs opened so far, oldest first (one per culprit)."""
    pulls = [
        p for p in _api(base, seeded, f"/repos/{seeded.repo}/pulls", state="open") if p["title"].startswith("Revert ")
    ]
    return sorted(pulls, key=lambda p: p["number"])


def _reverted_pr(pr: dict, repo: str) -> int | None:
    first = (pr.get("body") or "").splitlines()[0] if pr.get("body") else ""
    prefix = f"Reverts {repo}#"
    return int(first[len(prefix) :]) if first.startswith(prefix) and first[len(prefix) :].isdigit() else None


def _show(err: Console, base: str, seeded, scenario: dict, pr: dict, state: SandboxState) -> None:
    err.print(Panel(Markdown(pr["body"]), title=f"{pr['html_url']}: {pr['title']}"), soft_wrap=False)
    labels = ", ".join(label["name"] for label in pr["labels"])
    reviewers = ", ".join(r["login"] for r in pr["requested_reviewers"])
    err.print(
        f"branch {pr['head']['ref']} -> {pr['base']['ref']}; labels: {labels}; review requested from: {reviewers}"
    )
    bare = state.repo(seeded.repo).path  # the sandbox's own repository: the PR's branch was pushed there
    diff = subprocess.run(
        ["git", "--git-dir", str(bare), "diff", pr["base"]["sha"], pr["head"]["sha"]], capture_output=True, text=True
    )
    if diff.returncode or not diff.stdout:
        err.print(f"the revert's diff could not be shown: {diff.stderr.strip() or 'git diff printed nothing'}")
    else:
        err.print(Panel(Syntax(diff.stdout, "diff", theme="ansi_dark"), title="the revert"), soft_wrap=False)
    culprit = _reverted_pr(pr, seeded.repo)
    for number, what in (
        (culprit, "the culprit PR"),
        (scenario["followup"]["number"], "the follow-up issue"),
    ):
        if number is None:
            continue
        for comment in _api(base, seeded, f"/repos/{seeded.repo}/issues/{number}/comments"):
            if f"#{pr['number']}" in comment["body"] and "**revert-bisect**" not in comment["body"]:
                err.print(
                    Panel(
                        Markdown(comment["body"].split("-->", 1)[-1]),
                        title=f"comment on {what} #{number} by {comment['user']['login']}",
                    ),
                    soft_wrap=False,
                )


def _show_trust(err: Console, bot_url: str) -> None:
    """The bot's trust report (/api/trust), as the dashboard's /trust page shows it."""
    from rich.table import Table

    report = _HTTP.get(bot_url + "/api/trust", timeout=30).json()
    table = Table(title=f"trust report ({bot_url}/trust)")
    repositories = report["repositories"]
    table.add_column("")  # a measure a row, a repository a column: the report fits a terminal's width
    for row in repositories:
        table.add_column(row["repository"], justify="right")
    measures = (
        ("bisections", lambda r: r["bisections"]),
        ("confirmed", lambda r: r["confirmed"]),
        ("inconclusive", lambda r: r["inconclusive"]),
        ("reverts opened", lambda r: r["reverts_opened"]),
        ("re-landed unchanged", lambda r: r["relanded"] if r["relanded_known"] else "unknown"),
        ("refused", lambda r: r["reverts_refused"]),
    )
    for name, value in measures:
        table.add_row(name, *(str(value(r)) for r in repositories))
    err.print(table)
