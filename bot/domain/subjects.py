"""What a squash-merge repository's commit subjects say: `Fix x (#1234)` names PR 1234."""

from __future__ import annotations

import re

PR_IN_SUBJECT = re.compile(r"\(#(\d+)\)\s*$")


def pr_number(subject: str) -> int | None:
    """The PR number a squash merge leaves at the end of a subject: `Fix x (#1234)`."""
    match = PR_IN_SUBJECT.search(subject)
    return int(match.group(1)) if match else None


def strip_pr_number(subject: str) -> str:
    return PR_IN_SUBJECT.sub("", subject).rstrip()
