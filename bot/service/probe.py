"""A policy test as what a runner executes: the repository's own test file (runners.spec.TestRun), or an argv
(never through a shell), and what the runner must hold for it (runners.spec.Needs)."""

from __future__ import annotations

from bot.domain.policy import Test
from runners.spec import Needs, TestRun
from runners.testrun import argv_of


def test_run(test: Test, cases: tuple[str, ...] = (), bad: str | None = None) -> TestRun | None:
    """The commit's own test narrowed to `cases` (what failed on the red run; all of the file when empty); None for a
    `command` probe. `bad`: the commit whose copy of the file stands in where a commit lacks it (`missing:
    transplant`)."""
    probe = test.probe
    if probe.name == "command" or probe.file is None:
        return None
    return TestRun(
        probe.name,
        probe.file,
        probe.cwd,
        probe.python,
        tuple(probe.args),
        tuple(sorted(probe.env.items())),
        tuple(cases),
        bad if probe.missing == "transplant" else None,
        tuple(probe.build),
    )


def needs(test: Test) -> Needs | None:
    wants = test.requires
    if not (test.runner.gpus or wants.hf_models or wants.hf_datasets or wants.files):
        return None
    return Needs(
        test.runner.gpus,
        test.runner.gpu_idle_timeout_minutes * 60,
        tuple(wants.hf_models),
        tuple(wants.files),
        tuple(wants.hf_datasets),
    )


def probe_argv(test: Test, cases: tuple[str, ...] = ()) -> list[str]:
    """The argv a step runs (relative to the test's `cwd` for the repository's own test)."""
    run = test_run(test, cases)
    return list(test.probe.command) if run is None else argv_of(run)
