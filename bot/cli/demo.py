"""`revert-bisect demo`: the miniature SGLang incident, from the red nightly to the revert PR."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from rich.console import Console
from rich.markdown import Markdown
from rich.panel import Panel
from rich.syntax import Syntax

from bot.adapters.dispatch.local_pool import LocalPool, worktree_root
from bot.adapters.git.repo import GitRepo
from bot.adapters.git.revert import create_revert
from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli.demo_watch import failing_steps
from bot.cli.session import run_bisection
from bot.domain.bisect.ledger import entries
from bot.domain.bisect.model import Status
from bot.domain.bisect.verdict import MetricRule, RawResult, classify
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.draft import PrRecord, RevertCase, draft
from bot.service.pr_body import FailingTest
from runners.envs import EnvSpec
from runners.spec import StepResult, StepSpec, TestRun
from runners.testrun import argv_of


@dataclass(frozen=True)
class DemoResult:
    exit_code: int
    culprit: str | None
    expected: str
    pr_title: str | None = None


def scheduled_run(repo: GitRepo, sha: str, test: TestRun, env: EnvSpec, metric: str, err: Console) -> StepResult:
    """Run the nightly's test file once at HEAD, whole (up to its first failure), as the scheduled CI job did."""
    pool = LocalPool(repo, 1, worktree_root(repo.path))
    try:
        pool.submit(StepSpec(0, sha, (), metric_regex=metric, env_spec=env, test=test))
        result = pool.wait(timeout=None)[0]
    finally:
        pool.close()
    failed = [c.case for c in result.cases if c.outcome == "bad"]
    err.print(
        f"scheduled run at {sha[:12]}: exit {result.exit_code}, avg_kl_div={result.metric}, "
        f"failed: {', '.join(failed) or 'none'}"
    )
    return result


def run(
    workdir: Path,
    *,
    commits: int,
    seed: int,
    flake_rate: float,
    unbuildable: int,
    workers: int,
    db: str | None,
    err: Console,
    out: Console,
    timeout_s: float = 900.0,
) -> DemoResult:
    from scenarios.mamba_track_boundary import KL_CASE, METRIC_REGEX, build

    t0 = time.monotonic()
    scenario = build(workdir, commits=commits, seed=seed, flake_rate=flake_rate, unbuildable=unbuildable)
    err.print(
        Panel.fit(
            f"[bold]{scenario.repo_slug}[/] ({scenario.repo}): {len(scenario.shas) - 1} commits "
            f"since the last green nightly {scenario.good[:12]}\n"
            f"flake rate {flake_rate:g}, {len(scenario.unbuildable)} unbuildable commit(s), {workers} local runner(s)",
            title="revert-bisect demo: the miniature SGLang incident",
        )
    )
    repo = GitRepo(scenario.repo)
    rule = MetricRule(scenario.threshold)
    env = EnvSpec(offline=True)  # the environment of the commit's pins, layered on this interpreter
    # as the nightly's run_suite runs the file: `-f`, so it names the first failed case, which the steps then run
    nightly = scheduled_run(repo, scenario.bad, scenario.own_test(args=("-f",)), env, METRIC_REGEX, err)
    value = nightly.metric
    # the steps run what failed there (a flake may have failed nothing: then the KL method the nightly watches)
    cases = tuple(c.case for c in nightly.cases if c.outcome == "bad") or (KL_CASE,)
    if value is None or classify(RawResult(1, value), rule, None).value != "bad":
        err.print("[yellow]the scheduled run did not fail this time (a flake?); bisecting anyway[/]")
    else:
        err.print(f"[red]nightly is red[/]: avg_kl_div={value:.4g} > threshold={scenario.threshold:g}")
    test = scenario.own_test(cases=cases)

    store = Store(connect(db or f"sqlite:///{workdir / 'revert-bisect.db'}"))
    config = BisectConfig(
        command=tuple(argv_of(test)),
        workers=workers,
        metric_regex=METRIC_REGEX,
        threshold=scenario.threshold,
        env=env.to_json(),
        test_run=test.to_json(),
        verify_revert=True,
        # a scenario made flaky on purpose is bisected as its operator would: with the rate declared, so
        # endpoints and culprit are re-run as that rate asks (auto would trust it until a contradiction)
        flake_rate=flake_rate or None,
    )
    loaded = setup.create(store, repo, scenario.good, scenario.bad, config)
    deadline = t0 + timeout_s  # the whole story is bounded: past it the bisection is cancelled and says so
    code, report = run_bisection(
        store,
        loaded,
        err,
        out,
        workdir / "result.json",
        workdir / "bisect.log",
        cancelled=lambda: time.monotonic() > deadline,
    )
    culprit = report.culprit if report else None
    if code != 0 or not report or report.status != Status.FOUND.value:
        if time.monotonic() > deadline:
            err.print(f"[red]gave up after {timeout_s:.0f}s[/] (--timeout)")
        if report:  # the status and its message are printed already: say which runs could not test and why
            for line in failing_steps(store.get(loaded.id).steps):
                err.print(f"  {line}", highlight=False)
            err.print(
                f"no revert PR would be opened; {time.monotonic() - t0:.0f}s; "
                f"logs in {workdir} (bisect.log, result.json)"
            )
        return DemoResult(code or 1, culprit, scenario.culprit)
    if not (report.ab and report.ab.passed):
        why = (report.revert and report.revert.error) or "HEAD + revert did not pass every A/B run"
        err.print(f"[yellow]no PR would be opened[/]: {why}")
        return DemoResult(1, culprit, scenario.culprit)

    prs = {pr["sha"]: PrRecord(pr["number"], pr["title"], pr.get("author")) for pr in scenario.prs}
    followups = (scenario.followup["number"],) if scenario.followup else ()
    revert = create_revert(repo, culprit, scenario.bad)  # made during the bisection; found again here
    row = store.get(loaded.id)
    pr = draft(
        RevertCase(
            row=row,
            problem=loaded.problem,
            repo=repo,
            revert=revert,
            repo_slug=scenario.repo_slug,
            branch=scenario.default_branch,
            test=FailingTest(f"{scenario.test_file}::{cases[0]}", scenario.metric, scenario.threshold),
            fixes=tuple(e.test for e in entries(row.tests) if e.culprit == culprit),
            prs=prs,
            followups=followups,
        )
    )
    (workdir / "revert-pr.md").write_text(f"# {pr.title}\n\n{pr.body}")
    err.print(
        Panel(
            Markdown(pr.body), title=f"the PR that would be opened: {pr.title}  ({pr.head_branch} -> {pr.base_branch})"
        ),
        soft_wrap=False,
    )
    if scenario.followup:
        err.print(f"follow-up linked: #{scenario.followup['number']} {scenario.followup['title']}")
    err.print(Panel(Syntax(revert.diff, "diff", theme="ansi_dark"), title="the revert"), soft_wrap=False)
    verdict = "[green]correct[/]" if culprit == scenario.culprit else "[red]wrong[/]"
    err.print(
        f"expected culprit {scenario.culprit[:12]}: {verdict}; {time.monotonic() - t0:.0f}s; outputs in {workdir}"
    )
    out.print(pr.title)
    return DemoResult(0 if culprit == scenario.culprit else 1, culprit, scenario.culprit, pr.title)
