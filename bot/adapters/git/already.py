"""Is the culprit already reverted on ONTO, however it was reverted?

A revert made by `git revert` says `This reverts commit <sha>`; a squash-merged revert PR says only
`Revert "<subject>" (#N)`; a revert written by hand may say nothing, but its patch is the culprit's
inverse. Any of them counts, unless a later commit re-lands the culprit (its own patch again, a
`Reapply "..."`, or a revert of the revert). Reverting on top of such a branch would be an empty
commit, or a conflict that hides the truth.
"""

from __future__ import annotations

import re

from bot.adapters.git.repo import GitRepo
from bot.domain.subjects import strip_pr_number
from bot.ports import RevertFound

QUOTED = re.compile(r'^(?P<verb>Revert|Reapply|Reland) "(?P<inner>.*)"(?: \(#\d+\))?$')
THIS_REVERTS = re.compile(r"This reverts commit ([0-9a-f]{7,40})")


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
