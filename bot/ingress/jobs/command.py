"""The `/revert-bisect` job: acknowledge, check who asked, answer, and run what was asked."""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Protocol

from bot.domain.command_plan import Comment, Plan, plan
from bot.domain.repo_policies import RepoPolicies
from bot.domain.requests import StartRequest
from bot.ports import Forge
from bot.ports.store import ClaimedJob

log = logging.getLogger("revert_bisect.command")


class Bisections(Protocol):
    """What the command handler needs from whatever runs bisections in this deployment."""

    def start(self, request: StartRequest, forge: Forge) -> None: ...

    def status(self, repo: str, thread: int) -> str: ...

    def cancel(self, repo: str, thread: int, by: str) -> str: ...


class CommandJob:
    def __init__(self, policies: Mapping[str, RepoPolicies], forge_for: Callable[[str], Forge], bisections: Bisections):
        self.policies = policies
        self.forge_for = forge_for
        self.bisections = bisections

    def __call__(self, job: ClaimedJob) -> None:
        payload = job.payload
        repo = (payload.get("repository") or {}).get("full_name")
        policies = self.policies.get(repo)
        comment = payload.get("comment") or {}
        issue = payload.get("issue") or {}
        author = (comment.get("user") or {}).get("login")
        if policies is None or not author or not issue.get("number") or not comment.get("id"):
            log.info("delivery %s: no policy for %s or not a usable comment; ignored", job.delivery_id, repo)
            return
        said = Comment(author, comment.get("body"), payload.get("action") == "edited")
        if plan(said, None, policies) == Plan():  # not addressed to the bot (or an ignored edit): no API call at all
            return
        forge = self.forge_for(repo)
        decided = plan(said, forge.role(author), policies)
        thread = issue["number"]
        forge.react(thread, comment["id"], "eyes")
        reply = decided.reply
        if decided.status:
            reply = self.bisections.status(repo, thread)
        elif decided.cancel:
            reply = self.bisections.cancel(repo, thread, author)
        if reply:
            forge.comment_once(thread, f"reply-{comment['id']}", reply)
        if decided.start:
            s = decided.start
            self.bisections.start(
                StartRequest(repo, thread, comment["id"], author, s.test, s.good, s.bad, s.followup, s.dry_run), forge
            )
