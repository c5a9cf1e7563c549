"""Why a bisection ended without an answer to act on, as a code and its facts rather than prose.

The engine states what it found ("the test also fails on GOOD ..."); what the reader should do next
depends on where it is read: a CLI user passes flags, a GitHub user edits the policy or comments a
command. So the engine returns a `Reason` and its facts, and each surface words the remedy itself
(bot/cli/wording.py, bot/service/wording.py), each from a table that covers every reason.
"""

from __future__ import annotations

import enum
from collections.abc import Mapping
from typing import Any


class Reason(enum.StrEnum):
    ENDPOINT_UNTESTABLE = "endpoint_untestable"  # facts: endpoint ("GOOD" | "BAD"), side ("good" | "bad"), sha[, log]
    BAD_PASSES = "bad_passes"  # facts: sha (BAD)
    GOOD_FAILS = "good_fails"  # facts: sha (GOOD)
    METRIC_MISSING = "metric_missing"  # facts (when a run tells why): endpoint, side, sha, log
    COMMAND_NOT_RUN = "command_not_run"  # every run exited 126/127: facts exit_code, log (the first run's)
    TIMED_OUT = "timed_out"  # facts: endpoint, side, sha, timeout_s, log
    FLAKY_UNDER_ZERO = "flaky_under_zero"  # a flake rate of 0 met contradicting results
    TOO_FLAKY = "too_flaky"  # facts: confidence
    RUNNER_ERROR = "runner_error"  # facts: endpoint, side, sha, runner, why (bot.domain.bisect.ci_failure)


Remedies = Mapping[Reason, str]  # str.format templates over the facts (plus what the surface adds, e.g. the test)


def reason_of(code: Any) -> Reason | None:
    """A stored code as a Reason; None for none, or for a code this version does not know (shown without a remedy)."""
    try:
        return Reason(code) if code else None
    except ValueError:
        return None


def worded(message: str, reason: Reason | None, facts: Mapping[str, Any], remedies: Remedies) -> str:
    """The finding, then the surface's remedy for its reason. An outcome stored before reasons has its
    whole prose in `message` and no reason: it reads as it was written."""
    return message if reason is None else f"{message}; {remedies[reason].format_map(facts)}"
