"""What a proven slowdown leads to (bot.service.slowdown_report), as the policy's `on_slowdown` says: the evidence on
the culprit PR and its follow-up (`comment`), an issue (`issue`), the revert PR as for a red test with the evidence on
it (`revert`); and nothing written in shadow mode, under the kill switch, without a culprit or without a proven A/B.
A recording forge stands for GitHub (tests/e2e/test_slowdown_story.py drives `comment` through the sandbox)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from bot.adapters.policy_files import load
from bot.domain.bisect.ledger import Entry, dump, entries
from bot.domain.bisect.model import Phase, State, Status
from bot.domain.outcome import parse_outcome
from bot.domain.perf.slowdowns import assess
from bot.domain.policy import OnSlowdown
from bot.ports import CulpritFacts, Followups
from bot.service.slowdown_report import SlowdownReports
from tests.support.ledger_rows import one_test
from tests.unit.test_slowdowns import series_of, tput

POLICY = load(Path(__file__).resolve().parents[2] / "policies" / "perf" / "example-perf.yaml")
CULPRIT, PARENT, HEAD = "c" * 40, "p" * 40, "h" * 40
TEST = "decode-throughput"
FOUND = dict(
    culprit=CULPRIT,
    confidence=0.995,
    ab=dict(head=HEAD, passed=True, head_verdicts=["bad"] * 3, revert_verdicts=["good"] * 3),
    effect=dict(words="-4.4% +/- 1.1% at the culprit (95%)", culprit=[95.0, 96.0, 94.0], parent=[100.0, 99.0, 101.0]),
)


@dataclass
class Forge:
    kill: int | None = None
    followup: int | None = None
    comments: dict[str, tuple[int, str]] = field(default_factory=dict)  # key -> (where, text)
    issues: dict[str, tuple[str, str]] = field(default_factory=dict)  # key -> (title, body)

    def culprit_facts(self, sha: str, subject_pr: int | None) -> CulpritFacts:
        return CulpritFacts(subject_pr, "[Observability] Keep the logits' range", "ada", ())

    def kill_switch(self, label: str, allowed_roles: list[str], allowed_users: list[str]) -> int | None:
        return self.kill

    def followup_for(self, culprit_pr: int) -> Followups:
        return Followups(self.followup, "it changes `decode_step`" if self.followup else "")

    def comment_once(self, number: int, key: str, body: str) -> tuple[int, bool]:
        created = key not in self.comments
        self.comments.setdefault(key, (number, body))
        return 1, created

    def ensure_issue(self, key: str, title: str, body: str) -> tuple[int, bool]:
        self.issues.setdefault(key, (title, body))
        return 77, True


@dataclass
class Store:
    row: Any

    def get(self, bisection_id: int) -> Any:
        return self.row

    def save_tests(self, bisection_id: int, tests) -> None:
        self.row = SimpleNamespace(**{**vars(self.row), "tests": dump(tests)})


@dataclass
class Conclusions:
    """The revert PR opened for each culprit, recorded on the tests it broke as bot.service.conclude records it."""

    store: Store
    numbers: dict[str, int] = field(default_factory=lambda: {CULPRIT: 501})
    concluded: int = 0

    def conclude(self, forge, admitted):
        self.concluded += 1
        now = [
            replace(e, outcome=e.told.with_facts(revert_pr=self.numbers[e.culprit])) if e.culprit else e
            for e in entries(self.store.row.tests)
        ]
        self.store.save_tests(9, now)
        return None, "; ".join(f"#{n}" for n in self.numbers.values())


class Repo:
    def subjects(self, shas: list[str]) -> dict[str, str]:
        return {s: "[Observability] Keep the logits' range (#8576)" for s in shas}

    def parents(self, sha: str) -> list[str]:
        return [PARENT]


@cache
def slowdown():
    series = series_of(bs8=[1000.0] * 10 + [950.0] * 10, bs32=[1000.0] * 10 + [930.0] * 10)
    (found,) = assess(TEST, series, {k: tput(k) for k in ("bs8", "bs32")}).to_bisect
    return found


def run(action: OnSlowdown, outcome: dict | None = FOUND, forge: Forge | None = None, **policy: Any):
    status = "found" if outcome and outcome.get("culprit") else "not_reproducible"
    row = SimpleNamespace(id=9, status=status, phase="done", tests=one_test(status, outcome, test=TEST))
    store, forge = Store(row), forge or Forge()
    conclusions = Conclusions(store)
    admitted = SimpleNamespace(policy=POLICY.model_copy(update=policy), repo=Repo(), loaded=SimpleNamespace(id=9))
    reports = SlowdownReports(store, conclusions)  # type: ignore[arg-type]
    (reported,) = reports.report(forge, admitted, slowdown(), action)  # type: ignore[arg-type]  (one culprit)
    return reported, forge, store, conclusions


def test_comment_puts_the_evidence_on_the_culprit_pr_and_its_followup():
    reported, forge, store, conclusions = run(OnSlowdown.COMMENT, forge=Forge(followup=90))
    assert reported.on == 8576 and conclusions.concluded == 0 and not forge.issues
    where, text = forge.comments["slowdown-9"]
    assert where == 8576
    for words in ("`decode-throughput`", "**`bs32` -", "+/- ", "| its parent `pppppppppppp` | 100 |", "| 95 |"):
        assert words in text, words
    assert "-4.4% +/- 1.1% at the culprit" in text and "on `hhhhhhhhhhhh` restores the metric" in text
    assert "\n- `bs8` -" in text  # the other metric slower from the same run
    assert forge.comments["slowdown-followup-9"][0] == 90 and "#8576" in forge.comments["slowdown-followup-9"][1]
    (told,) = entries(store.row.tests)
    assert (told.told.evidence_on, told.told.culprit_pr, told.told.followup) == (8576, 8576, 90)


def test_issue_opens_one_with_the_evidence_and_comments_nowhere():
    reported, forge, store, _ = run(OnSlowdown.ISSUE)
    assert reported.on == 77 and not forge.comments
    ((title, body),) = forge.issues.values()
    assert title.startswith("bs32 -") and "since #8576" in title and "`on_slowdown` is `issue`" in body
    assert entries(store.row.tests)[0].told.evidence_on == 77


def test_revert_opens_the_revert_pr_as_for_a_red_test_and_states_the_effect_on_it():
    reported, forge, _, conclusions = run(OnSlowdown.REVERT)
    assert conclusions.concluded == 1 and reported.on == 501
    where, text = forge.comments["slowdown-9"]
    assert where == 501 and text.startswith("The slowdown this PR reverts") and "+/- " in text


@pytest.mark.parametrize(
    ("outcome", "forge", "policy", "why"),
    [
        (FOUND, Forge(), {"mode": "shadow"}, "shadow mode"),
        (FOUND, Forge(kill=3), {}, "kill switch"),
        ({**FOUND, "ab": {**FOUND["ab"], "passed": False}}, Forge(), {}, "A/B"),
        ({"message": "GOOD and BAD do not differ"}, Forge(), {}, "no culprit"),
    ],
)
def test_nothing_is_written_without_a_proven_culprit_or_when_the_bot_must_not_write(outcome, forge, policy, why):
    reported, forge, _, conclusions = run(OnSlowdown.COMMENT, outcome, forge, **policy)
    assert reported.on is None and why in reported.why
    assert not forge.comments and not forge.issues and conclusions.concluded == 0


# -- a bisection of the slowdown's metrics (a member each, named by its metric): a culprit each, or one for both ----

OTHER = "d" * 40


def by_metric(culprits: dict[str, str]) -> dict:
    """The tests of a slowdown's bisection of bs32 and bs8, each found at its culprit, its A/B proven."""
    effects = {"bs32": [93.0, 92.0, 94.0], "bs8": [95.0, 96.0, 95.5]}
    return dump(
        [
            Entry(
                metric,
                state=State(Phase.DONE),
                status=Status.FOUND,
                outcome=parse_outcome(
                    {**FOUND, "culprit": culprit, "effect": {**FOUND["effect"], "culprit": effects[metric]}}
                ),
            )
            for metric, culprit in culprits.items()
        ]
    )


class TwoPrs(Repo):
    def subjects(self, shas: list[str]) -> dict[str, str]:
        return {s: f"Change of {s[0]} (#{8576 if s == CULPRIT else 8600})" for s in shas}


def reported_by_metric(action: OnSlowdown, culprits: dict[str, str]):
    row = SimpleNamespace(id=9, status="found", phase="done", tests=by_metric(culprits))
    store, forge = Store(row), Forge()
    conclusions = Conclusions(store, {CULPRIT: 501, OTHER: 502})
    admitted = SimpleNamespace(policy=POLICY, repo=TwoPrs(), loaded=SimpleNamespace(id=9))
    reported = SlowdownReports(store, conclusions).report(forge, admitted, slowdown(), action)  # type: ignore[arg-type]
    return reported, forge, store


def test_two_metrics_slowed_by_two_commits_put_each_culprits_evidence_on_its_own_pr():
    reported, forge, store = reported_by_metric(OnSlowdown.COMMENT, {"bs32": CULPRIT, "bs8": OTHER})
    assert sorted(r.on for r in reported) == [8576, 8600]
    (on_first, first), (on_second, second) = (
        forge.comments[f"slowdown-9-{CULPRIT[:12]}"],
        forge.comments[f"slowdown-9-{OTHER[:12]}"],
    )
    assert (on_first, on_second) == (8576, 8600)
    assert "**`bs32` -" in first and "**`bs8` -" not in first and "| 93 |" in first
    assert "**`bs8` -" in second and "**`bs32` -" not in second and "| 95.5 |" in second
    # each names the other metric of the night, and what its own search found
    assert "\n- `bs8` -" in first and f"bisected to another commit, `{OTHER[:12]}`" in first
    assert "\n- `bs32` -" in second and f"bisected to another commit, `{CULPRIT[:12]}`" in second
    told = {e.test: e.told for e in entries(store.row.tests)}
    assert (told["bs32"].evidence_on, told["bs8"].evidence_on) == (8576, 8600)


def test_two_metrics_slowed_by_one_commit_are_one_comment_stating_each_effect():
    reported, forge, _ = reported_by_metric(OnSlowdown.COMMENT, {"bs32": CULPRIT, "bs8": CULPRIT})
    assert [r.on for r in reported] == [8576]
    ((where, text),) = forge.comments.values()
    assert where == 8576 and "**`bs32` -" in text and "**`bs8` -" in text
    assert "`bs32` on the bisect runner" in text and "`bs8` on the bisect runner" in text
    assert "restores every metric it slowed" in text and "Also slower" not in text


def test_two_culprits_are_two_revert_prs_each_with_its_own_evidence():
    reported, forge, _ = reported_by_metric(OnSlowdown.REVERT, {"bs32": CULPRIT, "bs8": OTHER})
    assert sorted(r.on for r in reported) == [501, 502]
    notes = {where: text for where, text in forge.comments.values()}
    assert "**`bs32` -" in notes[501] and "**`bs8` -" in notes[502]
