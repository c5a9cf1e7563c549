"""Finding where a culprit's proper fix is worked on: the candidates' facts read from GitHub at a bounded cost, ranked
by bot.domain.followup.

Read: the culprit PR and its files; its timeline (issues and PRs that name it); the open PRs, most recently updated
first; an issue search by the culprit's title words and one by the functions it changed; and the files of the likeliest
candidate PRs. Every read is capped (`Caps`): search allows 30 requests a minute and lags behind writes, and a PR's
files are one request per page. What was read is said in `Followups.searched`, for the status comment.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime

from github import GithubException
from github.Repository import Repository

from bot.domain.followup import Candidate, Change, CulpritChange, choose, preselect, search_words
from bot.ports import Followups

PER_PAGE = 100


@dataclass(frozen=True)
class Caps:
    """At most this many requests of each kind for one culprit."""

    culprit_file_pages: int = 3
    timeline_pages: int = 3
    open_pull_pages: int = 3
    searches: int = 2  # of GitHub's 30 a minute
    search_results: int = 30
    candidates_read: int = 8  # candidate PRs whose files are read
    file_pages: int = 2  # pages of one candidate's files


def _when(text: str | None) -> datetime:
    if not text:
        return datetime.min.replace(tzinfo=UTC)
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class _Reads:
    """The requests made, by kind, for the status comment."""

    counts: dict[str, int] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)

    def add(self, kind: str) -> None:
        self.counts[kind] = self.counts.get(kind, 0) + 1


class FollowupFinder:
    def __init__(self, repo: Repository, caps: Caps = Caps()):
        self.repo = repo
        self.caps = caps
        self.reads = _Reads()

    def _get(self, kind: str, url: str, **params) -> tuple[dict, object]:
        self.reads.add(kind)
        headers, data = self.repo.requester.requestJsonAndCheck("GET", url, parameters=params)
        return headers, data

    def _pages(self, kind: str, url: str, pages: int, **params) -> list[dict]:
        """Up to `pages` pages of a listing, stopping at its last (GitHub's `Link: rel="next"`)."""
        out: list[dict] = []
        for n in range(1, pages + 1):
            headers, data = self._get(kind, url, per_page=PER_PAGE, page=n, **params)
            out += data if isinstance(data, list) else []
            if 'rel="next"' not in (headers.get("link") or headers.get("Link") or ""):
                break
        return out

    def _files(self, number: int, pages: int) -> Change:
        files = self._pages("files", f"{self.repo.url}/pulls/{number}/files", pages)
        return Change.of_patches((f["filename"], f.get("patch")) for f in files)

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
        caps, base = self.caps, self.repo.url
        _, pull = self._get("culprit", f"{base}/pulls/{culprit_pr}")
        assert isinstance(pull, dict)
        culprit = CulpritChange(
            culprit_pr,
            pull.get("title") or "",
            (pull.get("user") or {}).get("login"),
            self._files(culprit_pr, caps.culprit_file_pages),
            _when(pull.get("merged_at")) if pull.get("merged_at") else None,
        )
        found: dict[int, Candidate] = {}

        def note(c: Candidate) -> None:
            known = found.get(c.number)
            found[c.number] = replace(c, found_by=c.found_by | known.found_by) if known else c

        timeline = self._pages("timeline", f"{base}/issues/{culprit_pr}/timeline", caps.timeline_pages)
        for event in timeline:
            source = (event.get("source") or {}).get("issue") or {}
            if event.get("event") == "cross-referenced" and source.get("number"):
                note(self._candidate(source, culprit_pr, "timeline"))
        listed = self._pages("open PRs", f"{base}/pulls", caps.open_pull_pages, state="open", sort="updated")
        for item in listed:
            note(self._candidate(item, culprit_pr, "open PRs"))
        words, names = search_words(culprit.title, culprit.change.definitions)
        slug = self.repo.full_name
        queries = [f"repo:{slug} is:open in:title {' '.join(words)}" if words else ""]
        queries.append(f"repo:{slug} is:open {' OR '.join(names)}" if names else "")
        searched = [q for q in queries if q][: caps.searches]
        for q in searched:
            try:
                _, data = self._get("search", "/search/issues", q=q, per_page=caps.search_results)
            except GithubException as exc:  # a search refused (its own rate limit): the other reads still count
                self.reads.notes.append(f"a search was refused ({exc.status})")
                continue
            for item in (data or {}).get("items", []) if isinstance(data, dict) else []:
                note(self._candidate(item, culprit_pr, "search"))
        for c in preselect(culprit_pr, culprit.title, [c for c in found.values() if c.is_pr], caps.candidates_read):
            try:
                found[c.number] = replace(found[c.number], change=self._files(c.number, caps.file_pages))
            except GithubException as exc:  # one candidate unreadable (gone, too large a diff): ranked without files
                if exc.status not in (404, 406, 410, 422):
                    raise
                self.reads.notes.append(f"#{c.number}'s files could not be read ({exc.status})")
        choice = choose(culprit, list(found.values()))
        return Followups(
            choice.best.number if choice.best else None,
            tuple(r.number for r in choice.related),
            choice.best.why() if choice.best else "",
            self._said(len(timeline), len(listed), searched, len(found)),
        )

    def _said(self, events: int, listed: int, queries: list[str], candidates: int) -> str:
        counts = self.reads.counts
        parts = [
            f"the culprit PR's timeline ({events} events)",
            f"{listed} open PRs, most recently updated first",
            f"{len(queries)} searches ({'; '.join(f'`{q}`' for q in queries)})" if queries else "no search",
            f"the files of {counts.get('files', 0)} page(s) of PRs (the culprit's and the likeliest candidates')",
        ]
        total = sum(counts.values())
        return f"{', '.join(parts)}: {candidates} candidates, {total} requests" + "".join(
            f"; {n}" for n in self.reads.notes
        )
