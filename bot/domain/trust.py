"""The trust report: how often, per repository, the bot's answers held up (pure: rows in, counts out).

Per repository:
- bisections that finished, and their answers: one per test (a bisection of several red tests answers for each:
  `bisections.tests`), the culprits confirmed (status `found`) against those that ended without one
  (`ambiguous`, `inconclusive`, `no_culprit`, `untestable`, `not_reproducible`, `good_fails`); cancelled ones are
  counted apart, running ones not at all;
- reverts refused by the guards (`revert_refused` in the outcome), by reason;
- precision and recall as PyTorch measures its auto-revert's (pytorch/test-infra, torchci/pages/metrics/
  autorevert-spec.md: precision = TP / (TP + FP), recall = TP / (TP + FN)), each from its own events:
  - precision, over the reverts the bot made (opened: the outcome holds `revert_pr`, each PR and culprit once):
    right / made, a revert whose culprit was later re-landed unchanged being a false positive (the culprit was
    innocent, or the revert was not needed). Whether it was is asked of `relanded(repo, culprit)`, which answers
    None when it cannot tell (no clone): such reverts are left out of both counts;
  - recall, over the regressions: the commits inside a range the bot bisected (a watched test went red over it)
    that were reverted on the default branch by anyone -- the bot's merged revert PRs included -- and did not come
    back unchanged afterwards (a revert whose change was re-landed unchanged was not needed, whoever made it; one
    whose re-land cannot be told counts as a regression). Caught / regressions, caught = those the bot named
    (status `found`). So a revert of the bot's re-landed unchanged counts against precision and never for recall,
    and a culprit the bot named that nobody reverted is neither a hit nor a miss. The branch's reverts are asked
    of the caller, who reads them from the clones (bot.adapters.git.reverts); None when it cannot tell.

Each figure comes with the incidents behind it: the reverts re-landed unchanged, the culprits flagged, the misses.

"Re-landed unchanged" is decided by the caller (see GitRepo.relanded): a commit on the default branch after
the revert whose `git patch-id --stable` equals the culprit's.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from bot.domain.bisect.ledger import entries
from bot.domain.guards import GUARDS
from bot.domain.outcome import BisectionOutcome, parse_outcome

CONFIRMED = "found"
CANCELLED = "cancelled"

OTHER_REASON = "other"  # a refusal stored without a guard this version knows
REASON_LABELS = GUARDS | {OTHER_REASON: "other"}


class Bisection(Protocol):
    """What the report reads of a stored bisection (bot.adapters.store.models.BisectionRow has it)."""

    repo: str
    status: str | None
    outcome: dict | None  # JSON; read with bot.domain.outcome.outcome_of
    origin: dict | None
    head: str | None
    good: str
    bad: str
    tests: dict | None  # its tests: each one's status and outcome (bot.domain.bisect.ledger.entries)


class Revert(Protocol):
    """A revert on the default branch of a commit of a bisected range (bot.ports.BranchRevert)."""

    sha: str
    subject: str
    pr: int | None
    reverted: str
    reverted_subject: str


@dataclass(frozen=True)
class Incident:
    """One fact behind a figure: `relanded` (a false positive), `flagged` (a culprit the bot named), `missed` (a
    commit someone else reverted that the bot never named)."""

    kind: str
    culprit: str
    subject: str = ""
    pr: int | None = None  # the revert's PR: the bot's for relanded and flagged, the human's for missed
    revert: str | None = None  # the human revert's commit, for missed


@dataclass
class TrustRow:
    """One repository's counts."""

    repository: str
    bisections: int = 0  # finished (any status, cancelled included)
    confirmed: int = 0  # answers (a test each) with status found
    inconclusive: int = 0  # answers finished without a culprit, cancelled excluded
    cancelled: int = 0
    statuses: dict[str, int] = field(default_factory=dict)  # every finished status
    reverts_opened: int = 0
    relanded: int = 0  # reverts whose culprit was re-landed unchanged: false positives
    relanded_unknown: int = 0  # reverts for which that could not be told (no clone, culprit not fetched...)
    refused: dict[str, int] = field(default_factory=dict)  # reason key -> reverts refused for it
    flagged: int = 0  # distinct culprits the bot named
    regressions: int = 0  # commits of bisected ranges reverted on the branch by anyone, not re-landed unchanged
    caught: int = 0  # regressions the bot named
    missed: int = 0  # regressions the bot never named
    misses_known: bool = False  # whether the branch's reverts could be read (a clone)
    incidents: list[Incident] = field(default_factory=list)

    @property
    def recall(self) -> float | None:
        """Caught / regressions; None when the branch's reverts are unknown or there is no regression."""
        return self.caught / self.regressions if self.misses_known and self.regressions else None

    @property
    def precision(self) -> float | None:
        """Reverts that were right (not re-landed unchanged) / reverts made with a known answer; None when none."""
        return (self.relanded_known - self.relanded) / self.relanded_known if self.relanded_known else None

    @property
    def reverts_refused(self) -> int:
        return sum(self.refused.values())

    @property
    def relanded_known(self) -> int:
        """Reverts whose re-land question has an answer."""
        return self.reverts_opened - self.relanded_unknown

    @property
    def false_positive_rate(self) -> float | None:
        """Re-landed unchanged / reverts with a known answer; None when none is known."""
        return self.relanded / self.relanded_known if self.relanded_known else None

    @property
    def confirmed_rate(self) -> float | None:
        """Confirmed / (confirmed + inconclusive); None before any answer."""
        answered = self.confirmed + self.inconclusive
        return self.confirmed / answered if answered else None

    def add(self, other: TrustRow) -> None:
        for name in (
            "bisections",
            "confirmed",
            "inconclusive",
            "cancelled",
            "reverts_opened",
            "relanded",
            "relanded_unknown",
            "flagged",
            "regressions",
            "caught",
            "missed",
        ):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.misses_known = self.misses_known or other.misses_known
        self.incidents = [*self.incidents, *other.incidents]
        self.statuses = dict(Counter(self.statuses) + Counter(other.statuses))
        self.refused = dict(Counter(self.refused) + Counter(other.refused))


@dataclass
class TrustReport:
    """Every repository's row (sorted by name) and their sum."""

    rows: list[TrustRow]
    total: TrustRow


def _str(value: Any) -> str | None:
    return value if isinstance(value, str) and value else None


def repository_of(row: Bisection) -> str:
    """`owner/repo` from where it was asked, else the stored repository path (as the dashboard names it)."""
    return _str((row.origin or {}).get("repo")) or row.repo


def answers(row: Bisection) -> list[tuple[str, BisectionOutcome]]:
    """A finished bisection's answers, (status, outcome): one per test (a test still running when the bisection was
    cancelled answers `cancelled`)."""
    return [(e.word if e.status else row.status or "", e.told) for e in entries(row.tests)]


def revert_opened(outcome: BisectionOutcome) -> bool:
    return outcome.revert_pr is not None


def refusal_reason(outcome: BisectionOutcome | dict) -> str:
    """The guard that refused the revert, as stored with the bisection (bot.domain.guards.Refusal.key)."""
    key = _str((parse_outcome(outcome) if isinstance(outcome, dict) else outcome).revert_refused_reason)
    return key if key in GUARDS else OTHER_REASON


def revert_bases(
    bisections: Iterable[Bisection], reverts: Mapping[str, Sequence[Revert]] | None = None
) -> dict[tuple[str, str], str]:
    """(repository, culprit) -> where a `relanded` callable starts looking for a re-land: the head the bot's revert
    was made on (the earliest bisection's, for a culprit reverted more than once), else the first revert of it on
    the branch (`reverts`, as report() takes them)."""
    out: dict[tuple[str, str], str] = {}
    for row in bisections:
        for _, outcome in answers(row):
            culprit, head = _str(outcome.culprit), _str(row.head)
            if culprit and head and revert_opened(outcome):
                out.setdefault((repository_of(row), culprit), head)
    for repo, found in (reverts or {}).items():
        for r in found:
            out.setdefault((repo, r.reverted), r.sha)
    return out


def ranges(bisections: Iterable[Bisection]) -> dict[str, list[tuple[str, str]]]:
    """repository -> the (GOOD, BAD) of every finished bisection: where a watched test went red."""
    out: dict[str, list[tuple[str, str]]] = {}
    for row in bisections:
        if row.status is not None and row.good and row.bad:
            pairs = out.setdefault(repository_of(row), [])
            if (row.good, row.bad) not in pairs:
                pairs.append((row.good, row.bad))
    return out


def report(
    bisections: Iterable[Bisection],
    relanded: Callable[[str, str], bool | None],
    reverts: Mapping[str, Sequence[Revert]] | None = None,
) -> list[TrustRow]:
    """One row per repository, sorted by name. `relanded(repo, culprit_sha)` is asked once per revert opened
    (True: re-landed unchanged, False: not, None: unknown); a revert without a culprit sha counts as unknown.
    `reverts`: per repository, the reverts on its default branch of commits of its bisected ranges (`ranges()`); a
    repository missing from it has unknown misses. Each reverted commit is asked `relanded` too (its base:
    `revert_bases(bisections, reverts)`)."""
    rows: dict[str, TrustRow] = {}
    named: dict[str, set[str]] = {}  # the culprits flagged
    opened: dict[str, set[tuple]] = {}  # the reverts opened: one PR fixes every test its culprit broke
    for row in bisections:
        if row.status is None:  # still running: no answer yet
            continue
        repo = repository_of(row)
        t = rows.setdefault(repo, TrustRow(repo))
        t.bisections += 1
        for status, outcome in answers(row):
            _count(t, status, outcome, relanded, named.setdefault(repo, set()), opened.setdefault(repo, set()))
    for repo, t in rows.items():
        if reverts is not None and repo in reverts:
            _regressions(t, reverts[repo], named.get(repo, set()), relanded)
    return [rows[name] for name in sorted(rows)]


def _regressions(
    t: TrustRow, reverts: Sequence[Revert], named: set[str], relanded: Callable[[str, str], bool | None]
) -> None:
    """Recall's events into the row: each commit reverted on the branch (once, however often it was reverted) is a
    regression unless it came back unchanged; caught when the bot named it, else missed."""
    t.misses_known = True
    seen: set[str] = set()
    for r in reverts:
        if r.reverted in seen:
            continue
        seen.add(r.reverted)
        if relanded(t.repository, r.reverted):  # re-landed unchanged: not needed, whoever reverted it
            continue
        t.regressions += 1
        if r.reverted in named:
            t.caught += 1
        else:
            t.missed += 1
            t.incidents.append(Incident("missed", r.reverted, r.reverted_subject, r.pr, r.sha))


def _count(
    t: TrustRow,
    status: str,
    outcome: BisectionOutcome,
    relanded: Callable[[str, str], bool | None],
    named: set[str],
    opened: set[tuple],
) -> None:
    """One answer into its repository's row (`named`, `opened`: the culprits it already flagged, the reverts it
    already counted)."""
    t.statuses[status] = t.statuses.get(status, 0) + 1
    if status == CONFIRMED:
        t.confirmed += 1
    elif status == CANCELLED:
        t.cancelled += 1
    else:
        t.inconclusive += 1
    culprit = _str(outcome.culprit)
    subject = _str(outcome.culprit_subject) or ""
    if status == CONFIRMED and culprit and culprit not in named:
        named.add(culprit)
        t.flagged += 1
        t.incidents.append(Incident("flagged", culprit, subject, outcome.revert_pr))
    if revert_opened(outcome) and (outcome.revert_pr, culprit) not in opened:
        opened.add((outcome.revert_pr, culprit))
        t.reverts_opened += 1
        answer = relanded(t.repository, culprit) if culprit else None
        if answer is None:
            t.relanded_unknown += 1
        elif answer:
            t.relanded += 1
            t.incidents.append(Incident("relanded", culprit or "", subject, outcome.revert_pr))
    if _str(outcome.revert_refused):
        reason = refusal_reason(outcome)
        t.refused[reason] = t.refused.get(reason, 0) + 1


def build(
    bisections: Iterable[Bisection],
    relanded: Callable[[str, str], bool | None],
    reverts: Mapping[str, Sequence[Revert]] | None = None,
) -> TrustReport:
    """report() and the sum of its rows."""
    rows = report(bisections, relanded, reverts)
    total = TrustRow("all repositories")
    for row in rows:
        total.add(row)
    return TrustReport(rows, total)
