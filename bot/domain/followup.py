"""Where the proper fix of a culprit is being worked on: candidates ranked from their facts (pure).

A candidate is an issue or PR the forge found (the culprit PR's timeline, the open PRs, a search). The real case
(SGLang #29792 for #31369) is an open PR by another author, opened before the culprit merged, that changes the same
file and function and never names the culprit: so the files and functions a PR changes count first, then how much
of the culprit's title its title shares, then whether it cites the culprit, then recency.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime

HUNK = re.compile(r"^@@ -\d+(?:,\d+)? \+\d+(?:,\d+)? @@ ?(.*)$")
DEFINITION = re.compile(r"^\s*(?:async\s+def|def|class)\s+([A-Za-z_]\w*)")
WORD = re.compile(r"[a-z][a-z0-9]+")
# words that say what kind of change, not what it is about
COMMON = frozenset(
    "a an and the of to in on for with by from at as is be it its this that into under over when while "
    "fix fixes fixed add adds added update updates remove removes support use make bug issue pr wip "
    "refactor cleanup improve minor revert feat chore docs test tests".split()
)
TITLE_FIT = 0.5  # a PR sharing a file with the culprit fits when its title has this share of the culprit's words
MAX_RELATED = 2


def changed_definitions(patch: str | None) -> frozenset[str]:
    """The functions and classes a unified diff's hunks change: each hunk header's `@@ ... @@ def name` context, and
    a `def`/`class` line seen in the hunk before a changed line (the definition that encloses it)."""
    found: set[str] = set()
    enclosing: str | None = None
    for line in (patch or "").splitlines():
        if m := HUNK.match(line):
            header = DEFINITION.match(m.group(1))
            enclosing = header.group(1) if header else None
            continue
        text = line[1:] if line[:1] in "+- " else line
        if d := DEFINITION.match(text):
            enclosing = d.group(1)
            if line[:1] in "+-":
                found.add(d.group(1))
            continue
        if line[:1] in "+-" and enclosing:
            found.add(enclosing)
    return frozenset(found)


def _stem(word: str) -> str:
    for suffix in ("ing", "ers", "er", "es", "s"):
        if word.endswith(suffix) and len(word) - len(suffix) >= 4:
            return word[: -len(suffix)]
    return word


def title_words(title: str) -> frozenset[str]:
    """A title's distinctive words, lower-cased and stemmed (`[HiCache]` tags and `(#N)` numbers included as words
    only when they are words)."""
    return frozenset(_stem(w) for w in WORD.findall(title.lower()) if w not in COMMON and not w.isdigit())


def title_similarity(culprit: str, other: str) -> float:
    """The share of the culprit title's distinctive words that `other` has too (0..1)."""
    ours = title_words(culprit)
    return len(ours & title_words(other)) / len(ours) if ours else 0.0


@dataclass(frozen=True)
class Change:
    """A PR's changed files, each with the definitions its hunks change; None when they were not read."""

    files: dict[str, frozenset[str]]

    @property
    def definitions(self) -> frozenset[str]:
        return frozenset().union(*self.files.values()) if self.files else frozenset()

    @classmethod
    def of_patches(cls, patches: Iterable[tuple[str, str | None]]) -> Change:
        return cls({name: changed_definitions(patch) for name, patch in patches})


@dataclass(frozen=True)
class CulpritChange:
    number: int
    title: str
    author: str | None
    change: Change
    merged_at: datetime | None = None


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
class Ranked:
    candidate: Candidate
    files: tuple[str, ...]  # shared with the culprit
    definitions: tuple[str, ...]  # shared with the culprit
    similarity: float
    fits: bool  # may be linked as the follow-up

    @property
    def number(self) -> int:
        return self.candidate.number

    def why(self) -> str:
        """What it shares with the culprit, in words."""
        parts = []
        if self.definitions:
            parts.append("changes " + ", ".join(f"`{d}`" for d in self.definitions))
        if self.files:
            parts.append(("in " if self.definitions else "changes ") + ", ".join(f"`{f}`" for f in self.files))
        if self.similarity:
            parts.append(f"its title shares {self.similarity:.0%} of the culprit's words")
        if self.candidate.cites_culprit:
            parts.append("it names the culprit")
        return "; ".join(parts) or "found by " + ", ".join(sorted(self.candidate.found_by))


@dataclass(frozen=True)
class Choice:
    best: Ranked | None
    related: tuple[Ranked, ...]


def _is_revert(title: str) -> bool:
    return title.lower().startswith("revert")


def assess(culprit: CulpritChange, candidate: Candidate) -> Ranked | None:
    """What `candidate` shares with the culprit; None when it cannot be where the fix is worked on: the culprit
    itself, a revert, anything closed (a merged or abandoned PR, a closed issue), or something that shares nothing."""
    c = candidate
    if not eligible(culprit.number, c):
        return None
    theirs = c.change.files if c.change else {}
    files = tuple(sorted(set(theirs) & set(culprit.change.files)))
    definitions = tuple(
        sorted({d for f in files for d in theirs[f] & culprit.change.files[f]})
    )  # the same name in the same file
    similarity = title_similarity(culprit.title, c.title)
    if not (files or definitions or c.cites_culprit or similarity >= TITLE_FIT):
        return None
    fits = bool(definitions) or c.cites_culprit or bool(files) and similarity >= TITLE_FIT
    return Ranked(c, files, definitions, similarity, fits)


def _key(r: Ranked) -> tuple:
    return (
        r.fits,
        len(r.definitions),
        len(r.files),
        round(r.similarity, 3),
        r.candidate.cites_culprit,
        r.candidate.created_at,
        -r.number,
    )


def rank(culprit: CulpritChange, candidates: Sequence[Candidate]) -> list[Ranked]:
    """The candidates that share something with the culprit, best first: those that fit, then by shared
    definitions, shared files, title similarity, naming the culprit, recency."""
    assessed = [r for c in candidates if (r := assess(culprit, c)) is not None]
    return sorted(assessed, key=_key, reverse=True)


def choose(culprit: CulpritChange, candidates: Sequence[Candidate]) -> Choice:
    """The follow-up (the best candidate that fits; None: open a tracking issue) and up to two others, as related."""
    ranked = rank(culprit, candidates)
    best = ranked[0] if ranked and ranked[0].fits else None
    rest = [r for r in ranked if r is not best]
    return Choice(best, tuple(rest[:MAX_RELATED]))


def eligible(culprit_number: int, candidate: Candidate) -> bool:
    """Whether `candidate` may be where the fix is worked on at all: open, not the culprit, not a revert."""
    c = candidate
    return c.number != culprit_number and c.state == "open" and not _is_revert(c.title)


def preselect(culprit_number: int, culprit_title: str, candidates: Sequence[Candidate], limit: int) -> list[Candidate]:
    """Which candidates' files to read, when reading them all would cost too much: only eligible ones; first those
    found by more than the listing of open PRs or naming the culprit, then by title similarity and recency."""
    return sorted(
        (c for c in candidates if eligible(culprit_number, c)),
        key=lambda c: (
            len(c.found_by - {"open PRs"}) > 0 or c.cites_culprit,
            round(title_similarity(culprit_title, c.title), 3),
            c.created_at,
        ),
        reverse=True,
    )[:limit]


def search_words(title: str, definitions: Iterable[str], limit: int = 2) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The words to search for: the title's longest distinctive words, uninflected ones first (a search matches words
    as written: the fix of a "scheduler" change may say "scheduling"), and the changed definitions' names, each
    capped (GitHub allows at most five AND/OR/NOT operators in a query; every word of the first must match)."""
    seen: dict[str, str] = {}
    for w in WORD.findall(title.lower()):
        if w not in COMMON and not w.isdigit():
            seen.setdefault(_stem(w), w)
    words = tuple(sorted(seen.values(), key=lambda w: (_stem(w) != w, -len(w), w))[:limit])
    names = tuple(sorted({d for d in definitions if len(d) > 3}, key=lambda d: (-len(d), d))[: limit + 3])
    return words, names
