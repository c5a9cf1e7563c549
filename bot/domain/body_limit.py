"""GitHub's limit on an issue's, a pull request's and a comment's body: 65,536 characters; GitHub refuses a longer one
with 422 ("body is too long (maximum is 65536 characters)", docs/github-contract.md). The last guard before a write:
a body over it is cut, its open code fence and `<details>` closed, and the cut said."""

from __future__ import annotations

MAX_BODY = 65_536
CUT = "\n\n... (cut to fit GitHub's limit of 65,536 characters{where})\n"


def fit(text: str, where: str = "") -> str:
    """`text` whole when it fits, else cut so that it does (`where`: where the whole of it is, for the note)."""
    if len(text) <= MAX_BODY:
        return text
    note = CUT.format(where=f": {where}" if where else "")
    closing = ""
    head = text[: MAX_BODY - len(note) - 40]
    if head.count("```") % 2:
        closing += "\n```"
    if head.count("<details>") > head.count("</details>"):
        closing += "\n\n</details>"
    return head + closing + note
