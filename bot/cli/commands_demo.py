"""`revert-bisect demo` (the miniature SGLang incident end to end) and `revert-bisect sandbox` (its local GitHub):
both need a source checkout."""

from __future__ import annotations

import importlib.util
import tempfile
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err, out
from bot.domain.errors import RevertBisectError

DEMO_TIMEOUT_S = 900.0  # the incident's story (--perf: bot.cli.demo_perf.PERF_TIMEOUT_S)


def sandbox(ctx: typer.Context) -> None:
    """The GitHub sandbox (a local, stateful GitHub for offline use): `revert-bisect sandbox --help`."""
    from sandbox.__main__ import main as sandbox_main

    raise typer.Exit(sandbox_main(list(ctx.args), prog="revert-bisect sandbox"))


def demo(
    directory: Annotated[
        Path | None,
        typer.Option("--dir", metavar="DIR", help="Where to build the scenario (default: a new temporary directory)."),
    ] = None,
    commits: Annotated[
        int, typer.Option(min=8, max=500, metavar="N", help="Commits since the last green nightly.")
    ] = 60,
    seed: Annotated[int, typer.Option(metavar="N", help="Which history (and culprit) to generate.")] = 0,
    flake_rate: Annotated[
        float, typer.Option(min=0.0, max=0.3, metavar="P", help="Chance a healthy commit's KL test fails anyway.")
    ] = 0.0,
    unbuildable: Annotated[
        int, typer.Option(min=0, max=10, metavar="N", help="Commits that do not build (exit 125).")
    ] = 0,
    regressions: Annotated[
        int | None,
        typer.Option(
            min=1,
            max=2,
            metavar="N",
            help="Commits that break the nightly: 2 (the default) breaks three accuracy tests, two by one commit "
            "and one by another, bisected together, a revert PR each; 1, the KL test alone. Not with --local.",
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=16, metavar="N", help="Local runners (with --local).")] = 4,
    db: Annotated[
        str | None,
        typer.Option(
            metavar="URL", help="SQLAlchemy URL of the store (with --local; default: SQLite in the scenario directory)."
        ),
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Skip GitHub: bisect, revert and draft the PR on this machine only.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the GitHub sandbox and the bot up afterwards, to browse.")
    ] = False,
    timeout: Annotated[
        float | None,
        typer.Option(
            min=1,
            metavar="SECONDS",
            help="Seconds the whole story may take before the demo gives up (default 900; 600 with --perf).",
        ),
    ] = None,
    perf: Annotated[
        bool,
        typer.Option(
            "--perf",
            help="The performance story instead: about 20 green nights of a decode benchmark, one commit 4% slower; "
            "the bot finds the change point, bisects it and comments the evidence on the culprit PR.",
        ),
    ] = False,
    revert: Annotated[
        bool, typer.Option("--revert", help="With --perf: the policy's on_slowdown is revert (the revert PR).")
    ] = False,
) -> None:
    """The miniature SGLang incident end to end: a red scheduled run on a local GitHub (the sandbox), the bot
    bisects through webhooks and opens the revert PR. --local: the same job without GitHub. --perf: a slowdown of
    its performance nightly, from change point to culprit."""
    from bot.cli import demo as demo_flow

    workdir = directory or Path(tempfile.mkdtemp(prefix="revert-bisect-demo-"))
    if directory and directory.exists() and any(directory.iterdir()):
        err.print(f"revert-bisect: error: --dir {directory} is not empty; give a new directory")
        raise typer.Exit(2)
    if importlib.util.find_spec("sandbox") is None or importlib.util.find_spec("scenarios") is None:
        err.print(
            "revert-bisect: error: the demo needs the GitHub sandbox and the scenarios of a source checkout: "
            "git clone the project, then pip install -e '.[demo]'"
        )
        raise typer.Exit(2)
    lacking = [name for name in ("torch", "httpx", "jwt") if importlib.util.find_spec(name) is None]
    if lacking:
        err.print(
            f"revert-bisect: error: the demo needs {', '.join(lacking)} (the model, the sandbox and the client that "
            "drives them): pip install -e '.[demo]' (torch==2.13.0, CPU)"
        )
        raise typer.Exit(2)
    if local and regressions is not None:
        err.print("revert-bisect: error: --regressions tells the GitHub story; --local bisects the KL test alone")
        raise typer.Exit(2)
    if revert and not perf:
        err.print("revert-bisect: error: --revert is the performance story's (--perf); a red test's story reverts")
        raise typer.Exit(2)
    if perf and (local or regressions is not None or flake_rate or unbuildable):
        err.print(
            "revert-bisect: error: --perf tells its own story through GitHub: not with --local, --regressions, "
            "--flake-rate or --unbuildable"
        )
        raise typer.Exit(2)
    try:
        if perf:
            from bot.cli import demo_perf

            result = demo_perf.run(
                workdir,
                commits=commits,
                seed=seed,
                revert=revert,
                keep=keep,
                err=err,
                out=out,
                timeout_s=timeout or demo_perf.PERF_TIMEOUT_S,
            )
        elif not local:
            from bot.cli import demo_github

            result = demo_github.run(
                workdir,
                commits=commits,
                seed=seed,
                flake_rate=flake_rate,
                unbuildable=unbuildable,
                keep=keep,
                err=err,
                out=out,
                timeout_s=timeout or DEMO_TIMEOUT_S,
                regressions=regressions or 2,
            )
        else:
            result = demo_flow.run(
                workdir,
                commits=commits,
                seed=seed,
                flake_rate=flake_rate,
                unbuildable=unbuildable,
                workers=workers,
                db=db,
                err=err,
                out=out,
                timeout_s=timeout or DEMO_TIMEOUT_S,
            )
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False)
        raise typer.Exit(2) from None
    raise typer.Exit(result.exit_code)
