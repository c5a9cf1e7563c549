"""Finding where a culprit's proper fix is worked on: the candidates' facts read from GitHub within a stated request
budget, judged by bot.domain.followup.

Read, in this order: the culprit PR, its files and the text of each of its Python files (a git blob: a PR's patch is
placed in the file it produced, never read from its hunk headers); its timeline (the issues and PRs that cite it);
an issue search by its title words and one by the names of the definitions it changed; then the files of the PRs
found so far, and of the open PRs, newest updated first, one listing page at a time, until the budget is spent.
For a PR that changes one of the culprit's Python files, that file's text is read too. What was read is said in
`Followups.searched`, for the status comment.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterator
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from github import GithubException
from github.Repository import Repository

from bot.domain.followup import Candidate, Change, CulpritChange, choose, search_words
from bot.domain.hunks import PatchMismatch
from bot.domain.pydefs import Unparsable, changed_definitions
from bot.ports import Followups, PassedOver

PER_PAGE = 100
GONE = (404, 406, 410, 422)  # a PR or blob hidden, removed or too large: judged without it


@dataclass(frozen=True)
class Budget:
    """At most this many requests of each kind for one culprit (`most`: all of them).

    The open PRs are what a person scans: 3 pages of 100, newest updated first, and the first page (100 files) of
    each one's files; a PR found by citation or search gets up to `file_pages`. Search allows 30 requests a minute.
    """

    culprit_file_pages: int = 3
    timeline_pages: int = 3
    searches: int = 2
    search_results: int = 30
    open_pull_pages: int = 3
    files: int = 300  # requests for PRs' files (their pages)
    file_pages: int = 3  # of one PR found by citation or search
    texts: int = 40  # git blobs: the culprit's Python files and the candidates' versions of them

    @property
    def most(self) -> int:
        fixed = 1 + self.culprit_file_pages + self.timeline_pages + self.searches + self.open_pull_pages
        return fixed + self.files + self.texts


def _when(text: str | None) -> datetime:
    if not text:
        return datetime.min.replace(tzinfo=UTC)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class _Reads:
    """The requests made, by kind, and what could not be read, for the status comment."""

    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


class FollowupFinder:
    def __init__(self, repo: Repository, budget: Budget = Budget()):
        self.repo = repo
        self.budget = budget
        self.reads = _Reads()

    def _get(self, kind: str, url: str, **params) -> tuple[dict, object]:
        self.reads.add(kind)
        headers, data = self.repo.requester.requestJsonAndCheck("GET", url, parameters=params or None)
        return headers, data

    def _spent(self, kind: str) -> int:
        return self.reads.counts.get(kind, 0)

    def _pages(self, kind: str, url: str, pages: int, **params) -> Iterator[list[dict]]:
        """Up to `pages` pages of a listing, stopping at its last (GitHub's `Link: rel="next"`)."""
        for n in range(1, pages + 1):
            headers, data = self._get(kind, url, per_page=PER_PAGE, page=n, **params)
            yield data if isinstance(data, list) else []
            if 'rel="next"' not in (headers.get("link") or headers.get("Link") or ""):
                return

    def _text(self, entry: dict) -> str | None:
        """The file a diff entry names, as the PR leaves it (a git blob by the entry's `sha`); None when not read."""
        if entry.get("status") == "removed":
            return ""
        if not entry.get("sha") or self._spent("texts") >= self.budget.texts:
            return None
        try:
            _, blob = self._get("texts", f"{self.repo.url}/git/blobs/{entry['sha']}")
        except GithubException as exc:
            if exc.status not in GONE and exc.status != 403:  # 403: past the blob API's 100 MB
                raise
            return None
        try:
            return (
                base64.b64decode((blob or {}).get("content") or "").decode("utf-8") if isinstance(blob, dict) else None
            )
        except (binascii.Error, UnicodeDecodeError):
            return None

    def _definitions(self, entry: dict) -> frozenset[str] | None:
        """The qualified definitions a Python file's patch changes, placed in the file's text; None when unknown."""
        name, patch = entry["filename"], entry.get("patch")
        if not name.endswith(".py") or patch is None:
            return None
        text = self._text(entry)
        if text is None:
            return None
        try:
            return changed_definitions(patch, text)
        except (Unparsable, PatchMismatch) as exc:
            self.reads.notes.append(f"`{name}` could not be read as Python ({exc})")
            return None

    def _change(self, number: int, pages: int, culprit: CulpritChange | None) -> Change:
        """A PR's files; the definitions it changes in the culprit's files whose definitions were read (all of its
        own, for the culprit): another file's text is never fetched, it could share no definition."""
        files: dict[str, frozenset[str] | None] = {}
        for batch in self._pages("files", f"{self.repo.url}/pulls/{number}/files", pages):
            for entry in batch:
                wanted = culprit is None or culprit.change.files.get(entry["filename"]) is not None
                files[entry["filename"]] = self._definitions(entry) if wanted else None
        return Change(files)

    def _cites(self, number: int, body: str | None) -> bool:
        slug = re.escape(self.repo.full_name)
        return re.search(rf"(?:(?<![\w/])|{slug})#{number}\b", body or "") is not None

    def _candidate(self, item: dict, culprit: int, how: str) -> Candidate:
        return Candidate(
            item["number"],
            item.get("title") or "",
            (item.get("user") or {}).get("login"),
            "pull_request" in item or "head" in item,
            item.get("state") or "open",
            _when(item.get("created_at")),
            self._cites(culprit, item.get("body")),
            found_by=frozenset({how}),
        )

    def find(self, culprit_pr: int) -> Followups:
        b, base = self.budget, self.repo.url
        _, pull = self._get("culprit", f"{base}/pulls/{culprit_pr}")
        assert isinstance(pull, dict)
        culprit = CulpritChange(
            culprit_pr,
            pull.get("title") or "",
            (pull.get("user") or {}).get("login"),
            self._change(culprit_pr, b.culprit_file_pages, None),
            _when(pull.get("merged_at")) if pull.get("merged_at") else None,
        )
        found: dict[int, Candidate] = {}

        def note(c: Candidate) -> None:
            known = found.get(c.number)  # found again: what was read of it stays
            found[c.number] = replace(known, found_by=c.found_by | known.found_by) if known else c

        events = 0
        for batch in self._pages("timeline", f"{base}/issues/{culprit_pr}/timeline", b.timeline_pages):
            events += len(batch)
            for event in batch:
                source = (event.get("source") or {}).get("issue") or {}
                if event.get("event") == "cross-referenced" and source.get("number"):
                    note(self._candidate(source, culprit_pr, "timeline"))
        searched = self._search(culprit, note)
        read: set[int] = set()

        def read_files(c: Candidate, pages: int) -> None:
            if c.number in read or not c.is_pr or c.state != "open" or c.number == culprit_pr:
                return
            read.add(c.number)
            try:
                found[c.number] = replace(found[c.number], change=self._change(c.number, pages, culprit))
            except GithubException as exc:  # one candidate unreadable (gone, too large a diff): judged without files
                if exc.status not in GONE:
                    raise
                self.reads.notes.append(f"#{c.number}'s files could not be read ({exc.status})")

        for c in list(found.values()):  # cited or searched: few, read first
            if self._spent("files") + b.file_pages <= b.files:
                read_files(c, b.file_pages)
        listed = 0
        for batch in self._pages(
            "open PRs", f"{base}/pulls", b.open_pull_pages, state="open", sort="updated", direction="desc"
        ):
            for item in batch:
                listed += 1
                note(self._candidate(item, culprit_pr, "open PRs"))
                if self._spent("files") < b.files:
                    read_files(found[item["number"]], 1)
            if self._spent("files") >= b.files:
                break
        choice = choose(culprit, list(found.values()))
        return Followups(
            choice.best.number if choice.best else None,
            choice.best.why() if choice.best else "",
            self._said(events, listed, searched, len(read)),
            tuple(PassedOver(a.number, str(a.passed), a.files, a.definitions) for a in choice.passed_over),
        )

    def _search(self, culprit: CulpritChange, note) -> list[str]:
        words, names = search_words(culprit.title, culprit.definitions)
        slug = self.repo.full_name
        queries = [f"repo:{slug} is:open in:title {' '.join(words)}" if words else ""]
        queries.append(f"repo:{slug} is:open {' OR '.join(names)}" if names else "")
        searched = [q for q in queries if q][: self.budget.searches]
        for q in searched:
            try:
                _, data = self._get("search", "/search/issues", q=q, per_page=self.budget.search_results)
            except GithubException as exc:  # a search refused (its own rate limit): the other reads still count
                self.reads.notes.append(f"a search was refused ({exc.status})")
                continue
            for item in (data or {}).get("items", []) if isinstance(data, dict) else []:
                note(self._candidate(item, culprit.number, "search"))
        return searched

    def _said(self, events: int, listed: int, queries: list[str], prs: int) -> str:
        counts = self.reads.counts
        parts = [
            f"the culprit PR's timeline ({events} events)",
            f"{listed} open PRs, newest updated first",
            f"{len(queries)} searches ({'; '.join(f'`{q}`' for q in queries)})" if queries else "no search",
            f"the files of {prs} PRs and {counts.get('texts', 0)} file texts",
        ]
        total = sum(counts.values())
        return f"{', '.join(parts)}: {total} requests of at most {self.budget.most}" + "".join(
            f"; {n}" for n in self.reads.notes
        )
