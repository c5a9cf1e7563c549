"""A pull request's changed files (pulls/list-files), as GitHub lists them: paged, 30 a page by default and at most
100, at most 3,000 files in all, each with its `patch` (its unified diff's hunks) unless the file's diff is large.

Hunk headers are whatever git's default diff driver prints (the last unindented line above the hunk: `class X:` for
a method), since a repository's `.gitattributes` may say nothing of Python. GitHub leaves `patch` out of a file whose
diff it does not load (docs: "Four hundred lines and 20 KB are automatically loaded for a single file"; recorded:
JabRef/jabref#16101, a file of 2,081 changes without one): so does this, past either bound."""

from __future__ import annotations

from fastapi import APIRouter, Request

from .. import gitstore
from ..models import Issue, Repo
from ..schema import conform
from .deps import Access, page, pull_of
from .errors import respond

router = APIRouter()
MAX_FILES = 3000
LOADED_LINES, LOADED_BYTES = 400, 20 * 1024


def _loaded(f: dict) -> dict:
    """`f` as GitHub lists it: without its patch when the diff is past what GitHub loads."""
    big = f["additions"] + f["deletions"] > LOADED_LINES or len((f.get("patch") or "").encode()) > LOADED_BYTES
    return {k: v for k, v in f.items() if k != "patch"} if big else f


def changed_files(r: Repo, issue: Issue, head: str | None, base: str | None) -> list[dict]:
    """The PR's recorded files, else the three-dot diff of its head against where it left its base."""
    p = issue.pull
    if p.files is not None:
        return [{"status": "modified", "sha": None, **f, "changes": f["additions"] + f["deletions"]} for f in p.files]
    if not head:
        return []
    start = base if p.merged and p.base_sha else gitstore.merge_base(r.path, base, head) if base else None
    return gitstore.files(r.path, start, head)


@router.get("/repos/{owner}/{repo}/pulls/{pull_number}/files")
def list_files(request: Request, access: Access, pull_number: int):
    r, rr, _ = access
    issue = pull_of(r, pull_number)
    head, base = rr.pull_shas(r, issue)
    files = [_loaded(f) for f in changed_files(r, issue, head, base)[:MAX_FILES]]
    items, headers = page(request, files)
    return respond(200, [conform(rr.file(r, head or "", f), "diff-entry", rr.base) for f in items], headers)
