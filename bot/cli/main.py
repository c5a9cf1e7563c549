"""`revert-bisect`: the command line."""

from __future__ import annotations

import importlib.metadata
import importlib.util
import sys
import tempfile
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table
from typer.core import TyperGroup

from bot.adapters.store.db import connect
from bot.adapters.store.store import Store
from bot.cli.session import run_bisection
from bot.cli.wording import said
from bot.domain.bisect.model import Status
from bot.domain.errors import RevertBisectError
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.report import EXIT_CODES

ALREADY_REVERTED = 10  # `revert`: CULPRIT is reverted on ONTO already (not a code of EXIT_CODES)
REVERT_EXIT_HELP = """
Exit codes: 0 the revert is on the new branch; 10 CULPRIT is already reverted on ONTO (a
`This reverts commit` line, a `Revert "<subject>"` subject, or its inverse patch, not
re-landed since): nothing was changed; 2 bad input, or a conflict.
"""

EXIT_HELP = """
Exit codes: 0 culprit found; 3 ambiguous (untestable commits border the answer); 4 not
reproducible (BAD passes); 5 GOOD fails too; 6 no culprit (BAD's failures were flakes);
7 an endpoint cannot be tested; 8 inconclusive; 2 bad input; 130 interrupted (resume with
--resume ID).
"""

_NB_HYPHEN = "\u2011"  # a hyphen textwrap does not break at, swapped back once the help is wrapped


class _HelpFormatter(typer.Context.formatter_class):
    """Click's help formatter, except that it never breaks a word at its hyphens (`--descend-merges`
    must not come out as `--descend-` / `merges`)."""

    def write_text(self, text: str) -> None:
        start = len(self.buffer)
        super().write_text(text.replace("-", _NB_HYPHEN))
        self._restore(start)

    def write_dl(self, rows, col_max: int = 30, col_spacing: int = 2) -> None:
        start = len(self.buffer)
        super().write_dl([(term, text.replace("-", _NB_HYPHEN)) for term, text in rows], col_max, col_spacing)
        self._restore(start)

    def _restore(self, start: int) -> None:
        self.buffer[start:] = [chunk.replace(_NB_HYPHEN, "-") for chunk in self.buffer[start:]]


class _Context(typer.Context):
    formatter_class = _HelpFormatter


class _Group(TyperGroup):
    """The app, whose help and its commands' is laid out by _HelpFormatter."""

    context_class = _Context

    def __init__(self, **kwargs) -> None:
        super().__init__(**kwargs)
        for command in self.commands.values():
            command.context_class = _Context
            if command.help and not command.short_help:  # listed whole, not cut off at 45 characters
                command.short_help = " ".join(command.help.split("\n\n")[0].split())


# rich_markup_mode=None: Click's plain help, which wraps every line to the terminal; rich's panels cut
# option help off mid-word ("--descend-merges…") at 80 columns.
app = typer.Typer(
    cls=_Group,
    add_completion=False,
    no_args_is_help=True,
    rich_markup_mode=None,
    help="Find the commit that broke a test: parallel, flake-aware `git bisect run`.",
)
err = Console(stderr=True, soft_wrap=True)
out = Console()
if not out.is_terminal:  # piped or captured: keep table rows on one line each
    out = Console(width=200)


def _version(value: bool) -> None:
    if value:
        try:
            version = importlib.metadata.version("revert-bisect")
        except importlib.metadata.PackageNotFoundError:
            version = "unknown (not installed: pip install -e .)"
        typer.echo(f"revert-bisect {version}")
        raise typer.Exit()


@app.callback()
def _options(
    version: Annotated[
        bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version and exit.")
    ] = False,
) -> None:
    pass


def _flake(value: str) -> float | None:
    if value == "auto":
        return None
    try:
        f = float(value)
    except ValueError:
        raise typer.BadParameter("use 'auto' or a probability such as 0.05") from None
    if not 0 <= f < 0.5:
        raise typer.BadParameter("a flake rate is a probability in [0, 0.5)")
    return f


@app.command(epilog=EXIT_HELP)
def bisect(
    command: Annotated[
        list[str] | None,
        typer.Argument(
            metavar="COMMAND", help="The test command, after `--`. Exit 0 good, 125 skip, 1-127 bad, >=128 infra."
        ),
    ] = None,
    repo: Annotated[
        Path | None,
        typer.Option(metavar="PATH", help="The git repository (a working clone). [required unless --resume]"),
    ] = None,
    good: Annotated[
        str | None, typer.Option(metavar="REV", help="A revision where the test passes. [required unless --resume]")
    ] = None,
    bad: Annotated[
        str | None,
        typer.Option(
            metavar="REV", help="A revision where it fails (a descendant of GOOD). [required unless --resume]"
        ),
    ] = None,
    workers: Annotated[int, typer.Option(min=1, max=256, help="Tests to run at once, each in its own worktree.")] = 1,
    all_commits: Annotated[
        bool,
        typer.Option(
            "--all-commits",
            help="Any commit may be the culprit, including those merges brought in (implies --descend-merges).",
        ),
    ] = False,
    descend_merges: Annotated[
        bool, typer.Option("--descend-merges", help="When the culprit is a merge, search the commits it brought in.")
    ] = False,
    confidence: Annotated[
        float, typer.Option(min=0.5, max=0.999999, help="Posterior probability the culprit must reach.")
    ] = 0.99,
    flake_rate: Annotated[
        str,
        typer.Option(
            help="'auto' (estimate from contradicting results) or the chance a good commit fails; "
            "0 = deterministic, stop if results contradict."
        ),
    ] = "auto",
    metric_regex: Annotated[
        str | None,
        typer.Option(help="Judge by a number in the output: the group `value` (or the first group) of the last match."),
    ] = None,
    metric_file: Annotated[
        bool,
        typer.Option("--metric-file", help='Judge by {"metric": <float>} the test writes to $REVERT_BISECT_RESULT.'),
    ] = False,
    threshold: Annotated[float | None, typer.Option(help="The CI threshold of the metric.")] = None,
    higher_is_worse: Annotated[
        bool, typer.Option("--higher-is-worse/--lower-is-worse", help="Which way the metric gets worse.")
    ] = True,
    timeout: Annotated[
        float | None, typer.Option(min=0.001, help="Seconds before a run is killed (an infra result, retried).")
    ] = None,
    verify_revert: Annotated[
        bool,
        typer.Option(
            "--verify-revert",
            help="Revert the culprit on --onto (a new branch) and prove it: "
            "HEAD vs HEAD+revert, alongside the confirmation.",
        ),
    ] = False,
    onto: Annotated[
        str | None, typer.Option(metavar="REV", help="The branch head the revert goes on (default: BAD).")
    ] = None,
    json_out: Annotated[
        Path | None, typer.Option("--json", metavar="FILE", help="Write the outcome as JSON here.")
    ] = None,
    log_out: Annotated[
        Path | None, typer.Option("--log", metavar="FILE", help="Write a log `git bisect replay` accepts here.")
    ] = None,
    db: Annotated[
        str | None,
        typer.Option(metavar="URL", help="SQLAlchemy URL of the store (default: SQLite in the user data directory)."),
    ] = None,
    workdir: Annotated[
        Path | None,
        typer.Option(
            metavar="DIR",
            help="Where the worktrees go, one directory per repository (default: the user cache directory). "
            "Removed from the clone when the bisection ends; kept for --resume until then.",
        ),
    ] = None,
    resume: Annotated[
        int | None,
        typer.Option(metavar="ID", help="Continue bisection ID after a crash or Ctrl-C; finished runs are kept."),
    ] = None,
) -> None:
    """Bisect GOOD..BAD with COMMAND, several commits at once, robust to flaky results."""
    try:
        store = Store(connect(db))
        if resume is not None:
            loaded = setup.load(store, resume)
            if loaded.row.status:
                err.print(f"bisection #{resume} already finished: {loaded.row.status}")
                raise typer.Exit(EXIT_CODES[Status(loaded.row.status)])
        else:
            missing = [name for name, value in (("--repo", repo), ("--good", good), ("--bad", bad)) if value is None]
            if missing:
                raise RevertBisectError(f"missing {', '.join(missing)} (or pass --resume ID)")
            if metric_regex and metric_file:
                raise RevertBisectError("give --metric-regex or --metric-file, not both")
            if threshold is not None and not (metric_regex or metric_file):
                raise RevertBisectError("--threshold needs a metric: add --metric-regex RE or --metric-file")
            from bot.adapters.git.repo import GitRepo

            config = BisectConfig(
                command=tuple(command or ()),
                workers=workers,
                timeout_s=timeout,
                metric_regex=metric_regex,
                metric_file=metric_file,
                threshold=threshold,
                higher_is_worse=higher_is_worse,
                confidence=confidence,
                flake_rate=_flake(flake_rate),
                descend_merges=descend_merges or all_commits,
                verify_revert=verify_revert,
                onto=onto,
                workdir=str(workdir.resolve()) if workdir else None,
            )
            if onto and not verify_revert:
                raise RevertBisectError("--onto goes with --verify-revert")
            if metric_regex:
                from runners.metric import compile_metric_regex

                compile_metric_regex(metric_regex)
            loaded = setup.create(store, GitRepo(repo), good, bad, config)
        code, _ = run_bisection(store, loaded, err, out, json_out, log_out)
    except (RevertBisectError, ValueError) as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    raise typer.Exit(code)


@app.command()
def status(
    bisection_id: Annotated[int | None, typer.Argument(metavar="ID", help="Show one bisection in detail.")] = None,
    db: Annotated[str | None, typer.Option(help="SQLAlchemy URL of the store.")] = None,
    limit: Annotated[int, typer.Option(min=1, help="How many recent bisections to list.")] = 20,
) -> None:
    """List recent bisections, or show one with its runs."""
    try:
        store = Store(connect(db))
        if bisection_id is None:
            table = Table("id", "repo", "range", "state", "culprit", "P", "runs", "created")
            for row in store.recent(limit):
                outcome = outcome_of(row) or BisectionOutcome()
                culprit = outcome.culprit or row.guess
                ran = sum(s.state in ("done", "lost") for s in row.steps)
                p = outcome.confidence or row.guess_probability
                table.add_row(
                    str(row.id),
                    Path(row.repo).name,
                    f"{row.good[:8]}..{row.bad[:8]}",
                    row.status or row.phase,
                    (culprit or "-")[:12],
                    f"{p:.3f}" if p else "-",
                    str(ran),
                    f"{row.created_at:%Y-%m-%d %H:%M}",
                )
            out.print(table)
            return
        row = store.get(bisection_id)
        out.print(f"#{row.id} {row.repo} {row.good_rev}..{row.bad_rev}: {row.status or row.phase}")
        if outcome := outcome_of(row):
            out.print(said(outcome.message, outcome.reason, outcome.facts))
        table = Table("step", "round", "kind", "sha", "state", "verdict", "exit", "metric", "s", "runner")
        for s in row.steps:
            table.add_row(
                str(s.id),
                str(s.round),
                s.kind,
                s.sha[:12],
                s.state,
                s.verdict or "-",
                "-" if s.exit_code is None else str(s.exit_code),
                "-" if s.metric is None else f"{s.metric:.6g}",
                f"{s.duration_s:.1f}" if s.duration_s else "-",
                s.runner or "-",
            )
        out.print(table)
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None


@app.command(epilog=REVERT_EXIT_HELP)
def revert(
    repo: Annotated[Path, typer.Option(help="The git repository.")],
    culprit: Annotated[str, typer.Option(help="The commit to revert.")],
    onto: Annotated[str | None, typer.Option(help="Where the revert goes (default: the default branch head).")] = None,
    branch: Annotated[str | None, typer.Option(help="The new branch (default: revert-bisect/revert-<sha>).")] = None,
    reason: Annotated[str | None, typer.Option(help="Why, appended to the commit message.")] = None,
) -> None:
    """Revert CULPRIT on top of ONTO on a new branch; a conflict, or a revert already on ONTO, changes nothing."""
    from bot.adapters.git.repo import GitRepo
    from bot.adapters.git.revert import AlreadyReverted, create_revert

    try:
        git_repo = GitRepo(repo)
        result = create_revert(git_repo, culprit, onto or git_repo.default_branch(), branch, reason)
    except AlreadyReverted as exc:  # an answer, not an error: its own exit code for scripts
        out.print(str(exc), highlight=False, soft_wrap=True)
        raise typer.Exit(ALREADY_REVERTED) from None
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    out.print(f"{result.sha} on branch {result.branch}")
    out.print(result.diffstat, highlight=False)


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(min=1, max=65535, help="Port to listen on.")] = 8080,
    db: Annotated[
        str | None,
        typer.Option(
            help="SQLAlchemy URL of the store (default: $REVERT_BISECT_DB, else SQLite in the user data directory)."
        ),
    ] = None,
    log_format: Annotated[
        str,
        typer.Option(
            "--log-format",
            envvar="REVERT_BISECT_LOG_FORMAT",
            help="Log lines on stderr: json (one object per line) or text.",
        ),
    ] = "json",
) -> None:
    """The webhook service: POST /webhooks/github (secret from $REVERT_BISECT_WEBHOOK_SECRET); GET /healthz,
    /readyz, /metrics."""
    import uvicorn
    from pydantic import ValidationError

    from bot.app import create_app
    from bot.observability.logs import FORMATS, setup_logging
    from bot.settings import BotSettings

    if log_format not in FORMATS:
        err.print(
            f"revert-bisect: error: --log-format {log_format!r}: use one of {', '.join(FORMATS)}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2)
    setup_logging(log_format)
    try:
        settings = BotSettings(**({"db": db} if db else {}))
        application = create_app(settings)
    except ValidationError as exc:
        err.print(
            f"revert-bisect: error: {exc.errors()[0]['msg'].removeprefix('Value error, ')}",
            highlight=False,
            soft_wrap=True,
        )
        raise typer.Exit(2) from None
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    # log_config=None: uvicorn's own loggers go through ours (same format, same redaction).
    uvicorn.run(application, host=host, port=port, log_level="warning", log_config=None)


@app.command(context_settings={"allow_extra_args": True, "ignore_unknown_options": True, "help_option_names": []})
def sandbox(ctx: typer.Context) -> None:
    """The GitHub sandbox (a local, stateful GitHub for offline use): `revert-bisect sandbox --help`."""
    from sandbox.__main__ import main as sandbox_main

    raise typer.Exit(sandbox_main(list(ctx.args)))


@app.command("check-policy")
def check_policy(
    paths: Annotated[list[Path], typer.Argument(help="Policy files, or directories of *.yaml policies.")],
) -> None:
    """Validate policy files: every problem is reported as file:line: key: why."""
    from bot.adapters.policy_files import PolicyError, load, load_dir

    failed = False
    for path in paths:
        try:
            loaded = load_dir(path) if path.is_dir() else {"": load(path)}
        except PolicyError as exc:
            err.print(str(exc), highlight=False, soft_wrap=True)
            failed = True
            continue
        for policy in loaded.values():
            out.print(f"{path}: ok: {policy.repository}, {len(policy.tests)} test(s), mode {policy.mode}")
    raise typer.Exit(2 if failed else 0)


@app.command()
def demo(
    directory: Annotated[
        Path | None, typer.Option("--dir", help="Where to build the scenario (default: a new temporary directory).")
    ] = None,
    commits: Annotated[int, typer.Option(min=8, max=500, help="Commits since the last green nightly.")] = 60,
    seed: Annotated[int, typer.Option(help="Which history (and culprit) to generate.")] = 0,
    flake_rate: Annotated[
        float, typer.Option(min=0.0, max=0.3, help="Chance a healthy commit's KL test fails anyway.")
    ] = 0.0,
    unbuildable: Annotated[int, typer.Option(min=0, max=10, help="Commits that do not build (exit 125).")] = 0,
    workers: Annotated[int, typer.Option(min=1, max=16, help="Local runners (with --local).")] = 4,
    db: Annotated[
        str | None,
        typer.Option(help="SQLAlchemy URL of the store (with --local; default: SQLite in the scenario directory)."),
    ] = None,
    local: Annotated[
        bool, typer.Option("--local", help="Skip GitHub: bisect, revert and draft the PR on this machine only.")
    ] = False,
    keep: Annotated[
        bool, typer.Option("--keep", help="Leave the GitHub sandbox and the bot up afterwards, to browse.")
    ] = False,
    timeout: Annotated[
        float, typer.Option(min=30, help="Seconds the whole story may take before the demo gives up.")
    ] = 900,
) -> None:
    """The miniature SGLang incident end to end: a red scheduled run on a local GitHub (the sandbox), the bot
    bisects through webhooks and opens the revert PR. --local: the same job without GitHub."""
    from bot.cli import demo as demo_flow

    workdir = directory or Path(tempfile.mkdtemp(prefix="revert-bisect-demo-"))
    if directory and directory.exists() and any(directory.iterdir()):
        err.print(f"revert-bisect: error: --dir {directory} is not empty; give a new directory")
        raise typer.Exit(2)
    if importlib.util.find_spec("sandbox") is None or importlib.util.find_spec("scenarios") is None:
        err.print(
            "revert-bisect: error: the demo needs the GitHub sandbox and the scenarios of a source checkout: "
            "git clone the project, then pip install -e '.[sandbox,model]'"
        )
        raise typer.Exit(2)
    if importlib.util.find_spec("torch") is None:
        err.print(
            "revert-bisect: error: the demo's model needs torch: "
            "pip install 'revert-bisect[model]' (torch==2.13.0, CPU)"
        )
        raise typer.Exit(2)
    try:
        if not local:
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
                timeout_s=timeout,
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
                timeout_s=timeout,
            )
    except RevertBisectError as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False)
        raise typer.Exit(2) from None
    raise typer.Exit(result.exit_code)


def main() -> None:
    app(prog_name="revert-bisect")


if __name__ == "__main__":
    sys.exit(main())
