"""Publishing a proven revert: branch, PR, labels, review request, and the two comments that link it.

What to publish is decided before (bot.service.conclude runs the guards): the publisher only writes what it is
told, each write looked up first. A Publisher is built once per concluded bisection from its Target."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.domain.bisect.model import Problem
from bot.domain.errors import WorkflowPushRefused
from bot.domain.guards import Refusal
from bot.domain.policy import Policy, RevertAction
from bot.ports import Clones, CulpritFacts, Followups, Forge, Git, PassedOver, Revert, RevertFound
from bot.service.draft import PrRecord
from bot.service.draft import draft as draft_pr
from bot.service.pr_body import FailingTest, PullRequestDraft

CULPRIT_COMMENT = (
    "revert-bisect found that this PR breaks {test} on `{base}` ({evidence}) "
    "and opened {revert_ref} to revert it.\n\n"
    "The evidence (bisect table, A/B of HEAD vs HEAD + revert, a replayable bisect log) is in that PR. "
    "Once the proper fix is ready{followup_note}, the change can be re-landed with it."
)
EVIDENCE_COMMENT = (
    "revert-bisect found that this PR breaks {test} on `{base}` ({evidence}). The policy's `revert.action` is "
    "`comment_only`, so no revert PR was opened: the revert below was proven on `{base}`, and a maintainer can "
    "open it by hand.\n\n<details>\n<summary>The evidence: bisect table, A/B of HEAD vs HEAD + revert, a replayable "
    "bisect log</summary>\n\n{body}\n\n</details>"
)
REFUSED_COMMENT = (
    "revert-bisect bisected {test} to this PR ({evidence}) but opened no revert: {why}. "
    "The runs are in bisection #{id}; a maintainer can revert by hand."
)
ALREADY_COMMENT = (
    "revert-bisect bisected {test} to {culprit} ({evidence}), which {by} already reverts on `{base}`: this confirms "
    "that revert, and no other was opened. The runs are in bisection #{id}."
)
WORKFLOWS_REFUSED_COMMENT = (
    "revert-bisect found that this PR breaks {test} on `{base}` ({evidence}) and proved its revert, but GitHub "
    "refused the push of the revert branch: the revert changes workflow files ({files}), and {why}. "
    "No revert PR was opened. To let the bot open it, grant its GitHub App the `workflows: write` permission "
    "(or, for a personal access token, the `workflow` scope) and ask again with `/revert-bisect`; or revert by "
    "hand. The runs are in bisection #{id}."
)
FOLLOWUP_COMMENT = (
    "revert-bisect bisected a regression on `{base}` to #{culprit_pr}, which {revert_ref} reverts to bring the "
    "nightly back to green. The proper fix looks to be worked on here{why}: once it is ready, #{culprit_pr} can be "
    "re-landed together with it (revert the revert in the same change)."
)


@dataclass(frozen=True)
class Published:
    pr_number: int | None
    pr_url: str | None
    branch: str | None  # None: nothing pushed (`revert.action: comment_only`)
    existing_revert: int | None = None
    evidence_on: int | None = None  # the PR the evidence was commented on instead of opening one
    refused: str | None = None  # GitHub refused the revert branch's push (workflow files without the permission)
    notes: tuple[str, ...] = ()  # what was skipped on the way, for the status comment (a reviewer GitHub refused)
    passed_over: tuple[PassedOver, ...] = ()  # the follow-up's candidates not linked, for the dashboard


def branch_name(culprit_pr: int | None, culprit: str) -> str:
    return f"revert-bisect/{culprit_pr or 'commit'}-{culprit[:7]}"


@dataclass(frozen=True)
class Target:
    """Where one concluded bisection publishes, and what it is about: the forge and the policy, the repository (its
    slug, the bot's clone, the remote and the token the revert's branch is pushed with), the bisection and its test."""

    forge: Forge
    policy: Policy
    repo_slug: str
    repo: Git
    remote_url: str
    token: str
    bisection_id: int
    test_id: str
    clones: Clones
    tests: tuple[str, ...] = ()  # a culprit of a group (bot.domain.bisect.group): every test it broke, test_id first
    part: str = ""  # a group's culprit: its writes' keys apart from the group's other culprits'

    @property
    def named(self) -> str:
        """The tests the culprit broke, as the comments name them."""
        return ", ".join(f"`{t}`" for t in (self.tests or (self.test_id,)))

    def key(self, name: str) -> str:
        """The key of one of its writes (comment_once, ensure_issue): one per bisection, and per culprit of a group."""
        return f"{name}-{self.bisection_id}" + (f"-{self.part}" if self.part else "")


class Publisher:
    """One bisection's writes about its culprit, given the culprit's facts (bot.ports.CulpritFacts)."""

    def __init__(self, target: Target):
        self.target = target

    def confirm(self, found: RevertFound, proof: str, facts: CulpritFacts) -> Published:
        """The culprit is reverted on the branch already: that revert's PR gets the evidence, nothing is opened."""
        return self.publish(None, None, proof, facts.pr, facts.author, None, already=found)

    def refused(self, facts: CulpritFacts, evidence: str, refusal: Refusal) -> None:
        """A guard said no: the culprit PR (if any) is told why, so its author knows without the dashboard."""
        t = self.target
        if facts.pr:
            t.forge.comment_once(
                facts.pr,
                t.key("culprit"),
                REFUSED_COMMENT.format(test=t.named, evidence=evidence, why=refusal, id=t.bisection_id),
            )

    def followup(
        self, culprit_pr: int | None, asked: int | None, open_tracking: bool = True
    ) -> tuple[int | None, Followups | None]:
        """Where the proper fix is worked on: the one asked for, the policy's, else what the forge finds (with what it
        searched); when nothing fits, a tracking issue opened (`open_tracking`). Nothing else found is named: what was
        passed over is for the dashboard (`Followups.passed_over`)."""
        t = self.target
        followup, found = asked or t.policy.followups.get(culprit_pr or -1), None
        if followup is None and culprit_pr:
            found = t.forge.followup_for(culprit_pr)
            followup = found.best
        if followup is None and culprit_pr and open_tracking:  # nowhere to track the proper fix yet: open the place
            followup, _ = t.forge.ensure_issue(
                f"tracking-{culprit_pr}",
                f"Fix the regression from #{culprit_pr} so it can be re-landed",
                f"revert-bisect bisected {t.named} to #{culprit_pr} and proved that reverting it fixes the "
                "test. This issue tracks the proper fix.",
            )
        return followup, found

    def revert(
        self, row, problem: Problem, culprit: str, facts: CulpritFacts, evidence: str, asked_followup: int | None
    ) -> tuple[Published, PullRequestDraft, int | None]:
        """The revert on `row.head`, its PR drafted and published; and the follow-up issue it links, found (the one
        asked for, the policy's, a cross-reference on the culprit PR) or opened when there is none."""
        t = self.target
        policy, culprit_pr = t.policy, facts.pr
        comment_only = policy.revert.action is RevertAction.COMMENT_ONLY
        followup, found = self.followup(culprit_pr, asked_followup, open_tracking=not comment_only)
        revert = t.clones.create_revert(t.repo, culprit, row.head)
        test = policy.test(t.test_id)
        prs = {culprit: PrRecord(culprit_pr, facts.title, facts.author)} if culprit_pr else {}
        pr = draft_pr(
            row,
            problem,
            t.repo,
            revert,
            repo_slug=t.repo_slug,
            branch=policy.default_branch,
            test=FailingTest(
                t.test_id, test.metric.name if test.metric else None, test.metric.threshold if test.metric else None
            ),
            prs=prs,
            followups=[followup] if followup else [],
            followup_why=found.why if found and found.best else "",
            fixes=t.tests,
        )
        why = f" ({found.why})" if found and found.best else ""
        published = self.publish(revert, pr, evidence, culprit_pr, facts.author, followup, why=why)
        if found is not None:  # what was searched for the follow-up, said in the status comment
            told = (
                f"#{found.best} ({found.why})"
                if found.best
                else "nothing that fits" + (f": opened #{followup}" if followup else "")
            )
            published = replace(
                published,
                notes=(*published.notes, f"follow-up: {told}; searched {found.searched}"),
                passed_over=found.passed_over,
            )
        return published, pr, followup

    def publish(
        self,
        revert: Revert | None,
        draft: PullRequestDraft | None,
        evidence: str,
        culprit_pr: int | None,
        culprit_author: str | None,
        followup: int | None,
        already: RevertFound | None = None,
        why: str = "",
    ) -> Published:
        """Every write is looked up first: re-running this after a crash changes nothing twice. (Shadow mode never
        gets here: bot.service.conclude stops before the first write.) `already`: the culprit is reverted on the
        branch (no `revert` or `draft` then); like an open revert PR, that revert's PR gets the evidence, else the
        culprit PR does, and nothing is pushed or opened. The revert's branch is pushed with the target's clones.
        `why`: what the follow-up shares with the culprit, said on it."""
        t = self.target
        forge, policy, bisection_id = t.forge, t.policy, t.bisection_id
        branch = branch_name(culprit_pr, (already or revert).culprit)
        existing = already.pr if already else None
        if existing is None and culprit_pr:
            existing = forge.open_revert_of(culprit_pr, ours=branch)  # our own PR: a crashed publish, finished below
        if existing or already:
            if already:
                by = (
                    f"`{already.sha[:12]}`" + (f" (#{already.pr})" if already.pr else "")
                    if already.sha
                    else "a later change"
                )
                text = ALREADY_COMMENT.format(
                    test=t.named,
                    culprit=f"#{culprit_pr}" if culprit_pr else f"`{already.culprit[:12]}`",
                    evidence=evidence,
                    by=by,
                    base=already.ref,
                    id=bisection_id,
                )
            else:
                text = f"revert-bisect confirms this revert ({evidence}); bisection #{bisection_id}."
            if on := existing or culprit_pr:
                forge.comment_once(on, t.key("evidence"), text)
            return Published(existing, None, None if already else branch, existing_revert=existing, evidence_on=on)
        if (
            policy.revert.action is RevertAction.COMMENT_ONLY
        ):  # no branch, no PR: the evidence where the culprit's author looks
            if culprit_pr:
                forge.comment_once(
                    culprit_pr,
                    t.key("culprit"),
                    EVIDENCE_COMMENT.format(test=t.named, base=draft.base_branch, evidence=evidence, body=draft.body),
                )
            return Published(None, None, None, evidence_on=culprit_pr)
        try:
            t.clones.push(t.repo.path, t.remote_url, branch, revert.sha, t.token)
        except WorkflowPushRefused as exc:  # said where the culprit's author and the maintainers look; the job goes on
            why = f"GitHub answered: {exc.reason}"
            if culprit_pr:
                files = ", ".join(f"`{f}`" for f in exc.workflow_files(revert.files)) or "under `.github/workflows/`"
                forge.comment_once(
                    culprit_pr,
                    t.key("culprit"),
                    WORKFLOWS_REFUSED_COMMENT.format(
                        test=t.named, base=draft.base_branch, evidence=evidence, files=files, why=why, id=bisection_id
                    ),
                )
            return Published(None, None, None, evidence_on=culprit_pr, refused=exc.summary)
        pr = forge.open_pr(
            draft.title, draft.body, branch, draft.base_branch, draft=policy.revert.action is RevertAction.DRAFT_PR
        )
        forge.add_labels(pr.number, policy.revert.labels)
        reviewers = list(policy.revert.reviewers)
        if policy.revert.request_review_from_author and culprit_author:
            reviewers.insert(0, culprit_author)
        skipped = forge.request_review(pr.number, list(dict.fromkeys(reviewers))) or []  # a refused one stops nothing
        notes = tuple(f"review not requested from {s.login}: {s.why}" for s in skipped)
        revert_ref = f"#{pr.number}"
        if culprit_pr:
            note = f" (#{followup})" if followup else ""
            forge.comment_once(
                culprit_pr,
                t.key("culprit"),
                CULPRIT_COMMENT.format(
                    test=t.named, base=draft.base_branch, evidence=evidence, revert_ref=revert_ref, followup_note=note
                ),
            )
        if followup and culprit_pr:
            forge.comment_once(
                followup,
                t.key("followup"),
                FOLLOWUP_COMMENT.format(culprit_pr=culprit_pr, revert_ref=revert_ref, base=draft.base_branch, why=why),
            )
        return Published(pr.number, pr.url, branch, notes=notes)
