"""Publishing a proven revert: branch, PR, labels, review request, and the two comments that link it.

What to publish is decided before (bot.service.conclude runs the guards): the publisher only writes what it is
told, each write looked up first. A Publisher is built once per culprit of a concluded bisection, from its Target;
each way of publishing is its own method: `open_pr` (a push GitHub refuses said on the culprit PR instead),
`comment_only` (`revert.action: comment_only`), `confirm` (the culprit reverted on the branch already), `refused`
(a guard said no)."""

from __future__ import annotations

from dataclasses import dataclass, replace

from bot.domain.bisect.model import Problem
from bot.domain.errors import WorkflowPushRefused
from bot.domain.guards import Refusal
from bot.domain.policy import Policy, RevertAction
from bot.ports import Clones, CulpritFacts, Followups, Forge, Git, PassedOver, Revert, RevertFound
from bot.service.draft import PrRecord, RevertCase
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
class Clone:
    """The bot's clone of the repository, where the revert is made and whence its branch is pushed: the clone, the
    clones' operations, the remote and the token the push uses."""

    clones: Clones
    repo: Git
    remote_url: str
    token: str

    def revert(self, culprit: str, onto: str) -> Revert:
        return self.clones.create_revert(self.repo, culprit, onto)

    def push(self, branch: str, sha: str) -> None:
        """WorkflowPushRefused: GitHub refused the branch (it changes workflow files, without the permission)."""
        self.clones.push(self.repo.path, self.remote_url, branch, sha, self.token)


@dataclass(frozen=True)
class Target:
    """Where one concluded bisection publishes about one culprit: the forge and the policy, the repository's slug and
    the bot's clone of it; the bisection, and the tests the culprit broke (never empty; the first one's runs make the
    PR's tables). `part`: the culprit's writes' keys apart from the bisection's other culprits'."""

    forge: Forge
    policy: Policy
    repo_slug: str
    clone: Clone
    bisection_id: int
    tests: tuple[str, ...]
    part: str = ""

    def __post_init__(self) -> None:
        if not self.tests:
            raise ValueError("a culprit is published with the tests it broke: `tests` is empty")

    @property
    def test_id(self) -> str:
        """The test whose runs make the PR's tables."""
        return self.tests[0]

    @property
    def named(self) -> str:
        """The tests the culprit broke, as the comments name them."""
        return ", ".join(f"`{t}`" for t in self.tests)

    def key(self, name: str) -> str:
        """The key of one of its writes (comment_once, ensure_issue): one per bisection, and per culprit (`part`)."""
        return f"{name}-{self.bisection_id}" + (f"-{self.part}" if self.part else "")


class Publisher:
    """One bisection's writes about one culprit, given the culprit's facts (bot.ports.CulpritFacts). Every write is
    looked up first: re-running one after a crash changes nothing twice. (Shadow mode never gets here:
    bot.service.conclude stops before the first write.)"""

    def __init__(self, target: Target):
        self.target = target

    def confirm(self, found: RevertFound, proof: str, facts: CulpritFacts) -> Published:
        """The culprit is reverted on the branch already: that revert's PR gets the evidence (else a revert PR of the
        culprit's still open, else the culprit PR); nothing is pushed or opened."""
        t = self.target
        existing = found.pr or self._open_revert(facts.pr, found.culprit)
        by = f"`{found.sha[:12]}`" + (f" (#{found.pr})" if found.pr else "") if found.sha else "a later change"
        text = ALREADY_COMMENT.format(
            test=t.named,
            culprit=f"#{facts.pr}" if facts.pr else f"`{found.culprit[:12]}`",
            evidence=proof,
            by=by,
            base=found.ref,
            id=t.bisection_id,
        )
        if on := existing or facts.pr:
            t.forge.comment_once(on, t.key("evidence"), text)
        return Published(existing, None, None, existing_revert=existing, evidence_on=on)

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
        """The revert on `row.head`, its PR drafted and published as the policy's `revert.action` says (the PR
        opened, or the evidence commented only); and the follow-up issue it links, found (the one asked for, the
        policy's, a cross-reference on the culprit PR) or opened when there is none."""
        t = self.target
        policy, culprit_pr = t.policy, facts.pr
        comment_only = policy.revert.action is RevertAction.COMMENT_ONLY
        followup, found = self.followup(culprit_pr, asked_followup, open_tracking=not comment_only)
        revert = t.clone.revert(culprit, row.head)
        test = policy.test(t.test_id)  # None for a slowdown's metric: a member named by its series, not a test id
        metric = test.metric if test is not None else None
        pr = draft_pr(
            RevertCase(
                row=row,
                problem=problem,
                repo=t.clone.repo,
                revert=revert,
                repo_slug=t.repo_slug,
                branch=policy.default_branch,
                test=FailingTest(t.test_id, metric.name if metric else None, metric.threshold if metric else None),
                fixes=t.tests,
                prs={culprit: PrRecord(culprit_pr, facts.title, facts.author)} if culprit_pr else {},
                followups=(followup,) if followup else (),
                followup_why=found.why if found and found.best else "",
            )
        )
        if comment_only:
            published = self.comment_only(revert.culprit, pr, evidence, facts)
        else:
            why = f" ({found.why})" if found and found.best else ""
            published = self.open_pr(revert, pr, evidence, facts, followup, why)
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

    def comment_only(self, culprit: str, draft: PullRequestDraft, evidence: str, facts: CulpritFacts) -> Published:
        """`revert.action: comment_only`: no branch, no PR; the drafted PR's evidence is commented where the culprit's
        author looks (its PR). A revert PR of the culprit's already open gets the evidence instead."""
        t = self.target
        if existing := self._open_revert(facts.pr, culprit):
            return self._confirm_open(existing, evidence, branch_name(facts.pr, culprit))
        if facts.pr:
            t.forge.comment_once(
                facts.pr,
                t.key("culprit"),
                EVIDENCE_COMMENT.format(test=t.named, base=draft.base_branch, evidence=evidence, body=draft.body),
            )
        return Published(None, None, None, evidence_on=facts.pr)

    def open_pr(
        self,
        revert: Revert,
        draft: PullRequestDraft,
        evidence: str,
        facts: CulpritFacts,
        followup: int | None = None,
        why: str = "",
    ) -> Published:
        """The revert PR: its branch pushed with the target's clone, the PR opened with the policy's labels and
        reviewers (the culprit's author first when the policy asks), the culprit PR and the follow-up told of it
        (`why`: what the follow-up shares with the culprit, said on it). A revert PR of the culprit's already open
        (ours, from a publish that crashed, or a person's) gets the evidence instead; a push GitHub refuses is said
        on the culprit PR (`_push_refused`)."""
        t = self.target
        branch = branch_name(facts.pr, revert.culprit)
        if existing := self._open_revert(facts.pr, revert.culprit):
            return self._confirm_open(existing, evidence, branch)
        try:
            t.clone.push(branch, revert.sha)
        except WorkflowPushRefused as exc:
            return self._push_refused(exc, revert, draft.base_branch, evidence, facts.pr)
        as_draft = t.policy.revert.action is RevertAction.DRAFT_PR
        pr = t.forge.open_pr(draft.title, draft.body, branch, draft.base_branch, draft=as_draft)
        t.forge.add_labels(pr.number, t.policy.revert.labels)
        notes = self._request_reviews(pr.number, facts.author)
        revert_ref = f"#{pr.number}"
        if facts.pr:
            note = f" (#{followup})" if followup else ""
            t.forge.comment_once(
                facts.pr,
                t.key("culprit"),
                CULPRIT_COMMENT.format(
                    test=t.named, base=draft.base_branch, evidence=evidence, revert_ref=revert_ref, followup_note=note
                ),
            )
            if followup:
                t.forge.comment_once(
                    followup,
                    t.key("followup"),
                    FOLLOWUP_COMMENT.format(
                        culprit_pr=facts.pr, revert_ref=revert_ref, base=draft.base_branch, why=why
                    ),
                )
        return Published(pr.number, pr.url, branch, notes=notes)

    def _open_revert(self, culprit_pr: int | None, culprit: str) -> int | None:
        """A revert PR of the culprit's that is open: ours (a publish that crashed, finished by the caller) or a
        person's."""
        if not culprit_pr:
            return None
        return self.target.forge.open_revert_of(culprit_pr, ours=branch_name(culprit_pr, culprit))

    def _confirm_open(self, pr: int, evidence: str, branch: str) -> Published:
        """An open revert PR of the culprit's gets the evidence; nothing is pushed or opened."""
        t = self.target
        text = f"revert-bisect confirms this revert ({evidence}); bisection #{t.bisection_id}."
        t.forge.comment_once(pr, t.key("evidence"), text)
        return Published(pr, None, branch, existing_revert=pr, evidence_on=pr)

    def _push_refused(
        self, exc: WorkflowPushRefused, revert: Revert, base: str, evidence: str, culprit_pr: int | None
    ) -> Published:
        """GitHub refused the revert branch's push (workflow files without the permission): said where the culprit's
        author and the maintainers look, with what would let the bot open it; no PR, and the job goes on."""
        t = self.target
        if culprit_pr:
            files = ", ".join(f"`{f}`" for f in exc.workflow_files(revert.files)) or "under `.github/workflows/`"
            t.forge.comment_once(
                culprit_pr,
                t.key("culprit"),
                WORKFLOWS_REFUSED_COMMENT.format(
                    test=t.named,
                    base=base,
                    evidence=evidence,
                    files=files,
                    why=f"GitHub answered: {exc.reason}",
                    id=t.bisection_id,
                ),
            )
        return Published(None, None, None, evidence_on=culprit_pr, refused=exc.summary)

    def _request_reviews(self, pr: int, culprit_author: str | None) -> tuple[str, ...]:
        """The policy's reviewers asked (the culprit's author first when it says so); those GitHub refused, as notes:
        a refused one stops nothing."""
        policy = self.target.policy
        reviewers = list(policy.revert.reviewers)
        if policy.revert.request_review_from_author and culprit_author:
            reviewers.insert(0, culprit_author)
        skipped = self.target.forge.request_review(pr, list(dict.fromkeys(reviewers))) or []
        return tuple(f"review not requested from {s.login}: {s.why}" for s in skipped)
