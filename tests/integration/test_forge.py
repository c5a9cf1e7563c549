"""The forge adapter through real PyGithub against the sandbox: every write looked up first."""

import subprocess

import pytest

from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.github.push import push_branch
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("forge")
    scenario = build(tmp / "scenario", commits=10, seed=2)
    state = SandboxState(tmp / "sandbox")
    seeded = seed_from_scenario(state, tmp / "scenario")
    base, stop = run_in_thread(state)
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    yield dict(scenario=scenario, state=state, seeded=seeded, base=base, forge=forge, tmp=tmp)
    stop()


def test_roles_come_from_the_permission_endpoint(sandbox):
    forge = sandbox["forge"]
    assert forge.role("sandbox-maintainer") == "maintain"
    assert forge.role("revert-bisect-bot") == "write"
    sandbox["state"].add_user("passer-by")  # a GitHub user without access: 200, permission none, role_name ""
    assert forge.role("passer-by") is None
    assert forge.role("no-such-user") is None  # 404
    sandbox["state"].add_user("reader-1")
    sandbox["state"].set_permission(sandbox["seeded"].repo, "reader-1", "read")
    assert forge.role("reader-1") == "read"


def test_comment_once_updates_instead_of_duplicating(sandbox):
    forge, followup = sandbox["forge"], sandbox["scenario"].followup["number"]
    first, created = forge.comment_once(followup, "status-1", "calibrating")
    again, created_again = forge.comment_once(followup, "status-1", "found")
    assert created and not created_again and first == again
    bodies = [c.body for c in forge.repo.get_issue(followup).get_comments() if "revert-bisect:status-1" in c.body]
    assert len(bodies) == 1 and bodies[0].endswith("found")


def test_ensure_issue_is_idempotent(sandbox):
    forge = sandbox["forge"]
    number, created = forge.ensure_issue("tracking-42", "Fix it", "body")
    same, created_again = forge.ensure_issue("tracking-42", "Fix it", "body")
    assert created and not created_again and number == same


def test_pull_for_commit_and_followup_from_the_timeline(sandbox):
    forge, scenario = sandbox["forge"], sandbox["scenario"]
    assert forge.pulls_for_commit(scenario.culprit) == [scenario.culprit_pr]
    found = forge.followup_for(scenario.culprit_pr)
    assert found.best == scenario.followup["number"] and "names the culprit" in found.why


def test_push_and_open_pr_once_without_leaving_the_token_behind(sandbox):
    forge, seeded = sandbox["forge"], sandbox["seeded"]
    token = seeded.tokens["revert-bisect-bot"]
    clone = sandbox["tmp"] / "clone"
    subprocess.run(
        [
            "git",
            "-c",
            f"http.extraHeader=Authorization: Bearer {token}",
            "clone",
            "-q",
            f"{sandbox['base']}/{seeded.repo}.git",
            str(clone),
        ],
        check=True,
    )
    ident = ["-c", "user.name=t", "-c", "user.email=t@example.com"]
    subprocess.run(
        ["git", "-C", str(clone), *ident, "commit", "-q", "--allow-empty", "-m", "a change to propose"], check=True
    )
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    push_branch(clone, f"{sandbox['base']}/{seeded.repo}.git", "revert-bisect/test-branch", head, token)
    assert token not in (clone / ".git" / "config").read_text()
    pr = forge.open_pr('Revert "x"', "Reverts o/r#1", "revert-bisect/test-branch", "main")
    again = forge.open_pr('Revert "x"', "Reverts o/r#1", "revert-bisect/test-branch", "main")
    assert pr.created and not again.created and pr.number == again.number
    forge.add_labels(pr.number, ["revert-bisect"])
    assert [label.name for label in forge.repo.get_issue(pr.number).labels] == ["revert-bisect"]


def test_an_open_revert_of_the_culprit_gets_the_evidence_not_a_second_pr(sandbox):
    from pathlib import Path

    from bot.adapters.git.clones import GIT_CLONES
    from bot.adapters.git.revert import Revert
    from bot.adapters.policy_files import load
    from bot.ports import CulpritFacts
    from bot.service.pr_body import PullRequestDraft
    from bot.service.publish import Clone, Publisher, Target

    forge, scenario, seeded = sandbox["forge"], sandbox["scenario"], sandbox["seeded"]
    token = seeded.tokens["revert-bisect-bot"]
    clone = sandbox["tmp"] / "clone-2"
    subprocess.run(
        [
            "git",
            "-c",
            f"http.extraHeader=Authorization: Bearer {token}",
            "clone",
            "-q",
            f"{sandbox['base']}/{seeded.repo}.git",
            str(clone),
        ],
        check=True,
    )
    subprocess.run(
        [
            "git",
            "-C",
            str(clone),
            "-c",
            "user.name=h",
            "-c",
            "user.email=h@example.com",
            "revert",
            "--no-edit",
            scenario.culprit,
        ],
        check=True,
        capture_output=True,
    )
    head = subprocess.run(
        ["git", "-C", str(clone), "rev-parse", "HEAD"], capture_output=True, text=True, check=True
    ).stdout.strip()
    push_branch(clone, f"{sandbox['base']}/{seeded.repo}.git", "human/revert", head, token)
    human = forge.open_pr("Revert by hand", f"Reverts {seeded.repo}#{scenario.culprit_pr}", "human/revert", "main")

    policy = load(Path(__file__).resolve().parents[2] / "policies" / "example.yaml")
    revert = Revert(scenario.culprit, scenario.bad, "0" * 40, "unused", "", [], "", "")
    draft = PullRequestDraft('Revert "x"', "body", "revert-bisect/x", "main")
    before = {p.number for p in forge.repo.get_pulls(state="open")}
    remote = f"{sandbox['base']}/{seeded.repo}.git"
    publisher = Publisher(
        Target(
            forge=forge,
            policy=policy,
            repo_slug=seeded.repo,
            clone=Clone(clones=GIT_CLONES, repo=GIT_CLONES.open(clone), remote_url=remote, token=token),
            bisection_id=77,
            tests=("kl",),
        )
    )
    facts = CulpritFacts(scenario.culprit_pr, None, None, ())
    for _ in range(2):  # a retry changes nothing
        result = publisher.open_pr(revert, draft, "HEAD fails, HEAD + revert passes", facts)
        assert result.existing_revert == human.number and result.pr_number == human.number
    assert {p.number for p in forge.repo.get_pulls(state="open")} == before
    evidence = [c.body for c in forge.repo.get_issue(human.number).get_comments() if "bisection #77" in c.body]
    assert len(evidence) == 1
