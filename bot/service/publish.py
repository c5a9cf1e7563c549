"""Publishing a proven revert: branch, PR, labels, review request, and the two comments that link it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from bot.adapters.github.forge import GitHubForge, push_branch
from bot.domain.policy import Policy, RevertAction
from bot.adapters.git.already import RevertFound
from bot.adapters.git.revert import Revert
from bot.service.pr_body import PullRequestDraft

CULPRIT_COMMENT = (
    "revert-bisect found that this PR breaks `{test}` on `{base}` ({evidence}) and opened {revert_ref} to revert it.\n\n"
    "The evidence (bisect table, A/B of HEAD vs HEAD + revert, a replayable bisect log) is in that PR. "
    "Once the proper fix is ready{followup_note}, the change can be re-landed with it."
)
EVIDENCE_COMMENT = (
    "revert-bisect found that this PR breaks `{test}` on `{base}` ({evidence}). The policy's `revert.action` is "
    "`comment_only`, so no revert PR was opened: the revert below was proven on `{base}`, and a maintainer can "
    "open it by hand.\n\n<details>\n<summary>The evidence: bisect table, A/B of HEAD vs HEAD + revert, a replayable "
    "bisect log</summary>\n\n{body}\n\n</details>"
)
ALREADY_COMMENT = (
    "revert-bisect bisected `{test}` to {culprit} ({evidence}), which {by} already reverts on `{base}`: this confirms "
    "that revert, and no other was opened. The runs are in bisection #{id}."
)
FOLLOWUP_COMMENT = (
    "The regression this issue tracks was bisected to #{culprit_pr}, which {revert_ref} reverts on `{base}` "
    "to bring the nightly back to green while the proper fix is worked on here."
)


@dataclass(frozen=True)
class Published:
    pr_number: int | None
    pr_url: str | None
    branch: str | None  # None: nothing pushed (`revert.action: comment_only`)
    existing_revert: int | None = None
    evidence_on: int | None = None  # the PR the evidence was commented on instead of opening one


def branch_name(culprit_pr: int | None, culprit: str) -> str:
    return f"revert-bisect/{culprit_pr or 'commit'}-{culprit[:7]}"


def publish(
    forge: GitHubForge,
    policy: Policy,
    repo_dir: Path,
    remote_url: str,
    token: str,
    revert: Revert | None,
    draft: PullRequestDraft | None,
    *,
    bisection_id: int,
    test_id: str,
    evidence: str,
    culprit_pr: int | None,
    culprit_author: str | None,
    followup: int | None,
    already: RevertFound | None = None,
) -> Published:
    """Every write is looked up first: re-running this after a crash changes nothing twice. (Shadow mode never
    gets here: LocalBisections._publish stops before the first write.) `already`: the culprit is reverted on the
    branch (no `revert` or `draft` then); like an open revert PR, that revert's PR gets the evidence, else the
    culprit PR does, and nothing is pushed or opened."""
    branch = branch_name(culprit_pr, (already or revert).culprit)
    existing = already.pr if already else None
    if existing is None and culprit_pr:
        existing = forge.open_revert_of(culprit_pr)
    if existing or already:
        if already:
            by = f"`{already.sha[:12]}`" + (f" (#{already.pr})" if already.pr else "") if already.sha else "a later change"
            text = ALREADY_COMMENT.format(test=test_id, culprit=f"#{culprit_pr}" if culprit_pr else f"`{already.culprit[:12]}`",
                                          evidence=evidence, by=by, base=already.ref, id=bisection_id)
        else:
            text = f"revert-bisect confirms this revert ({evidence}); bisection #{bisection_id}."
        if on := existing or culprit_pr:
            forge.comment_once(on, f"evidence-{bisection_id}", text)
        return Published(existing, None, None if already else branch, existing_revert=existing, evidence_on=on)
    if policy.revert.action is RevertAction.COMMENT_ONLY:  # no branch, no PR: the evidence where the culprit's author looks
        if culprit_pr:
            forge.comment_once(culprit_pr, f"culprit-{bisection_id}", EVIDENCE_COMMENT.format(
                test=test_id, base=draft.base_branch, evidence=evidence, body=draft.body))
        return Published(None, None, None, evidence_on=culprit_pr)
    push_branch(repo_dir, remote_url, branch, revert.sha, token)
    pr = forge.open_pr(draft.title, draft.body, branch, draft.base_branch, draft=policy.revert.action is RevertAction.DRAFT_PR)
    forge.add_labels(pr.number, policy.revert.labels)
    reviewers = list(policy.revert.reviewers)
    if policy.revert.request_review_from_author and culprit_author:
        reviewers.insert(0, culprit_author)
    forge.request_review(pr.number, list(dict.fromkeys(reviewers)))
    revert_ref = f"#{pr.number}"
    if culprit_pr:
        note = f" (#{followup})" if followup else ""
        forge.comment_once(culprit_pr, f"culprit-{bisection_id}", CULPRIT_COMMENT.format(
            test=test_id, base=draft.base_branch, evidence=evidence, revert_ref=revert_ref, followup_note=note))
    if followup and culprit_pr:
        forge.comment_once(followup, f"followup-{bisection_id}", FOLLOWUP_COMMENT.format(culprit_pr=culprit_pr, revert_ref=revert_ref, base=draft.base_branch))
    return Published(pr.number, pr.url, branch)
