"""A pull request's changed files (pulls/list-files), as GitHub lists them: paged, 30 a page by default and at most
100, at most 3,000 files in all, each with its `patch` (its unified diff's hunks)."""

from __future__ import annotations

from pathlib import Path

from fastapi import APIRouter, Request

from .. import gitstore
from ..models import Issue, Repo
from ..schema import conform
from .deps import Access, page, pull_of
from .errors import respond

router = APIRouter()
MAX_FILES = 3000
# hunk headers name the enclosing `def`/`class` of Python code: `@@ -956,13 +956,20 @@ def name(`
ATTRIBUTES = "*.py diff=python\n"


def _diff_driver(repo: Path) -> None:
    info = repo / "info" / "attributes"
    if not info.exists() or ATTRIBUTES not in info.read_text():
        info.parent.mkdir(parents=True, exist_ok=True)
        with info.open("a") as f:
            f.write(ATTRIBUTES)


def changed_files(r: Repo, issue: Issue, head: str | None, base: str | None) -> list[dict]:
    """The PR's recorded files, else the three-dot diff of its head against where it left its base."""
    p = issue.pull
    if p.files is not None:
        return [{"status": "modified", "sha": None, **f, "changes": f["additions"] + f["deletions"]} for f in p.files]
    if not head:
        return []
    _diff_driver(r.path)
    start = base if p.merged and p.base_sha else gitstore.merge_base(r.path, base, head) if base else None
    return gitstore.files(r.path, start, head)


@router.get("/repos/{owner}/{repo}/pulls/{pull_number}/files")
def list_files(request: Request, access: Access, pull_number: int):
    r, rr, _ = access
    issue = pull_of(r, pull_number)
    head, base = rr.pull_shas(r, issue)
    files = changed_files(r, issue, head, base)[:MAX_FILES]
    items, headers = page(request, files)
    return respond(200, [conform(rr.file(r, head or "", f), "diff-entry", rr.base) for f in items], headers)
