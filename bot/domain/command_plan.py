"""`/revert-bisect` comments: who may say what, decided purely from the comment, the role and the repository's
policies (`commands`, the same in each of them; a test is looked up in the one that declares it)."""

from __future__ import annotations

from dataclasses import dataclass

from bot.domain.commands import Cancel, Help, Invalid, Start, Status, help_text, parse
from bot.domain.repo_policies import RepoPolicies

REFUSAL = (
    "Sorry @{user}, `/revert-bisect {verb}` needs write, maintain or admin access to this repository "
    "(or a place on its revert-bisect allow-list). A maintainer can run it for you."
)


@dataclass(frozen=True)
class Comment:
    author: str
    body: str | None
    edited: bool = False


@dataclass(frozen=True)
class Plan:
    """What to do about one comment: acknowledge it, answer it, and at most one action."""

    acknowledge: bool = False  # the `eyes` reaction
    reply: str | None = None
    start: Start | None = None
    cancel: bool = False
    status: bool = False


def plan(comment: Comment, role: str | None, policies: RepoPolicies) -> Plan:
    command = parse(comment.body)
    if command is None:
        return Plan()
    commands = policies.commands
    if comment.edited and not commands.allow_edits:
        return Plan()  # an edit must not re-run a command (nor let someone swap one in later)
    if isinstance(command, Invalid):
        return Plan(acknowledge=True, reply=command.reply)
    if isinstance(command, Help):
        return Plan(acknowledge=True, reply=help_text())
    if isinstance(command, Status):
        return Plan(acknowledge=True, status=True)
    allowed = role in commands.allow_roles or comment.author in commands.allow_users
    verb = "cancel" if isinstance(command, Cancel) else command.test
    if not allowed:
        return Plan(acknowledge=True, reply=REFUSAL.format(user=comment.author, verb=verb))
    if isinstance(command, Cancel):
        return Plan(acknowledge=True, cancel=True)
    if policies.test(command.test) is None:
        known = ", ".join(f"`{t.id}`" for t in policies.tests)
        where = "policy" if len(policies.policies) == 1 else "policies"
        return Plan(
            acknowledge=True,
            reply=f"There is no test `{command.test}` in this repository's revert-bisect {where}; known: {known}.",
        )
    return Plan(acknowledge=True, start=command)
