"""The engine's reasons in GitHub's terms: the policy's keys and the /revert-bisect command, never
a CLI flag (a reader of a comment has no command line; they have the policy file and the thread).

`said` returns Markdown: the engine's finding escaped as text, the remedy's policy keys and its
command in code spans (a command built from a test's name must stay copyable, whatever the name)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.domain.markdown import code, text
from bot.domain.reasons import Reason, reason_of

# Reason -> (the remedy, Markdown over the facts; the command to comment, a template over the facts and `test`)
REMEDIES: Mapping[Reason, tuple[str, str | None]] = {
    Reason.ENDPOINT_UNTESTABLE: ("pick a {endpoint} commit the test can run on", "/revert-bisect {test} {side}=<sha>"),
    Reason.BAD_PASSES: (
        "check the test's `probe` in the policy (its file, cases and environment), and the BAD commit",
        "/revert-bisect {test} bad=<sha>",
    ),
    Reason.GOOD_FAILS: ("pass an older good commit", "/revert-bisect {test} good=<sha>"),
    Reason.METRIC_MISSING: (
        "check that the test prints the metric `metric.name` names in the form `results.log.metric` reads",
        None,
    ),
    Reason.COMMAND_NOT_RUN: (
        "check the test's `probe` in the policy: its command must exist and be executable at the tested commits",
        None,
    ),
    Reason.TIMED_OUT: ("raise the test's `runner.timeout_minutes` in the policy", None),
    Reason.FLAKY_UNDER_ZERO: ("set `bisect.flake_rate: auto` in the policy and bisect again", None),
    Reason.TOO_FLAKY: ("raise `bisect.flake_rate` or lower `bisect.confidence` in the policy", None),
    Reason.RUNNER_ERROR: (
        "fix the runner {runner} (its memory, model files, setup) or point the test's `runner.labels` in the policy at "
        "another, then bisect again",
        "/revert-bisect {test} good=<sha>",
    ),
}


def said(test: str, message: str | None, reason: Any = None, facts: Mapping[str, Any] | None = None) -> str:
    """An outcome's message as a GitHub comment words it (Markdown); `test` fills the command's <test>."""
    finding = text(message or "")
    code_of = reason_of(reason)
    if code_of is None:
        return finding
    facts = {**(facts or {}), "test": test}
    prose, command = REMEDIES[code_of]
    remedy = prose.format_map({k: text(str(v)) for k, v in facts.items()})
    return f"{finding}; {remedy}" + (f": {code(command.format_map(facts))}" if command else "")
