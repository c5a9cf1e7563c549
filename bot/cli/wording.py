"""The engine's reasons in the CLI's terms: its flags (the GitHub surface says policy keys and commands)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from bot.domain.reasons import Reason, Remedies, reason_of, worded

REMEDIES: Remedies = {
    Reason.ENDPOINT_UNTESTABLE: "pick a {endpoint} revision the test can run on (--{side})",
    Reason.BAD_PASSES: "check the command and the BAD revision (--bad)",
    Reason.GOOD_FAILS: "pass an older --good",
    Reason.METRIC_MISSING: "check --metric-regex / --metric-file",
    Reason.COMMAND_NOT_RUN: (
        "check that COMMAND runs in a checkout of the --bad revision (a relative path is taken from the repository "
        "root, or from your checkout when the commits lack it)"
    ),
    Reason.TIMED_OUT: "raise --timeout",
    Reason.FLAKY_UNDER_ZERO: "re-run with --flake-rate auto",
    Reason.TOO_FLAKY: "raise --flake-rate or lower --confidence",
    Reason.RUNNER_ERROR: "give {runner} what the test needs (memory, model files, setup), then run again (see --log)",
}


def said(message: str | None, reason: Any = None, facts: Mapping[str, Any] | None = None) -> str:
    """An outcome's message as the CLI prints it, from the engine's Outcome or a stored one's fields."""
    return worded(message or "", reason_of(reason), facts or {}, REMEDIES)
