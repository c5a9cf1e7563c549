"""An issue search query (`q`) read as GitHub reads it: qualifiers (`repo:`, `is:`/`type:`, `state:`, `label:`,
`author:`, `in:title|body`), words that must all appear, and `OR` between words (at most five AND/OR/NOT operators).

Words are matched as whole words of the title and body (GitHub matches terms, never a part of a word), case-
insensitively; a quoted phrase as its words in order. Comments are not searched (GitHub would: stricter, never
kinder)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from ..models import Issue
from .errors import invalid

TOKEN = re.compile(r'(\S+:"[^"]*"|"[^"]*"|\S+)')
WORD = re.compile(r"\w+")
MAX_OPERATORS = 5


def _words(text: str) -> list[str]:
    return WORD.findall(text.lower())


def _has(haystack: list[str], phrase: list[str]) -> bool:
    n = len(phrase)
    return n > 0 and any(haystack[i : i + n] == phrase for i in range(len(haystack) - n + 1))


@dataclass
class Query:
    repos: list[str] = field(default_factory=list)
    kind: str | None = None  # issue | pr
    state: str | None = None  # open | closed | merged
    labels: list[str] = field(default_factory=list)
    authors: list[str] = field(default_factory=list)
    where: set[str] = field(default_factory=set)  # title, body; empty: both
    terms: list[list[list[str]]] = field(default_factory=list)  # AND of (OR of phrases)

    def matches(self, repo_key: str, issue: Issue) -> bool:
        if self.repos and repo_key not in self.repos:
            return False
        if self.kind == "pr" and not issue.pull or self.kind == "issue" and issue.pull:
            return False
        if self.state == "merged" and not (issue.pull and issue.pull.merged):
            return False
        if self.state in ("open", "closed") and issue.state != self.state:
            return False
        if any(lab not in issue.labels for lab in self.labels) or (self.authors and issue.user not in self.authors):
            return False
        where = self.where or {"title", "body"}
        text = _words(" \n ".join(t for k, t in (("title", issue.title), ("body", issue.body or "")) if k in where))
        return all(any(_has(text, phrase) for phrase in alternatives) for alternatives in self.terms)


def parse(q: str) -> Query:
    query = Query()
    operators = 0
    pending_or = False
    for tok in TOKEN.findall(q):
        key, sep, value = tok.partition(":")
        value = value.strip('"')
        if tok in ("OR", "AND", "NOT"):
            operators += 1
            pending_or = tok == "OR"
            continue
        if sep and key == "repo":
            query.repos.append(value.lower())
        elif sep and key in ("is", "type") and value in ("pr", "pull-request", "issue"):
            query.kind = "issue" if value == "issue" else "pr"
        elif sep and key in ("is", "state") and value in ("open", "closed", "merged"):
            query.state = value
        elif sep and key == "label":
            query.labels.append(value)
        elif sep and key == "author":
            query.authors.append(value)
        elif sep and key == "in":
            query.where |= {w for w in value.split(",") if w in ("title", "body")}
        else:
            phrase = _words(tok.strip('"'))
            if pending_or and query.terms:
                query.terms[-1].append(phrase)
            else:
                query.terms.append([phrase])
        pending_or = False
    if operators > MAX_OPERATORS:
        raise invalid(
            [
                {
                    "resource": "Search",
                    "field": "q",
                    "code": "invalid",
                    "message": f"The search contains more than {MAX_OPERATORS} AND / OR / NOT operators.",
                }
            ]
        )
    return query
