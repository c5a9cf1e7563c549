"""`revert-bisect step-plan`: what a runner would run for a policy test at a commit, before a GPU hour is spent."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Annotated

import typer

from bot.cli.consoles import err
from runners import testrun
from runners.envs import EnvError, EnvSpec, env_key, pins_of


def _git(repo: Path, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL)


def _show(repo: Path, sha: str, path: str) -> str | None:
    done = _git(repo, "show", f"{sha}:{path}")
    return done.stdout if done.returncode == 0 else None


def _environment(repo: Path, sha: str, spec: EnvSpec, python: str) -> dict:
    """The environment a runner would key this commit's pins by (pins read from the commit; the key as computed
    with this machine's interpreter standing in for the runner's)."""
    text = _show(repo, sha, spec.project)
    if text is None:
        return {"project": spec.project, "error": f"{spec.project} does not exist at this commit"}
    try:
        requirements = pins_of(text, spec)
    except EnvError as exc:
        return {"project": spec.project, "error": str(exc)}
    return {"project": spec.project, "key": env_key(requirements, python), "pins": requirements}


def step_plan(
    policy_file: Annotated[Path, typer.Option("--policy", metavar="FILE", help="The repository's policy file.")],
    test_id: Annotated[str, typer.Option("--test", metavar="ID", help="The policy test's id.")],
    repo: Annotated[Path, typer.Option("--repo", metavar="DIR", help="A clone of the repository.")] = Path("."),
    sha: Annotated[
        str, typer.Option("--sha", metavar="REV", help="The commit (any revision git understands).")
    ] = "HEAD",
    cases: Annotated[
        list[str] | None,
        typer.Option(
            "--case",
            metavar="CASE",
            help="A failed case to narrow to (Class.method, Class; repeat). Default: the whole file.",
        ),
    ] = None,
    bad: Annotated[
        str | None,
        typer.Option(metavar="REV", help="BAD, whose test file stands in where the policy says `missing: transplant`."),
    ] = None,
) -> None:
    """Print as JSON what a runner would run for TEST at SHA: command, cwd, env, runner labels, environment key."""
    from bot.adapters.policy_files import PolicyError, load
    from bot.service.probe import needs, probe_argv, test_run

    try:
        policy = load(policy_file)
    except PolicyError as exc:
        err.print(str(exc), highlight=False, soft_wrap=True)
        raise typer.Exit(2) from None
    test = policy.test(test_id)
    if test is None:
        err.print(f"{policy_file}: no test {test_id!r} (the policy has: {', '.join(t.id for t in policy.tests)})")
        raise typer.Exit(2)
    full = _git(repo, "rev-parse", "--verify", "--quiet", f"{sha}^{{commit}}")
    if full.returncode != 0:
        err.print(f"{sha!r} is not a commit in {repo} (fetch it, or check --repo)")
        raise typer.Exit(2)
    commit = full.stdout.strip()
    bad_sha = None
    if bad is not None:
        resolved = _git(repo, "rev-parse", "--verify", "--quiet", f"{bad}^{{commit}}")
        if resolved.returncode != 0:
            err.print(f"--bad {bad!r} is not a commit in {repo}")
            raise typer.Exit(2)
        bad_sha = resolved.stdout.strip()
    chosen = tuple(cases or ())
    run, needed = test_run(test, chosen, bad_sha), needs(test)
    runner = test.runner
    plan: dict = {
        "test": test.id,
        "sha": commit,
        "build": list(run.build) if run is not None else [],
        "command": probe_argv(test, chosen),
        "cwd": test.probe.cwd if run is not None else ".",
        "env": testrun.env_of(run, needed) if run is not None else {},
        "runner": {
            "backend": runner.backend,
            "labels": runner.labels,
            "timeout_minutes": runner.timeout_minutes,
            "gpus": runner.gpus,
        },
        "requires": test.requires.model_dump(),
        "environment": None,
        "untestable": None,
    }
    if runner.gpus:
        plan["env"]["CUDA_VISIBLE_DEVICES"] = f"<{runner.gpus} idle GPU(s) the runner assigns to this step>"
    if runner.env is not None:
        spec = EnvSpec.from_json(runner.env.model_dump())
        plan["environment"] = _environment(repo, commit, spec, run.python if run is not None else "python3")
    if run is not None:
        path = str(Path(run.cwd) / run.file) if run.cwd not in ("", ".") else run.file
        why = testrun.absent(run, _show(repo, commit, path))
        if why and bad_sha is not None and testrun.absent(run, _show(repo, bad_sha, path)) is None:
            plan["transplant_from"] = bad_sha
            why = None
        plan["untestable"] = why
    typer.echo(json.dumps(plan, indent=2))
