"""A policy test's probe as the argv a runner executes (never through a shell)."""

from __future__ import annotations

from bot.domain.policy import Test
from runners.step import RUNNER_PYTHON


def probe_argv(test: Test) -> list[str]:
    """`{runner_python}` stands for the interpreter the step runs under (the bot's package is installed there)."""
    if test.probe.name == "command":
        return list(test.probe.command)
    # -P: the worktree under test is the working directory and must not shadow the bot's probe.
    argv = [RUNNER_PYTHON, "-P", "-m", "runners.probes.sglang_kl"]
    for key, value in test.probe.args.items():
        flag = "--" + key.replace("_", "-")
        if value is True:
            argv.append(flag)
        elif value is not False:
            argv += [flag, str(value)]
    return argv
