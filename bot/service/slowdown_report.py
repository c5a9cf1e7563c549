"""What a proven slowdown leads to, as the policy's `on_slowdown` says, per culprit its bisection found: `comment` (the
evidence on the culprit PR, and on the follow-up when one is found), `issue` (an issue with the evidence) or `revert`
(the revert PR as for a red test, bot.service.conclude, one per culprit, with the evidence commented on it). Nothing is
written in shadow mode, while the kill switch is on, or for a culprit whose A/B did not prove that reverting it
restores every metric it slowed.

A slowdown's bisection is the group search of its metrics (bot.service.slowdowns), a member per metric: the metrics
that shifted at one night may have two culprits among the night's commits, and each is acted on with the metrics it
slowed. The evidence of a culprit: each metric's shift in CI's nightly series ("-4.1% +/- 0.9%", its means either side
and the runs it was read between), the culprit's and its parent's readings of it on the bisect runner (median and
spread), the engine's effect at the culprit, the A/B of HEAD against HEAD + revert, and the slowdown's other metrics
with what their own search found. A bisection stored before groups of metrics judged one metric (the largest effect)
as its one test, named by the test: that test stands for the largest shift, the others listed beside it."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.domain.bisect.ledger import Entry, entries
from bot.domain.outcome import BisectionOutcome
from bot.domain.perf.slowdowns import Shift, Slowdown, Spread, spread_of
from bot.domain.policy import OnSlowdown
from bot.domain.subjects import pr_number
from bot.ports import CulpritFacts, Forge
from bot.ports.store import BisectionRecord, BisectionStore
from bot.service.conclude import Conclusions, culprits
from bot.service.holds import kill_switch
from bot.service.intake import Admitted

log = logging.getLogger("revert_bisect.slowdowns")

EVIDENCE = """\
revert-bisect bisected a slowdown of `{test}` on `{base}` to {culprit}: {effects} in CI's nightly runs ({ci}).
{tables} {ab}{others}"""
TABLE = """
| {label} | median | spread | runs |
|---|---|---|---|
| {culprit_row} | {culprit_median} | {culprit_spread} | {culprit_runs} |
| its parent `{parent}` | {parent_median} | {parent_spread} | {parent_runs} |

The bisect runner's readings{of}: {measured}."""
COMMENT_FOOTER = "\n\nThe policy's `on_slowdown` is `comment`: nothing was reverted. The runs are in bisection #{id}."
ISSUE_FOOTER = (
    "\n\nOpened because the policy's `on_slowdown` is `issue`: nothing was reverted. The runs are in bisection #{id}."
)
REVERT_NOTE = "The slowdown this PR reverts, as measured:\n\n{evidence}"
FOLLOWUP_COMMENT = (
    "revert-bisect bisected a slowdown of `{test}` on `{base}` (`{metric}` {effect}) to #{culprit_pr}, and the fix "
    "looks to be worked on here{why}. The evidence is on #{culprit_pr}."
)
ISSUE_TITLE = "{metric} {effect} since {culprit}"
NOT_PROVEN = "the A/B did not prove that reverting the culprit restores the metric"


def effect_text(shift: Shift) -> str:
    """CI's shift in words: "-4.1% +/- 0.9%"."""
    return f"{shift.change.effect * 100:+.1f}% +/- {shift.half_width * 100:.1f}%"


def _number(value: float) -> str:
    return f"{value:,.6g}" if abs(value) < 1e6 else f"{value:.6g}"


def _side(spread: Spread | None) -> tuple[str, str, str]:
    if spread is None:
        return "no readings", "", "0"
    told = f"+/- {spread.spread * 100:.1f}%" if spread.spread is not None else "one reading"
    return _number(spread.median), told, str(spread.runs)


def _ci(shift: Shift) -> str:
    c = shift.change
    before = f"[{shift.before.run_id}]({shift.before.url})" if shift.before.url else str(shift.before.run_id)
    after = f"[{shift.after.run_id}]({shift.after.url})" if shift.after.url else str(shift.after.run_id)
    return (
        f"mean {_number(c.mean_before)} over {c.runs_before} runs up to run {before}, {_number(c.mean_after)} over "
        f"{c.runs_after} runs from run {after} on, a change point at a false-alarm rate of {c.level * 100:g}% per "
        "metric and night"
    )


def members(slowdown: Slowdown, names: Sequence[str]) -> dict[str, Shift]:
    """Each member of the slowdown's bisection with the shift it bisected: a member is named by its metric; the one
    test of a bisection stored before groups of metrics judged the largest shift."""
    by_metric = {s.metric: s for s in slowdown.shifts}
    return {name: by_metric.get(name, slowdown.judged) for name in names}


def evidence(
    slowdown: Slowdown,
    slowed: Mapping[str, BisectionOutcome],
    base: str,
    culprit: str,
    parent: str,
    culprit_ref: str,
    others: Mapping[str, str] | None = None,
) -> str:
    """One culprit's evidence, in Markdown: `slowed` holds the outcome of each member it slowed (the largest shift
    first), `culprit_ref` names the culprit (#PR, or its commit), `others` what the search of each other member found
    (by metric; a metric missing from it is listed as slower from the same run on)."""
    shifts = members(slowdown, list(slowed))
    several = len(slowed) > 1
    tables = []
    for member, outcome in slowed.items():
        effect = outcome.effect
        mine = _side(spread_of(effect.culprit if effect else []))
        theirs = _side(spread_of(effect.parent if effect else []))
        metric = shifts[member].metric
        tables.append(
            TABLE.format(
                label=f"`{metric}` on the bisect runner" if several else "on the bisect runner",
                culprit_row=f"{culprit_ref} `{culprit[:12]}`" if culprit_ref.startswith("#") else f"`{culprit[:12]}`",
                culprit_median=mine[0],
                culprit_spread=mine[1],
                culprit_runs=mine[2],
                parent=parent[:12] or f"{culprit[:12]}^",
                parent_median=theirs[0],
                parent_spread=theirs[1],
                parent_runs=theirs[2],
                of=f" of `{metric}`" if several else "",
                measured=effect.words if effect else "no effect was stated",
            )
        )
    abs_ = [o.ab for o in slowed.values()]
    head = next((f"`{ab.head[:12]}`" for ab in abs_ if ab and ab.head), "HEAD")
    what = "every metric it slowed" if several else "the metric"
    proof = (
        f"Reverting it on {head} restores {what}: in the A/B of HEAD against HEAD + revert, HEAD reads like the "
        "culprit and HEAD + revert like its parent."
        if all(ab and ab.passed for ab in abs_)
        else "No A/B of HEAD against HEAD + revert proved the revert."
    )
    told = others or {}
    listed = [s for s in slowdown.shifts if s not in shifts.values()]
    lines = "".join(
        f"\n- `{s.metric}` {effect_text(s)}" + (f": {told[s.metric]}" if s.metric in told else "") for s in listed
    )
    return EVIDENCE.format(
        test=slowdown.test,
        base=base,
        culprit=culprit_ref,
        effects=" and ".join(f"**`{s.metric}` {effect_text(s)}**" for s in shifts.values()),
        ci="; ".join(f"`{s.metric}`: {_ci(s)}" if several else _ci(s) for s in shifts.values()),
        tables="\n".join(tables),
        ab=proof,
        others=f"\n\nAlso slower from the same run on:{lines}" if lines else "",
    )


def _parent(admitted: Admitted, culprit: str) -> str:
    return next(iter(admitted.repo.parents(culprit)), "")


@dataclass(frozen=True)
class Reported:
    """What became of a culprit of a proven slowdown: where its evidence went (a PR or issue number), or why nowhere."""

    on: int | None
    why: str = ""


def _said(entry: Entry, culprit: str) -> str:
    """What another member's own search found, beside a culprit's evidence."""
    if entry.culprit:
        return f"bisected to another commit, `{entry.culprit[:12]}`" if entry.culprit != culprit else "the same culprit"
    return f"{entry.word}, {entry.told.message}" if entry.told.message else entry.word


class SlowdownReports:
    def __init__(self, store: BisectionStore, conclusions: Conclusions):
        self.store = store
        self.conclusions = conclusions

    def report(self, forge: Forge, admitted: Admitted, slowdown: Slowdown, action: OnSlowdown) -> list[Reported]:
        """Each culprit the ended bisection found, acted on (in the order its members found them); nothing written
        when it found none, or for a culprit whose A/B did not prove its revert restores every metric it slowed."""
        row = self.store.get(admitted.loaded.id)
        found = culprits(row)
        if not found:
            return [Reported(None, f"no culprit ({row.status or row.phase})")]
        policy = admitted.policy
        told = {e.test: e for e in entries(row.tests)}
        proven = {c: all((ab := told[t].told.ab) is not None and ab.passed for t in ts) for c, ts in found.items()}
        if not any(proven.values()):
            return [Reported(None, NOT_PROVEN)]
        if policy.mode == "shadow":
            return [Reported(None, "shadow mode: nothing written")]
        if action is OnSlowdown.REVERT:
            return self._reverts(forge, admitted, slowdown, found, proven)
        if kill_switch(forge, policy) is not None:
            return [Reported(None, "the kill switch is on")]
        keyed = len(found) > 1  # several culprits: each its own comment, issue and follow-up note
        done = []
        for culprit, tests in found.items():
            if not proven[culprit]:
                done.append(Reported(None, f"{culprit[:12]}: {NOT_PROVEN}"))
                continue
            key = f"{row.id}-{culprit[:12]}" if keyed else str(row.id)
            done.append(self._one(forge, admitted, slowdown, row, culprit, tests, action, key))
        return done

    def _one(
        self,
        forge: Forge,
        admitted: Admitted,
        slowdown: Slowdown,
        row: BisectionRecord,
        culprit: str,
        tests: tuple[str, ...],
        action: OnSlowdown,
        key: str,
    ) -> Reported:
        """A culprit's evidence, commented on its PR (and its follow-up) or in an issue, as `action` says."""
        subject = admitted.repo.subjects([culprit])[culprit]
        facts = forge.culprit_facts(culprit, pr_number(subject))
        ref = f"#{facts.pr}" if facts.pr else f"`{culprit[:12]}`"
        text = self._evidence(admitted, slowdown, row, culprit, tests, ref)
        headline = members(slowdown, tests)[tests[0]]
        if action is OnSlowdown.ISSUE:
            title = ISSUE_TITLE.format(metric=headline.metric, effect=effect_text(headline), culprit=ref)
            number, _ = forge.ensure_issue(
                f"slowdown-{key}", f"{title}: {facts.title or subject}", text + ISSUE_FOOTER.format(id=row.id)
            )
            self._record(row, tests, facts, subject, evidence_on=number)
            return Reported(number)
        if not facts.pr:
            self._record(row, tests, facts, subject)
            return Reported(None, f"the culprit {culprit[:12]} has no PR to comment on (set `on_slowdown: issue`)")
        forge.comment_once(facts.pr, f"slowdown-{key}", text + COMMENT_FOOTER.format(id=row.id))
        followup = self._followup(forge, admitted, slowdown, headline, facts, key)
        self._record(row, tests, facts, subject, evidence_on=facts.pr, followup=followup)
        return Reported(facts.pr)

    def _evidence(
        self,
        admitted: Admitted,
        slowdown: Slowdown,
        row: BisectionRecord,
        culprit: str,
        tests: tuple[str, ...],
        ref: str,
    ) -> str:
        told = {e.test: e for e in entries(row.tests)}
        slowed = {t: told[t].told for t in tests}
        others = {t: _said(e, culprit) for t, e in told.items() if t not in tests}
        base = admitted.policy.default_branch
        return evidence(slowdown, slowed, base, culprit, _parent(admitted, culprit), ref, others)

    def _followup(
        self, forge: Forge, admitted: Admitted, slowdown: Slowdown, headline: Shift, facts: CulpritFacts, key: str
    ) -> int | None:
        """The follow-up where the fix is worked on (the policy's, else the forge's best), told; None when none fits."""
        assert facts.pr is not None
        followup = admitted.policy.followups.get(facts.pr)
        why = ""
        if followup is None:
            found = forge.followup_for(facts.pr)
            followup, why = found.best, f" ({found.why})" if found.best and found.why else ""
        if followup is not None:
            forge.comment_once(
                followup,
                f"slowdown-followup-{key}",
                FOLLOWUP_COMMENT.format(
                    test=slowdown.test,
                    base=admitted.policy.default_branch,
                    metric=headline.metric,
                    effect=effect_text(headline),
                    culprit_pr=facts.pr,
                    why=why,
                ),
            )
        return followup

    def _reverts(
        self,
        forge: Forge,
        admitted: Admitted,
        slowdown: Slowdown,
        found: Mapping[str, tuple[str, ...]],
        proven: Mapping[str, bool],
    ) -> list[Reported]:
        """The revert PRs as for red tests (one per culprit, with their guards and `revert.action`), and each culprit's
        evidence said on its revert PR."""
        _, link = self.conclusions.conclude(forge, admitted)
        row = self.store.get(admitted.loaded.id)  # as concluding recorded it
        told = {e.test: e.told for e in entries(row.tests)}
        keyed = len(found) > 1
        done = []
        for culprit, tests in found.items():
            number = next((n for t in tests if (n := told[t].revert_pr) is not None), None)
            if number is None:
                why = NOT_PROVEN if not proven[culprit] else f"no revert PR: {link or 'nothing to publish'}"
                done.append(Reported(None, f"{culprit[:12]}: {why}" if keyed else why))
                continue
            subject = admitted.repo.subjects([culprit])[culprit]
            ref = f"#{n}" if (n := pr_number(subject)) else f"`{culprit[:12]}`"
            text = self._evidence(admitted, slowdown, row, culprit, tests, ref)
            key = f"slowdown-{row.id}-{culprit[:12]}" if keyed else f"slowdown-{row.id}"
            forge.comment_once(number, key, REVERT_NOTE.format(evidence=text))
            done.append(Reported(number))
        return done

    def _record(
        self, row: BisectionRecord, tests: tuple[str, ...], facts: CulpritFacts, subject: str, **more: object
    ) -> None:
        """Where the evidence went, on the tests' outcomes (the dashboard and the trust report read them)."""
        told = dict(culprit_pr=facts.pr, culprit_subject=subject, **more)
        now = [
            replace(e, outcome=e.told.with_facts(**told)) if e.test in tests else e
            for e in entries(self.store.get(row.id).tests)
        ]
        self.store.save_tests(row.id, now)
