"""Who may command the bot, decided from the role the permission endpoint reports and the policy."""

import pytest

from bot.adapters.policy_files import parse as parse_policy
from bot.domain.command_plan import Comment, Plan, plan
from bot.domain.commands import Start
from bot.domain.repo_policies import RepoPolicies

POLICY = RepoPolicies.one(
    parse_policy(
        """\
repository: acme/engine
watch: [{workflow: Nightly}]
tests:
  - {id: kl, match: test_kl, probe: {name: command, command: [./run.sh]}}
commands: {allow_users: [release-bot]}
""",
        "p.yaml",
    )
)


@pytest.mark.parametrize("role", ["admin", "maintain", "write"])
def test_writers_may_start(role):
    assert plan(Comment("alice", "/revert-bisect kl good=abcdef1"), role, POLICY) == Plan(
        acknowledge=True, start=Start("kl", good="abcdef1")
    )


@pytest.mark.parametrize("role", ["read", "triage", None])
def test_others_are_refused_politely_and_nothing_starts(role):
    p = plan(Comment("mallory", "/revert-bisect kl"), role, POLICY)
    assert p.acknowledge and p.start is None and not p.cancel
    assert "Sorry @mallory" in p.reply and "write, maintain or admin" in p.reply


def test_allow_list_and_cancel_and_status():
    assert plan(Comment("release-bot", "/revert-bisect kl"), None, POLICY).start == Start("kl")
    assert plan(Comment("bob", "/revert-bisect cancel"), "read", POLICY).cancel is False
    assert plan(Comment("bob", "/revert-bisect cancel"), "write", POLICY).cancel is True
    assert plan(Comment("anyone", "/revert-bisect status"), None, POLICY).status is True


def test_unknown_test_help_invalid_and_not_for_us():
    assert "known: `kl`" in plan(Comment("alice", "/revert-bisect nope"), "admin", POLICY).reply
    assert "/revert-bisect <test>" in plan(Comment("x", "/revert-bisect help"), None, POLICY).reply
    assert "7 to 40 hex digits" in plan(Comment("alice", "/revert-bisect kl good=xyz"), "admin", POLICY).reply
    assert plan(Comment("alice", "LGTM"), "admin", POLICY) == Plan()


def test_edited_comments_are_ignored_unless_the_policy_allows():
    edited = Comment("alice", "/revert-bisect kl", edited=True)
    assert plan(edited, "admin", POLICY) == Plan()
    (policy,) = POLICY.policies
    lenient = RepoPolicies.one(
        policy.model_copy(update={"commands": policy.commands.model_copy(update={"allow_edits": True})})
    )
    assert plan(edited, "admin", lenient).start == Start("kl")
