"""`revert-bisect demo --perf`: a slowdown told through GitHub -- the miniature's performance nightly on the sandbox,
and the bot finding the change point, bisecting it and acting on it.

The scenario is the miniature with its performance nightly (scenarios.mamba_track_boundary, slowdown=True): a
decode throughput benchmark that prints SGLang's perf report in small, timed on a model of a GPU whose clock moves
2% from run to run, and one commit in the middle of the history that makes decode about 4% slower. The nightly
runs every few commits (about 20 nights) while the bot, installed today, hears none of them; tonight's run's signed
`workflow_run` webhook is all it gets. The bot reads the nights back (the policy's `watch.history`), finds the change
point, bisects the commits between a night before it and a night after it on the sandbox's self-hosted runner, and
comments the evidence on the culprit PR -- or, with `--revert`, opens the revert PR.

The bot is served with two policies for the one repository: policies/example.yaml (the accuracy nightly) and
policies/perf/example-perf.yaml (this one). The benchmark's clock is drawn from the seed and each run's id
(MINI_SGLANG_BENCH_SEED on the runner), so a seed tells the same nights every time.
"""

from __future__ import annotations

import shutil
import signal
import time
from dataclasses import dataclass
from pathlib import Path

import httpx
from rich.console import Console
from rich.live import Live
from rich.markdown import Markdown
from rich.panel import Panel
from rich.table import Table

from bot.cli import demo_ci
from bot.cli.demo_github import ServedBot, _api, _opening, _revert_prs, _show, _sigterm_interrupts, _wait_up
from bot.cli.demo_watch import Ended, StoryWatch
from bot.domain.joblog import plain
from sandbox import SandboxState, run_in_thread, seed_from_scenario

POLICIES = Path(__file__).resolve().parents[2] / "policies"
PERF = ".github/workflows/nightly-perf.yml"
TEST = "decode-throughput"
EVERY = 3  # commits between two nights: 20 nights over the default 60 commits
PERF_TIMEOUT_S = 600.0


@dataclass(frozen=True)
class PerfDemoResult:
    exit_code: int
    url: str | None  # the comment with the evidence, or the revert PR


def policies_for(workdir: Path, revert: bool, source: Path = POLICIES) -> Path:
    """The bot's policies: the accuracy one and the performance one, the latter's `on_slowdown` as asked."""
    target = workdir / "policies"
    target.mkdir(parents=True, exist_ok=True)
    shutil.copy(source / "example.yaml", target)
    perf = (source / "perf" / "example-perf.yaml").read_text()
    if revert:
        perf = perf.replace("on_slowdown: comment\n", "on_slowdown: revert\n", 1)
    (target / "example-perf.yaml").write_text(perf)
    return target


def run(
    workdir: Path,
    *,
    commits: int,
    seed: int,
    revert: bool,
    keep: bool,
    err: Console,
    out: Console,
    timeout_s: float = PERF_TIMEOUT_S,
) -> PerfDemoResult:
    from scenarios.mamba_track_boundary import build

    t0 = time.monotonic()
    build(workdir / "scenario", commits=commits, seed=seed, slowdown=True)
    state = SandboxState(workdir / "sandbox")
    seeded = seed_from_scenario(state, workdir / "scenario")
    scenario = seeded.scenario
    state.actions.runner_env["MINI_SGLANG_BENCH_SEED"] = f"demo-{seed}"
    base, stop_sandbox = run_in_thread(state)
    served = ServedBot.start(workdir, base, seeded.tokens["revert-bisect-bot"], policies_for(workdir, revert))
    bot, bot_url, secret, logs, db = served.proc, served.url, served.secret, served.logs, served.db
    slow = scenario["slowdown"]
    _opening(err, "revert-bisect demo --perf, through GitHub", base, seeded, bot_url, workdir)
    restore = _sigterm_interrupts()
    try:
        deadline = t0 + timeout_s
        shas = scenario["shas"]
        err.print(f"the performance nightly, every {EVERY} commits (the bot, installed today, hears none of them) ...")
        runs = [
            state.start_run(seeded.repo, PERF, sha, event="schedule", branch_of_sha="main") for sha in shas[:-1:EVERY]
        ]
        _wait_up(bot_url + "/healthz", bot)
        nights = [state.actions.wait(r, demo_ci.left(deadline)) for r in runs]
        _show_nights(err, nights, {p["sha"]: p["number"] for p in scenario["prs"]}, slow)
        state.add_hook(bot_url + "/webhooks/github", secret)
        tonight = state.actions.wait(
            state.start_run(seeded.repo, PERF, scenario["default_branch"], event="schedule"), demo_ci.left(deadline)
        )
        err.print(
            f"tonight's run at {tonight.head_sha[:12]}: {tonight.conclusion} (a slower commit stays green), "
            f"{_reading(tonight)} -> the workflow_run webhook goes to the bot"
        )
        watch = StoryWatch(db, lambda: bot.poll() is None, clock=time.monotonic)
        found: list[dict] = []
        ended = None
        with Live(console=err, refresh_per_second=4, transient=True) as live:
            while not found and ended is None:
                live.update(f"{watch.progress()}  ({time.monotonic() - t0:.0f}s)")
                found = _revert_prs(base, seeded) if revert else _evidence(base, seeded, slow["pr"])
                if not found:
                    ended = watch.ended(0) or (
                        Ended(f"gave up after {timeout_s:.0f}s") if time.monotonic() > deadline else None
                    )
                    time.sleep(0.5)
        if not found:
            err.print(f"[red]no evidence written[/]: {ended.why if ended else 'the story ended'}")
            for line in ended.failing_steps if ended else ():
                err.print(f"  {line}", highlight=False)
            err.print(f"see {logs}", highlight=False)
            return PerfDemoResult(1, None)
        _show_change(err, bot_url, seeded.repo)
        if revert:
            _show(err, base, seeded, scenario, found[0], state)
            for note in _comments(base, seeded, found[0]["number"], "The slowdown this PR reverts"):
                err.print(Panel(Markdown(note["body"]), title=f"comment on {found[0]['html_url']}"), soft_wrap=False)
            url = found[0]["html_url"]
            right = found[0]["body"].startswith(f"Reverts {seeded.repo}#{slow['pr']}")
        else:
            comment = found[0]
            err.print(
                Panel(Markdown(comment["body"]), title=f"comment on the culprit PR #{slow['pr']}"), soft_wrap=False
            )
            url, right = comment["html_url"], True
        err.print(
            f"the slow commit: #{slow['pr']} {slow['title']!r}: "
            f"{'[green]correct[/]' if right else '[red]wrong[/]'}; {time.monotonic() - t0:.0f}s in all"
        )
        out.print(url)
        if keep:
            err.print(f"Both servers stay up for you to browse (the series: {bot_url}/series); Ctrl-C stops them.")
            try:
                signal.pause()
            except KeyboardInterrupt:
                pass
        return PerfDemoResult(0 if right else 1, url)
    except KeyboardInterrupt:
        err.print(
            f"[yellow]interrupted after {time.monotonic() - t0:.0f}s[/]; stopping the bot and the sandbox ({logs})"
        )
        return PerfDemoResult(130, None)
    finally:
        served.stop()
        state.actions.shutdown()
        stop_sandbox()
        restore()


def _reading(run) -> str:
    """The batch-8 row of the run's perf report, as its log printed it."""
    job = next(iter(run.latest_jobs()), None)
    rows = [line for line in plain(job.text if job else "").splitlines() if line.lstrip().startswith("| 8 |")]
    cells = [c.strip() for c in rows[-1].strip().strip("|").split("|")] if rows else []
    return f"batch 8: {cells[3]} tok/s" if len(cells) > 3 else "no reading"


def _show_nights(err: Console, nights: list, pr_of: dict[str, int], slow: dict) -> None:
    table = Table(title="the performance nightly's scheduled runs (output throughput, tok/s, at batch size 8)")
    for column in ("commit", "PR", "run", "conclusion", "reading"):
        table.add_column(column)
    for run in nights:
        pr = pr_of.get(run.head_sha)
        table.add_row(run.head_sha[:12], f"#{pr}" if pr else "", str(run.id), run.conclusion, _reading(run))
    err.print(table)
    err.print(f"(the slow commit, for you only: #{slow['pr']} at commit {slow['index']} of the history)")


def _comments(base: str, seeded, number: int, words: str) -> list[dict]:
    return [c for c in _api(base, seeded, f"/repos/{seeded.repo}/issues/{number}/comments") if words in c["body"]]


def _evidence(base: str, seeded, pr: int) -> list[dict]:
    return _comments(base, seeded, pr, "bisected a slowdown")


def _show_change(err: Console, bot_url: str, repo: str) -> None:
    """The change point the bot acted on, as its series page gives it."""
    try:
        items = httpx.get(f"{bot_url}/api/series", timeout=30).json()["items"]
        for item in (i for i in items if i["repository"] == repo and i["test"] == TEST):
            detail = httpx.get(bot_url + item["api"], timeout=30).json()
            for change in detail["changes"]:
                linked = ", ".join(f"#{b['id']}" for b in change["bisections"]) or "none"
                means = f"{change['before']['mean']:.1f} -> {change['after']['mean']:.1f}"
                err.print(
                    f"change point of {item['metric']}: {change['effect_text']} between runs {change['run_before']} "
                    f"and {change['run_after']} (means {means}); bisection {linked}; {bot_url}{item['page']}"
                )
    except (httpx.HTTPError, KeyError, ValueError) as exc:
        err.print(f"the series could not be read from the bot: {exc}")
