"""Is the culprit already reverted on ONTO, however it was reverted?

A revert made by `git revert` says `This reverts commit <sha>`; a squash-merged revert PR says only
`Revert "<subject>" (#N)`; a revert written by hand may say nothing, but its patch is the culprit's
inverse. Any of them counts, unless a later commit re-lands the culprit (its own patch again, a
`Reapply "..."`, or a revert of the revert). Reverting on top of such a branch would be an empty
commit, or a conflict that hides the truth.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from bot.adapters.git.repo import GitRepo
from bot.domain.subjects import pr_number, strip_pr_number

QUOTED = re.compile(r'^(?P<verb>Revert|Reapply|Reland) "(?P<inner>.*)"(?: \(#\d+\))?$')
THIS_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")
FULL_SHA = re.compile(r"[0-9a-f]{40}")


@dataclass(frozen=True)
class RevertFound:
    """The culprit is reverted on `ref` by commit `sha`; `sha` is None when no one commit does it but the culprit's
    files are back as they were before it (reverting again would change nothing). `how`: what gave it away."""

    culprit: str
    sha: str | None
    subject: str | None
    ref: str
    how: str  # "message" | "subject" | "patch" | "tree" | "empty"

    @property
    def pr(self) -> int | None:
        """The revert's PR, from a squash merge's trailing `(#N)`."""
        return pr_number(self.subject) if self.subject else None

    def __str__(self) -> str:
        ref = self.ref[:12] if FULL_SHA.fullmatch(self.ref) else self.ref
        if self.how == "empty":
            return (
                f"reverting {self.culprit[:12]} on {ref} changes nothing: "
                "its changes are already gone there; nothing to do"
            )
        if self.sha is None:
            return (
                f"{self.culprit[:12]} is already reverted on {ref}: "
                "its changes are gone there (no one commit reverts it); nothing to do"
            )
        pr = f" (#{self.pr})" if self.pr else ""
        return f"{self.culprit[:12]} is already reverted by {self.sha[:12]}{pr} on {ref}: nothing to do"

    def as_json(self) -> dict:
        return dict(sha=self.sha, pr=self.pr, subject=self.subject, ref=self.ref, how=self.how)


def _quoted(subject: str, *verbs: str) -> str | None:
    """`X` of a subject `Revert "X"` (or another of `verbs`), with or without a squash merge's ` (#N)`."""
    match = QUOTED.match(subject)
    return match["inner"] if match and match["verb"] in verbs else None


def _names(inner: str | None, subject: str) -> bool:
    """Whether `inner` names `subject`: as it is, or without its `(#N)` (GitHub's revert button quotes the PR title)."""
    return inner is not None and inner in (subject, strip_pr_number(subject))


def find_revert(repo: GitRepo, culprit: str, onto: str, ref: str | None = None) -> RevertFound | None:
    """The revert of `culprit` among the commits culprit..onto that no later commit undid; `ref` names onto in
    messages (default: onto as given)."""
    culprit = repo.resolve(culprit, "culprit")
    head = repo.resolve(onto, "--onto")
    subject = repo.subjects([culprit])[culprit]
    forward = repo.patch_ids("-1", culprit).get(culprit)
    inverse = repo.inverse_patch_id(culprit)
    patches = repo.patch_ids(f"{culprit}..{head}")  # first-parent commits: a merge by what it brings in
    log = repo.repo.git.log("--reverse", "--topo-order", "--format=%H%x00%s%x00%B%x1e", f"{culprit}..{head}")
    by: tuple[str, str, str] | None = None  # (sha, subject, how) of the revert in force
    for entry in log.split("\x1e"):
        if not entry.strip():
            continue
        sha, subj, body = entry.strip("\n").split("\x00", 2)
        named = THIS_REVERTS.findall(body)
        pid = patches.get(sha)
        if by is None:
            if any(culprit.startswith(n) for n in named):
                by = (sha, subj, "message")
            elif inverse and pid == inverse:
                by = (sha, subj, "patch")
            elif not named and _names(_quoted(subj, "Revert"), subject):  # a line naming another commit wins
                by = (sha, subj, "subject")
        elif (
            (forward and pid == forward)
            or any(by[0].startswith(n) for n in named)
            or _names(_quoted(subj, "Revert"), by[1])
            or _names(_quoted(subj, "Reapply", "Reland"), subject)
        ):
            by = None  # re-landed: the culprit is back
    if by:
        return RevertFound(culprit, by[0], by[1], ref or onto, by[2])
    if repo.is_ancestor(culprit, head) and _undone(repo, culprit, head):  # else the culprit never was on it
        return RevertFound(culprit, None, None, ref or onto, "tree")
    return None


def _undone(repo: GitRepo, culprit: str, head: str) -> bool:
    """Every file the culprit changed is on `head` as it was before the culprit: a revert would be empty."""
    commit = repo.repo.commit(culprit)
    if not commit.parents:
        return False
    parent = commit.parents[0].hexsha
    files = repo.repo.git.diff("--no-renames", "--name-only", parent, culprit).splitlines()
    return bool(files) and not repo.repo.git.diff("--no-renames", "--name-only", parent, head, "--", *files)
