"""Which handler a delivery goes to, by (event, action); everything else is acknowledged and ignored."""

from __future__ import annotations

ROUTES: dict[tuple[str, str | None], str] = {
    ("workflow_run", "completed"): "nightly_failure",
    ("issue_comment", "created"): "command",
    ("issue_comment", "edited"): "command",  # the handler drops edits unless the policy allows them
    ("pull_request", "closed"): "revert_merged",  # the bot's revert merged: the culprit PR is told how to re-land
}


def handler_for(event: str, action: str | None) -> str | None:
    return ROUTES.get((event, action))
