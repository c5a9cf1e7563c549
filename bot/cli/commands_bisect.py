"""`revert-bisect bisect`: find the commit that broke a test."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err, out
from bot.domain.errors import RevertBisectError

EXIT_HELP = """
Exit codes: 0 culprit found; 3 ambiguous (untestable commits border the answer); 4 not
reproducible (BAD passes); 5 GOOD fails too; 6 no culprit (BAD's failures were flakes);
7 an endpoint cannot be tested; 8 inconclusive; 11 the command could not be run at any
commit (every run exited 126 or 127); 2 bad input, or a --json/--log that could not be
written; 130 interrupted (resume with --resume ID).
"""

# What `--resume ID` may be given: where the store is, and other places for the outputs (the rest is stored).
RESUME_OPTIONS = {"resume", "db", "json_out", "log_out"}


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


def _given(ctx: typer.Context) -> list[str]:
    """The options and arguments given on the command line that `--resume` does not take, as the user typed them."""
    given = []
    for param in ctx.command.params:
        if param.name in RESUME_OPTIONS or param.name is None:
            continue
        source = ctx.get_parameter_source(param.name)
        if source is not None and source.name == "COMMANDLINE":  # typer's Click may not be the one installed
            given.append(param.opts[0] if param.param_type_name == "option" else (param.metavar or param.name.upper()))
    return given


def _check_junit(junit: Path | None, tests: str | None, metric: object) -> None:
    if junit is None:
        if tests is not None:
            raise RevertBisectError("--tests picks among the tests of a JUnit report: add --junit PATH")
        return
    if junit.is_absolute() or ".." in junit.parts:
        raise RevertBisectError(
            f"--junit {junit} must be a path inside the worktree (relative, e.g. report.xml): each run writes its own"
        )
    if metric:
        raise RevertBisectError("--junit judges each test by its report; --metric-regex/--metric-file judge one number")
    if tests is not None:
        try:
            re.compile(tests)
        except re.error as exc:
            raise RevertBisectError(f"--tests {tests!r} is not a valid regular expression: {exc}") from None


def bisect(
    ctx: typer.Context,
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
    workers: Annotated[
        int, typer.Option(min=1, max=256, metavar="N", help="Tests to run at once, each in its own worktree.")
    ] = 1,
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
    trust_endpoints: Annotated[
        bool,
        typer.Option(
            "--trust-endpoints",
            help="Take GOOD as passing and BAD as failing without running them first (you saw them just now); "
            "an endpoint runs only when the search's results contradict it.",
        ),
    ] = False,
    check_good: Annotated[
        bool,
        typer.Option(
            "--check-good",
            help="Run GOOD before the search, as BAD is. By default GOOD is taken as passing (as git bisect run "
            "takes it) and runs only when the search points at its child.",
        ),
    ] = False,
    confidence: Annotated[
        float,
        typer.Option(
            min=0.5,
            max=0.999999,
            metavar="P",
            help="Posterior probability the culprit must reach; for a benchmark (a metric, no --threshold) also "
            "the stated error rate: at 0.99, when no commit changed the metric and its readings are Gaussian "
            "around a level that holds still or drifts linearly, a culprit is named at most 1% of the time.",
        ),
    ] = 0.99,
    flake_rate: Annotated[
        str,
        typer.Option(
            help="'auto' (no result is proof: good commits flake at an unknown rate, the culprit fails at an "
            "unknown 20-100%) or the chance a good commit fails; 0 = deterministic, stop if results contradict."
        ),
    ] = "auto",
    metric_regex: Annotated[
        str | None,
        typer.Option(
            metavar="REGEX",
            help="Judge by a number in the output: the group `value` (or the first group) of the last match.",
        ),
    ] = None,
    metric_file: Annotated[
        bool,
        typer.Option("--metric-file", help='Judge by {"metric": <float>} the test writes to $REVERT_BISECT_RESULT.'),
    ] = False,
    threshold: Annotated[float | None, typer.Option(metavar="T", help="The CI threshold of the metric.")] = None,
    higher_is_worse: Annotated[
        bool, typer.Option("--higher-is-worse/--lower-is-worse", help="Which way the metric gets worse.")
    ] = True,
    junit: Annotated[
        Path | None,
        typer.Option(
            metavar="PATH",
            help="COMMAND writes a JUnit XML report at PATH (relative to the worktree; also $REVERT_BISECT_JUNIT), "
            "as `pytest --junitxml` does: each test case red at BAD is bisected, all in one search.",
        ),
    ] = None,
    tests: Annotated[
        str | None,
        typer.Option(metavar="REGEX", help="With --junit: only the test cases (`classname.name`) REGEX matches."),
    ] = None,
    timeout: Annotated[
        float | None,
        typer.Option(min=0.001, metavar="SECONDS", help="Seconds before a run is killed (an infra result, retried)."),
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
    # The store, git and the search load here, when the command runs: `--help` and the other commands start
    # without them (about 1 s of CPU less each).
    from bot.adapters.git.clones import GIT_CLONES
    from bot.adapters.git.repo import GitRepo
    from bot.adapters.store.db import connect
    from bot.adapters.store.store import Store
    from bot.cli.session import exit_code, run_bisection
    from bot.domain.outcome import BisectionOutcome, outcome_of
    from bot.service import setup
    from bot.service.config import BisectConfig

    try:
        if resume is not None and (extra := _given(ctx)):
            named = " and ".join(filter(None, [", ".join(extra[:-1]), extra[-1]]))
            raise RevertBisectError(
                f"--resume {resume} continues the bisection as it was started, so {named} "
                f"{'does' if len(extra) == 1 else 'do'} not apply: drop {'it' if len(extra) == 1 else 'them'} "
                "(only --json, --log and --db may be given with --resume)"
            )
        # the outputs are checked before the store is touched or anything runs: never an answer lost at the end
        json_out = setup.check_writable(json_out, "--json") if json_out else None
        log_out = setup.check_writable(log_out, "--log") if log_out else None
        workdir = setup.check_workdir(workdir) if workdir else None
        store = Store(connect(db))
        if resume is not None:
            loaded = setup.load(store, resume, GIT_CLONES.open)
            if loaded.row.status:
                err.print(f"bisection #{resume} already finished: {loaded.row.status}")
                told = outcome_of(loaded.row) or BisectionOutcome()
                raise typer.Exit(exit_code(loaded.row.status, told.reason))
            stored = loaded.config
            json_out = json_out or (setup.check_writable(Path(stored.json_out), "--json") if stored.json_out else None)
            log_out = log_out or (setup.check_writable(Path(stored.log_out), "--log") if stored.log_out else None)
        else:
            missing = [name for name, value in (("--repo", repo), ("--good", good), ("--bad", bad)) if value is None]
            if missing:
                raise RevertBisectError(f"missing {', '.join(missing)} (or pass --resume ID)")
            if metric_regex and metric_file:
                raise RevertBisectError("give --metric-regex or --metric-file, not both")
            _check_junit(junit, tests, metric_regex or metric_file)
            if threshold is not None and not (metric_regex or metric_file):
                raise RevertBisectError("--threshold needs a metric: add --metric-regex RE or --metric-file")
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
                trust_endpoints=trust_endpoints,
                good_as_read=not check_good,
                verify_revert=verify_revert,
                onto=onto,
                workdir=str(workdir) if workdir else None,
                junit=str(junit) if junit else None,
                tests=tests,
                json_out=str(json_out) if json_out else None,
                log_out=str(log_out) if log_out else None,
            )
            if trust_endpoints and check_good:
                raise RevertBisectError("--check-good runs GOOD that --trust-endpoints takes as read: give one")
            if onto and not verify_revert:
                raise RevertBisectError("--onto goes with --verify-revert")
            if metric_regex:
                from runners.metric import compile_metric_regex

                compile_metric_regex(metric_regex)
            loaded = setup.create(store, GitRepo(repo), good, bad, config, cwd=Path.cwd())
        code, _ = run_bisection(store, loaded, err, out, json_out, log_out)
    except (RevertBisectError, ValueError) as exc:
        err.print(f"revert-bisect: error: {exc}", highlight=False, soft_wrap=True, markup=False)
        raise typer.Exit(2) from None
    raise typer.Exit(code)
