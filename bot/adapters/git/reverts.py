"""Reverts on a branch of the commits of a bisected range, whoever made them: what the trust report's recall reads
(bot.domain.trust: a revert by a human of a commit the bot never flagged is a miss).

A revert is recognised as bot.adapters.git.already recognises one: `This reverts commit <sha>` in its message, or a
squash-merged `Revert "<subject>" (#N)` quoting the reverted commit's subject."""

from __future__ import annotations

from bot.adapters.git.already import THIS_REVERTS, _names, _quoted
from bot.adapters.git.repo import GitRepo
from bot.domain.subjects import pr_number
from bot.ports import BranchRevert


def reverts_of_range(repo: GitRepo, good: str, bad: str, branch: str) -> list[BranchRevert]:
    """The commits of good..branch that revert a commit of good..bad."""
    inside = repo.repo.git.log("--format=%H%x00%s", f"{good}..{bad}")
    subjects = dict(line.split("\x00", 1) for line in inside.splitlines() if line)
    log = repo.repo.git.log("--first-parent", "--format=%H%x00%s%x00%B%x1e", f"{good}..{branch}")
    found = []
    for entry in log.split("\x1e"):
        if not entry.strip():
            continue
        sha, subject, body = entry.strip("\n").split("\x00", 2)
        named = [s for n in THIS_REVERTS.findall(body) for s in subjects if s.startswith(n)]
        quoted = _quoted(subject, "Revert")
        if not named and quoted is not None:
            named = [s for s, subj in subjects.items() if _names(quoted, subj)]
        for reverted in named[:1]:
            found.append(BranchRevert(sha, subject, pr_number(subject), reverted, subjects[reverted]))
    return found
