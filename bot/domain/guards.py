"""Safety guards on opening a revert PR: pure decisions over facts gathered from the forge and git.

A revert bot is switched off the day it reverts an innocent PR, so a culprit that is confirmed and
proven still gets no PR when any guard says no; the bisection's evidence is reported instead, with
the guard and its policy key, so a maintainer can act on it by hand.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import datetime, timedelta

from bot.domain.policy import Policy

REVERT_SUBJECT = re.compile(r'^(Revert|Reapply|Reland) "')

# Each guard, by the key its refusals carry (stored with the bisection; the trust report counts by it).
GUARDS = {
    "kill_switch": "kill switch on (revert.kill_switch_label)",
    "branch": "branch not allowed (branches)",
    "culprit_is_revert": "culprit is a revert or re-land",
    "never_revert_author": "author never reverted (revert.never_revert_authors)",
    "opt_out_label": "opt-out label (revert.opt_out_label)",
    "culprit_too_old": "culprit too old (revert.max_culprit_age_days)",
    "daily_cap": "daily cap reached (revert.daily_cap)",
}


class Refusal(str):
    """A guard's refusal: the message people read, and `key`, the guard that said no."""

    key: str

    def __new__(cls, key: str, message: str) -> Refusal:
        assert key in GUARDS, key
        refusal = super().__new__(cls, message)
        refusal.key = key
        return refusal


@dataclass(frozen=True)
class Culprit:
    subject: str
    author: str | None  # the PR author's login, else None
    committed_at: datetime
    labels: tuple[str, ...] = ()  # of its PR


@dataclass(frozen=True)
class Repository:
    branch: str  # the branch the revert would land on
    kill_switch: int | None  # an open issue carrying the kill-switch label, opened by an allowed user
    reverts_today: int  # revert PRs the bot opened on this repository since 00:00 UTC


def start_refusal(policy: Policy, kill_switch: int | None, branch: str) -> Refusal | None:
    """Whether a new bisection may start at all."""
    if kill_switch is not None:
        return Refusal(
            "kill_switch",
            f"the kill switch is on: issue #{kill_switch} carries `{policy.revert.kill_switch_label}` "
            f"(`revert.kill_switch_label`); close it to let revert-bisect act again",
        )
    if branch not in policy.branches:
        return Refusal(
            "branch",
            f"`{branch}` is not one of the branches this policy lets revert-bisect touch "
            f"(`branches`: {', '.join(policy.branches)})",
        )
    return None


def revert_refusal(policy: Policy, culprit: Culprit, repo: Repository, now: datetime) -> Refusal | None:
    """Why no revert PR may be opened for this culprit, or None."""
    guards = policy.revert
    if refusal := start_refusal(policy, repo.kill_switch, repo.branch):
        return refusal
    if REVERT_SUBJECT.match(culprit.subject):
        return Refusal(
            "culprit_is_revert", "the culprit is itself a revert (or a re-land): reverting it is a human's call"
        )
    if culprit.author and culprit.author in guards.never_revert_authors:
        return Refusal(
            "never_revert_author",
            f"the culprit is by `{culprit.author}`, whom the policy never reverts (`revert.never_revert_authors`)",
        )
    if guards.opt_out_label in culprit.labels:
        return Refusal("opt_out_label", f"the culprit's PR carries `{guards.opt_out_label}` (`revert.opt_out_label`)")
    age = now - culprit.committed_at
    if age > timedelta(days=guards.max_culprit_age_days):
        return Refusal(
            "culprit_too_old",
            f"the culprit landed {age.days} days ago, "
            f"more than `revert.max_culprit_age_days` = {guards.max_culprit_age_days:g}: "
            "too much may depend on it by now",
        )
    if repo.reverts_today >= guards.daily_cap:
        return Refusal(
            "daily_cap", f"{repo.reverts_today} revert PR(s) were opened today, the policy's `revert.daily_cap`"
        )
    return None
