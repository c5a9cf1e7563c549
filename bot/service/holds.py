"""A kill-switch refusal where people look, not only in the log: one comment on the kill-switch issue per
held-back thing (the red run, the bisection not started, the revert not opened), and a record the dashboard's
trust page lists."""

from __future__ import annotations

from bot.domain.policy import Policy
from bot.ports import Forge
from bot.ports.store import Hold, HoldLog

HELD_COMMENT = (
    "This issue carries `{label}` (`revert.kill_switch_label`), so revert-bisect held back {what}.{link} "
    "Close the issue to let revert-bisect act again."
)


def kill_switch(forge: Forge, policy: Policy) -> int | None:
    """The open kill-switch issue, if any; read once per decision (the start, the revert): it may be turned on while
    a bisection runs."""
    return forge.kill_switch(
        policy.revert.kill_switch_label, policy.revert.kill_switch_roles, policy.commands.allow_users
    )


def hold(forge: Forge, holds: HoldLog, policy: Policy, issue: int, held: Hold) -> None:
    """Idempotent: a retried job edits the same comment and records nothing twice."""
    link = f" See {held.link}." if held.link else ""
    forge.comment_once(
        issue, f"held-{held.key}", HELD_COMMENT.format(what=held.what, link=link, label=policy.revert.kill_switch_label)
    )
    holds.record(held)


def held_start(forge: Forge, origin: dict, key: str, issue: int) -> Hold:
    """What a start refused by the kill switch held back: a red run's bisection, or one asked for in a thread."""
    site, test = forge.site, origin.get("test")
    if origin.get("run"):
        link = f"{site}/actions/runs/{origin['run']}"
        what = (
            f"the bisection of red run {origin['run']} (`{test}` failed over "
            f"`{str(origin.get('good'))[:12]}..{str(origin.get('bad'))[:12]}`), not started"
        )
    else:
        link = f"{site}/issues/{origin.get('thread')}"
        what = (
            f"the bisection of `{test}` asked for by `@{origin.get('requested_by')}` "
            f"in #{origin.get('thread')}, not started"
        )
    return Hold(f"start-{key}", origin.get("repo") or forge.slug, "kill_switch", what, link, issue)


def held_revert(
    forge: Forge, repo_slug: str, bisection_id: int, culprit: str, culprit_pr: int | None, issue: int
) -> Hold:
    link = f"{forge.site}/pull/{culprit_pr}" if culprit_pr else None
    what = (
        f"the revert of `{culprit[:12]}`{f' (#{culprit_pr})' if culprit_pr else ''}, found and proven by bisection "
        f"#{bisection_id}, not opened"
    )
    return Hold(f"revert-{repo_slug}-{bisection_id}", repo_slug, "kill_switch", what, link, issue, culprit)
