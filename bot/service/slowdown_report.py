"""What a proven slowdown leads to, as the policy's `on_slowdown` says, and its words: `comment` (the evidence on the
culprit PR, and on the follow-up when one is found), `issue` (an issue with the evidence) or `revert` (the revert PR
as for a red test, bot.service.conclude, with the evidence commented on it). Nothing is written in shadow mode, while
the kill switch is on, or for a culprit whose A/B did not prove that reverting it restores the metric.

The evidence: the shift CI's nightly series shows ("-4.1% +/- 0.9%", its means either side and the runs it was read
between), the culprit's and its parent's readings on the bisect runner (median and spread), the engine's effect at
the culprit, the A/B of HEAD against HEAD + revert, and the other metrics that shifted at the same run."""

from __future__ import annotations

import logging
from dataclasses import dataclass, replace

from bot.domain.bisect.ledger import entries
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
revert-bisect bisected a slowdown of `{test}` on `{base}` to {culprit}: **`{metric}` {effect}** in CI's nightly \
runs ({ci}).

| on the bisect runner | median | spread | runs |
|---|---|---|---|
| {culprit_row} | {culprit_median} | {culprit_spread} | {culprit_runs} |
| its parent `{parent}` | {parent_median} | {parent_spread} | {parent_runs} |

The bisect runner's readings: {measured}. {ab}{others}"""
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
        f"{c.runs_after} runs from run {after} on; a change point at a false-alarm rate of {c.level * 100:g}% per "
        "metric and night"
    )


def evidence(
    slowdown: Slowdown, outcome: BisectionOutcome, base: str, culprit: str, parent: str, culprit_ref: str
) -> str:
    """The slowdown's evidence, in Markdown: `culprit_ref` names the culprit (#PR, or its commit)."""
    shift = slowdown.judged
    effect = outcome.effect
    mine = _side(spread_of(effect.culprit if effect else []))
    theirs = _side(spread_of(effect.parent if effect else []))
    ab = outcome.ab
    head = f"`{ab.head[:12]}`" if ab and ab.head else "HEAD"
    proof = (
        f"Reverting it on {head} restores the metric: in the A/B of HEAD against HEAD + revert, HEAD reads like the "
        "culprit and HEAD + revert like its parent."
        if ab and ab.passed
        else "No A/B of HEAD against HEAD + revert proved the revert."
    )
    others = "".join(f"\n- `{s.metric}` {effect_text(s)}" for s in slowdown.shifts[1:])
    return EVIDENCE.format(
        test=slowdown.test,
        base=base,
        culprit=culprit_ref,
        metric=shift.metric,
        effect=effect_text(shift),
        ci=_ci(shift),
        culprit_row=f"{culprit_ref} `{culprit[:12]}`" if culprit_ref.startswith("#") else f"`{culprit[:12]}`",
        culprit_median=mine[0],
        culprit_spread=mine[1],
        culprit_runs=mine[2],
        parent=parent[:12] or f"{culprit[:12]}^",
        parent_median=theirs[0],
        parent_spread=theirs[1],
        parent_runs=theirs[2],
        measured=effect.words if effect else "no effect was stated",
        ab=proof,
        others=f"\n\nAlso slower from the same run on:{others}" if others else "",
    )


def _parent(admitted: Admitted, culprit: str) -> str:
    return next(iter(admitted.repo.parents(culprit)), "")


@dataclass(frozen=True)
class Reported:
    """What became of a proven slowdown: where its evidence went (a PR or issue number), or why nowhere."""

    on: int | None
    why: str = ""


class SlowdownReports:
    def __init__(self, store: BisectionStore, conclusions: Conclusions):
        self.store = store
        self.conclusions = conclusions

    def report(self, forge: Forge, admitted: Admitted, slowdown: Slowdown, action: OnSlowdown) -> Reported:
        """The ended bisection's culprit, acted on; nothing written when it found none or its A/B did not prove it."""
        row = self.store.get(admitted.loaded.id)
        found = culprits(row)
        if not found:
            return Reported(None, f"no culprit ({row.status or row.phase})")
        ((culprit, tests),) = list(found.items())[:1]
        outcome = next(e.told for e in entries(row.tests) if e.test == tests[0])
        if not (outcome.ab and outcome.ab.passed):
            return Reported(None, "the A/B did not prove that reverting the culprit restores the metric")
        policy = admitted.policy
        if policy.mode == "shadow":
            return Reported(None, "shadow mode: nothing written")
        if action is OnSlowdown.REVERT:
            return self._revert(forge, admitted, slowdown, row, outcome, culprit)
        if kill_switch(forge, policy) is not None:
            return Reported(None, "the kill switch is on")
        subject = admitted.repo.subjects([culprit])[culprit]
        facts = forge.culprit_facts(culprit, pr_number(subject))
        ref = f"#{facts.pr}" if facts.pr else f"`{culprit[:12]}`"
        text = evidence(slowdown, outcome, policy.default_branch, culprit, _parent(admitted, culprit), ref)
        if action is OnSlowdown.ISSUE:
            title = ISSUE_TITLE.format(metric=slowdown.judged.metric, effect=effect_text(slowdown.judged), culprit=ref)
            number, _ = forge.ensure_issue(
                f"slowdown-{row.id}", f"{title}: {facts.title or subject}", text + ISSUE_FOOTER.format(id=row.id)
            )
            self._record(row, tests, facts, subject, evidence_on=number)
            return Reported(number)
        if not facts.pr:
            self._record(row, tests, facts, subject)
            return Reported(None, f"the culprit {culprit[:12]} has no PR to comment on (set `on_slowdown: issue`)")
        forge.comment_once(facts.pr, f"slowdown-{row.id}", text + COMMENT_FOOTER.format(id=row.id))
        followup = self._followup(forge, admitted, slowdown, facts)
        self._record(row, tests, facts, subject, evidence_on=facts.pr, followup=followup)
        return Reported(facts.pr)

    def _followup(self, forge: Forge, admitted: Admitted, slowdown: Slowdown, facts: CulpritFacts) -> int | None:
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
                f"slowdown-followup-{admitted.loaded.id}",
                FOLLOWUP_COMMENT.format(
                    test=slowdown.test,
                    base=admitted.policy.default_branch,
                    metric=slowdown.judged.metric,
                    effect=effect_text(slowdown.judged),
                    culprit_pr=facts.pr,
                    why=why,
                ),
            )
        return followup

    def _revert(
        self,
        forge: Forge,
        admitted: Admitted,
        slowdown: Slowdown,
        row: BisectionRecord,
        outcome: BisectionOutcome,
        culprit: str,
    ) -> Reported:
        """The revert PR as for a red test (its guards, `revert.action`), and the slowdown's evidence said on it."""
        _, link = self.conclusions.conclude(forge, admitted)
        if not link or not link.startswith("#") or not link[1:].isdigit():
            return Reported(None, f"no revert PR: {link or 'nothing to publish'}")
        number = int(link[1:])
        subject = admitted.repo.subjects([culprit])[culprit]
        ref = f"#{n}" if (n := pr_number(subject)) else f"`{culprit[:12]}`"
        text = evidence(slowdown, outcome, admitted.policy.default_branch, culprit, _parent(admitted, culprit), ref)
        forge.comment_once(number, f"slowdown-{row.id}", REVERT_NOTE.format(evidence=text))
        return Reported(number)

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
