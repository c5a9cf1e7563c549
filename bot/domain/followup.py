"""Where the proper fix of a culprit is being worked on, judged from what each candidate changes (pure).

A candidate is an issue or PR the forge found: the open PRs that touch the culprit's files, the issues and PRs that
cite the culprit, a search. The real case (SGLang #29792 for #31369) is an open PR by another author, opened before
the culprit merged, that changes the culprit's function and never names it, under a title that shares few words with
the culprit's. So a PR fits when it changes a definition the culprit changed (same file, same qualified name, as
bot.domain.pydefs reads them); an open issue fits when it cites the culprit. Title words never make a fit: they only
pick search words. Everything else found near the culprit is passed over, with its reason, for the dashboard.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum

WORD = re.compile(r"[a-z][a-z0-9]+")
# words that say what kind of change, not what it is about
COMMON = frozenset(
    "a an and the of to in on for with by from at as is be it its this that into under over when while "
    "fix fixes fixed add adds added update updates remove removes support use make bug issue pr wip "
    "refactor cleanup improve minor revert feat chore docs test tests".split()
)


class Passed(StrEnum):
    """Why a candidate is not the follow-up (the dashboard words each)."""

    CLOSED = "closed"  # merged, abandoned or a closed issue
    REVERT = "revert"  # a revert of something, not a fix
    OTHER_DEFINITIONS = "other_definitions"  # changes the culprit's files, none of the definitions it changed
    UNREAD = "unread"  # changes the culprit's files where its or the culprit's changes could not be read (no patch)
    CITES_ONLY = "cites_only"  # a PR that names the culprit but changes none of what it changed
    OUTRANKED = "outranked"  # fits, but another fits better
    UNRELATED = "unrelated"  # found by search or a cross-reference, shares nothing with the culprit


@dataclass(frozen=True)
class Change:
    """A PR's changed files, each with the qualified definitions it changes there (None: not known -- GitHub gave
    no patch, the file is not Python or could not be read)."""

    files: dict[str, frozenset[str] | None]


@dataclass(frozen=True)
class CulpritChange:
    number: int
    title: str
    author: str | None
    change: Change
    merged_at: datetime | None = None

    @property
    def definitions(self) -> frozenset[str]:
        return frozenset().union(*(d for d in self.change.files.values() if d))


@dataclass(frozen=True)
class Candidate:
    number: int
    title: str
    author: str | None
    is_pr: bool
    state: str  # open | closed (a merged PR is closed)
    created_at: datetime
    cites_culprit: bool = False  # its body names the culprit PR (`#N`)
    change: Change | None = None  # a PR's files, when read
    found_by: frozenset[str] = field(default_factory=frozenset)  # timeline, open PRs, search


@dataclass(frozen=True)
class Assessed:
    candidate: Candidate
    files: tuple[str, ...]  # changed by both
    definitions: tuple[str, ...]  # changed by both: the same qualified name in the same file
    passed: Passed | None  # None: it fits

    @property
    def number(self) -> int:
        return self.candidate.number

    @property
    def fits(self) -> bool:
        return self.passed is None

    def why(self) -> str:
        """What it shares with the culprit, in words (for the follow-up's link and comment)."""
        if self.definitions:
            return (
                "changes "
                + ", ".join(f"`{d}`" for d in self.definitions)
                + " in "
                + ", ".join(f"`{f}`" for f in self.files)
            )
        return "it names the culprit" if self.candidate.cites_culprit else ""


@dataclass(frozen=True)
class Choice:
    best: Assessed | None
    passed_over: tuple[Assessed, ...]  # near the culprit (a shared file, a citation, a search hit), best first


def _is_revert(title: str) -> bool:
    return title.lower().startswith("revert")


def _shared(culprit: CulpritChange, c: Candidate) -> tuple[tuple[str, ...], tuple[str, ...], bool]:
    """The files both change, the definitions both change in them, and whether a shared file's changes were unread on
    either side (a culprit's file without a patch shares no definition with anything)."""
    ours, theirs = culprit.change.files, c.change.files if c.change else {}
    files = tuple(sorted(set(theirs) & set(ours)))
    definitions = {d for f in files for d in (theirs[f] or frozenset()) & (ours[f] or frozenset())}
    unread = any(theirs[f] is None or ours[f] is None for f in files)
    return files, tuple(sorted(definitions)), unread


def assess(culprit: CulpritChange, candidate: Candidate) -> Assessed | None:
    """Whether `candidate` fits, else why not; None for the culprit itself and for a PR that touches none of the
    culprit's files and does not cite it, found only by listing the open PRs (nothing to say about it)."""
    c = candidate
    if c.number == culprit.number:
        return None
    files, definitions, unread = _shared(culprit, c)
    if not (files or c.cites_culprit or c.found_by - {"open PRs"}):
        return None
    passed = None
    if c.state != "open":
        passed = Passed.CLOSED
    elif _is_revert(c.title):
        passed = Passed.REVERT
    elif c.is_pr and not definitions:
        passed = (
            Passed.UNREAD
            if unread
            else Passed.OTHER_DEFINITIONS
            if files
            else Passed.CITES_ONLY
            if c.cites_culprit
            else Passed.UNRELATED
        )
    elif not c.is_pr and not c.cites_culprit:
        passed = Passed.UNRELATED
    return Assessed(c, files, definitions, passed)


def _key(a: Assessed) -> tuple:
    return (a.fits, len(a.definitions), a.candidate.cites_culprit, len(a.files), a.candidate.created_at, -a.number)


def choose(culprit: CulpritChange, candidates: Sequence[Candidate]) -> Choice:
    """The follow-up (the best candidate that fits, None: a tracking issue is opened) and the candidates passed over:
    more shared definitions first, then citing the culprit, shared files, the newest."""
    ranked = sorted((a for c in candidates if (a := assess(culprit, c)) is not None), key=_key, reverse=True)
    best = ranked[0] if ranked and ranked[0].fits else None
    rest = tuple(a if not a.fits else Assessed(a.candidate, a.files, a.definitions, Passed.OUTRANKED) for a in ranked)
    return Choice(best, rest[1:] if best else rest)


def _stem(word: str) -> str:
    for suffix in ("ing", "ers", "er", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def search_words(title: str, definitions: Iterable[str], limit: int = 2) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words to search for: the title's longest distinctive words, uninflected ones first (a search matches words
    as written: the fix of a "scheduler" change may say "scheduling"), and the changed definitions' bare names, each
    capped (GitHub allows at most five AND/OR/NOT operators in a query; every word of the first must match)."""
    seen: dict[str, str] = {}
    for w in WORD.findall(title.lower()):
        if w not in COMMON and not w.isdigit():
            seen.setdefault(_stem(w), w)
    words = tuple(sorted(seen.values(), key=lambda w: (_stem(w) != w, -len(w), w))[:limit])
    bare = {d.rsplit(".", 1)[-1] for d in definitions}
    names = tuple(sorted({d for d in bare if len(d) > 3 and not d.startswith("__")}, key=lambda d: (-len(d), d)))
    return words, names[: limit + 3]
