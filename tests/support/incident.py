"""SGLang's track-boundary incident as public data records it (tests/fixtures/sglang/followup_incident.json), served
by a sandbox: the culprit #31369, the follow-up #29792 and PRs of the same weeks, with their recorded files."""

from __future__ import annotations

import json
from pathlib import Path

from sandbox import SandboxState

FIXTURE = Path(__file__).parents[1] / "fixtures" / "sglang" / "followup_incident.json"
BOT = "revert-bisect-bot"


def incident() -> dict:
    return json.loads(FIXTURE.read_text())


def seed_incident(state: SandboxState, *, leave_out: tuple[int, ...] = ()) -> str:
    """The incident's repository and pull requests in `state` (`leave_out`: numbers not seeded); its slug. The bot's
    token is `sandbox-token-revert-bisect-bot`."""
    data = incident()
    slug = data["repo"]
    state.create_repo(slug)
    state.add_user(BOT, token=f"sandbox-token-{BOT}")
    state.set_permission(slug, BOT, "write")
    for p in data["pulls"]:
        if p["number"] in leave_out:
            continue
        issue = state.add_pull(
            slug,
            number=p["number"],
            title=p["title"],
            body=p["body"],
            user=p["author"],
            head=f"{p['author']}/pr-{p['number']}",
            merged=p["merged"],
            merged_at=p.get("merged_at"),
            created_at=p["created_at"],
            state=p["state"],
        )
        issue.pull.files = p["files"]
    return slug
