"""The publisher's three ways of publishing a proven revert, each its own method (bot.service.publish): the PR
opened, the evidence commented only (`revert.action: comment_only`), a push GitHub refused; and an open revert PR of
the culprit's, which each of them tells instead of writing anything else. A recording forge and clone stand for
GitHub and git (the sandbox's tests drive the same methods against PyGithub and git over HTTP)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bot.adapters.policy_files import load
from bot.domain.errors import WorkflowPushRefused
from bot.domain.policy import RevertAction
from bot.ports import CulpritFacts, PullRef, Revert, RevertFound, Skipped
from bot.service.pr_body import PullRequestDraft
from bot.service.publish import Clone, Published, Publisher, Target

POLICY = load(Path(__file__).resolve().parents[2] / "policies" / "example.yaml")
CULPRIT = "c" * 40
FACTS = CulpritFacts(31, "The culprit", "ada", ())
REVERT = Revert(CULPRIT, "h" * 40, "r" * 40, "revert-bisect/revert-cccc", "", [".github/workflows/ci.yml"], "", "")
DRAFT = PullRequestDraft('Revert "The culprit"', "the body", REVERT.branch, "main")


@dataclass
class Forge:
    open_revert: int | None = None  # a revert PR of the culprit's that is open
    refused_reviewers: tuple[str, ...] = ()
    comments: dict[str, tuple[int, str]] = field(default_factory=dict)  # key -> (where, text)
    opened: list[tuple[str, str, bool]] = field(default_factory=list)  # (title, head, draft)
    labels: list[str] = field(default_factory=list)
    reviewers: list[str] = field(default_factory=list)

    def open_revert_of(self, culprit_pr: int, ours: str | None = None) -> int | None:
        return self.open_revert

    def comment_once(self, number: int, key: str, body: str) -> tuple[int, bool]:
        created = key not in self.comments
        self.comments.setdefault(key, (number, body))
        return 1, created

    def open_pr(self, title: str, body: str, head: str, base: str, draft: bool = False) -> PullRef:
        self.opened.append((title, head, draft))
        return PullRef(500, "https://github.com/o/r/pull/500", head, True)

    def add_labels(self, number: int, labels: list[str]) -> None:
        self.labels += labels

    def request_review(self, number: int, reviewers: list[str]) -> list[Skipped]:
        self.reviewers += reviewers
        return [Skipped(r, "not a collaborator") for r in reviewers if r in self.refused_reviewers]


@dataclass
class Clones:
    refuse: bool = False
    pushed: list[tuple[str, str]] = field(default_factory=list)

    def push(self, repo_dir: Path, remote_url: str, branch: str, sha: str, token: str) -> None:
        if self.refuse:
            raise WorkflowPushRefused(
                branch, "refusing to allow a GitHub App to create or update workflow", ".github/workflows/ci.yml"
            )
        self.pushed.append((branch, sha))


@dataclass
class Repo:
    path: Path = Path("/nonexistent")


def publisher(forge: Forge, clones: Clones, tests=("kl",), action=RevertAction.OPEN_PR) -> Publisher:
    policy = POLICY.model_copy(update={"revert": POLICY.revert.model_copy(update={"action": action})})
    # the recording forge, clones and repository have what the publisher calls of the ports
    clone = Clone(clones=clones, repo=Repo(), remote_url="https://example.invalid/o/r.git", token="t")  # type: ignore[arg-type]
    target = Target(
        forge=forge,  # type: ignore[arg-type]
        policy=policy,
        repo_slug="o/r",
        clone=clone,
        bisection_id=9,
        tests=tests,
        part="cccccccccccc",
    )
    return Publisher(target)


def test_a_target_names_the_tests_it_publishes_for_and_refuses_none():
    with pytest.raises(ValueError, match="tests"):
        publisher(Forge(), Clones(), tests=())
    target = publisher(Forge(), Clones(), tests=("kl", "kl4")).target
    assert (
        target.test_id == "kl" and target.named == "`kl`, `kl4`" and target.key("culprit") == "culprit-9-cccccccccccc"
    )


def test_open_pr_pushes_opens_labels_asks_reviews_and_tells_the_culprit_and_the_followup():
    forge, clones = Forge(refused_reviewers=("ada",)), Clones()
    published = publisher(forge, clones).open_pr(REVERT, DRAFT, "HEAD fails", FACTS, followup=77, why=" (same file)")
    branch = f"revert-bisect/31-{CULPRIT[:7]}"
    assert clones.pushed == [(branch, REVERT.sha)] and forge.opened == [(DRAFT.title, branch, False)]
    assert forge.labels == POLICY.revert.labels and forge.reviewers[0] == "ada"
    assert published == Published(500, "https://github.com/o/r/pull/500", branch, notes=published.notes)
    assert published.notes == ("review not requested from ada: not a collaborator",)
    where, text = forge.comments["culprit-9-cccccccccccc"]
    assert where == 31 and "opened #500 to revert it" in text and "(#77)" in text
    where, text = forge.comments["followup-9-cccccccccccc"]
    assert where == 77 and "#500 reverts" in text and "(same file)" in text


def test_open_pr_tells_an_open_revert_pr_instead_of_pushing_or_opening():
    forge, clones = Forge(open_revert=400), Clones()
    published = publisher(forge, clones).open_pr(REVERT, DRAFT, "HEAD fails", FACTS, followup=77)
    assert clones.pushed == [] and forge.opened == [] and list(forge.comments) == ["evidence-9-cccccccccccc"]
    assert forge.comments["evidence-9-cccccccccccc"] == (
        400,
        "revert-bisect confirms this revert (HEAD fails); bisection #9.",
    )
    assert published.existing_revert == published.pr_number == published.evidence_on == 400


def test_a_refused_push_is_said_on_the_culprit_pr_and_opens_nothing():
    forge, clones = Forge(), Clones(refuse=True)
    published = publisher(forge, clones).open_pr(REVERT, DRAFT, "HEAD fails", FACTS, followup=77)
    assert forge.opened == [] and list(forge.comments) == ["culprit-9-cccccccccccc"]
    where, text = forge.comments["culprit-9-cccccccccccc"]
    assert where == 31 and "refused the push" in text and "`.github/workflows/ci.yml`" in text and "#9" in text
    assert (
        published.pr_number is None
        and published.evidence_on == 31
        and "GitHub refused the push" in (published.refused or "")
    )


def test_comment_only_comments_the_evidence_on_the_culprit_pr_and_pushes_nothing():
    forge, clones = Forge(), Clones()
    published = publisher(forge, clones, action=RevertAction.COMMENT_ONLY).comment_only(
        CULPRIT, DRAFT, "HEAD fails", FACTS
    )
    assert clones.pushed == [] and forge.opened == [] and list(forge.comments) == ["culprit-9-cccccccccccc"]
    where, text = forge.comments["culprit-9-cccccccccccc"]
    assert where == 31 and "`comment_only`, so no revert PR was opened" in text and "the body" in text
    assert published == Published(None, None, None, evidence_on=31)


def test_comment_only_tells_an_open_revert_pr_instead():
    forge = Forge(open_revert=400)
    published = publisher(forge, Clones(), action=RevertAction.COMMENT_ONLY).comment_only(
        CULPRIT, DRAFT, "HEAD fails", FACTS
    )
    assert list(forge.comments) == ["evidence-9-cccccccccccc"] and forge.comments["evidence-9-cccccccccccc"][0] == 400
    assert published.existing_revert == 400


def test_confirm_puts_the_evidence_on_the_revert_already_merged():
    forge, clones = Forge(), Clones()
    found = RevertFound(CULPRIT, "ab" * 20, "Revert the culprit (#35)", "main", "message")
    published = publisher(forge, clones).confirm(found, "P=0.999", FACTS)
    where, text = forge.comments["evidence-9-cccccccccccc"]
    assert where == 35 and "which `abababababab` (#35) already reverts on `main`" in text and "#31" in text
    assert published == Published(35, None, None, existing_revert=35, evidence_on=35) and clones.pushed == []


def test_a_slowdowns_revert_is_drafted_for_its_metrics_which_are_no_policy_test(monkeypatch):
    """A slowdown of several metrics is one group bisection whose members are the metrics' series (not the policy's
    test ids): `on_slowdown: revert` drafts and opens the revert PR for them (it raised AttributeError on the policy's
    lookup of the first member, and `revert-bisect demo --perf --revert` opened nothing)."""
    perf = load(Path(__file__).resolve().parents[2] / "policies" / "perf" / "example-perf.yaml")
    perf = perf.model_copy(update={"followups": {31: 77}})
    drafted: list = []

    def draft(case):
        drafted.append(case)
        return DRAFT

    monkeypatch.setattr("bot.service.publish.draft_pr", draft)

    @dataclass
    class Reverting(Clones):
        def create_revert(self, repo, culprit: str, onto: str) -> Revert:
            return REVERT

    forge, clones = Forge(), Reverting()
    members = ("bs8_output_throughput", "bs32_output_throughput")
    target = Target(
        forge=forge,  # type: ignore[arg-type]
        policy=perf,
        repo_slug="mini-sglang/mini-sglang",
        clone=Clone(clones=clones, repo=Repo(), remote_url="https://example.invalid/o/r.git", token="t"),  # type: ignore[arg-type]
        bisection_id=9,
        tests=members,
    )
    row = type("Row", (), {"head": "h" * 40})()
    published, _, followup = Publisher(target).revert(row, None, CULPRIT, FACTS, "HEAD reads worse", None)  # type: ignore[arg-type]
    assert published.pr_number == 500 and followup == 77 and clones.pushed
    (case,) = drafted
    assert case.test.name == "bs8_output_throughput" and case.test.metric is None and case.fixes == members
