"""Concluding a bisection that found its culprit: the culprit reverted on the branch already (its revert confirmed),
else the guards' decision on reverting it (bot.domain.guards), published (bot.service.publish) and recorded in the
tests it broke."""

from __future__ import annotations

import logging
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from bot.domain.bisect.ledger import entries, entry
from bot.domain.guards import Culprit, Repository, revert_refusal
from bot.domain.outcome import AB, BisectionOutcome
from bot.domain.policy import RevertAction
from bot.domain.subjects import pr_number
from bot.ports import Forge, RevertFound
from bot.ports.store import BisectionRecord, BisectionStore, HoldLog
from bot.service.holds import held_revert, hold, kill_switch
from bot.service.intake import Admitted
from bot.service.publish import Clone, Publisher, Target
from bot.service.workspace import Workspace

log = logging.getLogger("revert_bisect.bisections")


class Conclusions:
    def __init__(self, store: BisectionStore, holds: HoldLog, workspace: Workspace) -> None:
        self.store = store
        self.holds = holds
        self.workspace = workspace

    def conclude(self, forge: Forge, admitted: Admitted) -> tuple[BisectionRecord, str | None]:
        """The ended bisection as stored after its conclusion, and what became of its revert, for the status comment:
        `#N` (the revert PR), or why none was opened; None when there was nothing to publish.

        One revert per culprit, listing every test it broke with the A/B of each, the culprit commented on once. A
        test without a confirmed culprit (ambiguous, inconclusive) is reported in the status comment, never reverted;
        a culprit whose A/B did not prove every test it broke, neither."""
        row = self.store.get(admitted.loaded.id)
        if admitted.work.dry_run:
            return row, None
        said = []
        broke = culprits(row)
        reverted = self._reverted_on_branch(admitted, *broke) if broke else {}
        for culprit, tests in broke.items():
            outcomes = {t: entry(row.tests, t).told for t in tests}
            found = reverted[culprit]
            if not (found or all(o.ab and o.ab.passed for o in outcomes.values())):
                said.append(f"{culprit[:12]}: not opened: the A/B did not prove the revert fixes every test it broke")
                continue
            link = self._publish(forge, admitted, row, outcomes[tests[0]], culprit, found, tests)
            many = len(broke) > 1  # several culprits: each answer says whose it is
            said.append(f"{culprit[:12]}: {link}" if many and link and not link.startswith("#") else link or "")
        return self.store.get(row.id), "; ".join(filter(None, said)) or None  # as publishing recorded it

    def _reverted_on_branch(self, admitted: Admitted, *culprits: str) -> dict[str, RevertFound | None]:
        """Each culprit's revert on the branch, merged before the bisection or while it ran (so fetched again, once)."""
        branch = admitted.policy.default_branch
        repo = self.workspace.sync(admitted.work.repo)
        return {c: self.workspace.clones.find_revert(repo, c, f"origin/{branch}", branch) for c in culprits}

    def _publish(
        self,
        forge: Forge,
        admitted: Admitted,
        row: BisectionRecord,
        outcome: BisectionOutcome,
        culprit: str,
        found: RevertFound | None,
        tests: tuple[str, ...],
    ) -> str | None:
        """The guards' decision on the culprit, recorded; the publisher writes what it decided."""
        work, policy, repo = admitted.work, admitted.policy, admitted.repo
        if policy.mode == "shadow":  # everything but writes to GitHub: no branch, PR, issue or comment elsewhere
            return "not opened (shadow mode)"
        subject = repo.subjects([culprit])[culprit]
        facts = forge.culprit_facts(culprit, pr_number(subject))
        clone = Clone(
            clones=self.workspace.clones,
            repo=repo,
            remote_url=self.workspace.clone_url(work.repo),
            token=self.workspace.token(work.repo),
        )
        publisher = Publisher(
            Target(
                forge=forge,
                policy=policy,
                repo_slug=work.repo,
                clone=clone,
                bisection_id=row.id,
                tests=tests,
                part=culprit[:12],
            )
        )
        ab, confidence = outcome.ab or AB(), outcome.confidence or 0
        evidence = f"{ab.in_words()}; P={confidence:.3f}"

        def record(**facts_: Any) -> None:  # for the dashboard and the trust report
            facts_ = dict(culprit_pr=facts.pr, culprit_subject=subject, **facts_)
            # on each test it broke, the tests as they are now (an earlier culprit's facts too)
            now = [
                replace(e, outcome=e.told.with_facts(**facts_)) if e.test in tests else e
                for e in entries(self.store.get(row.id).tests)
            ]
            self.store.save_tests(row.id, now)

        if found:  # nothing to open, so nothing to refuse: that revert's PR gets the evidence instead
            proof = evidence if ab.passed else f"P={confidence:.3f}"  # no A/B: HEAD had it
            published = publisher.confirm(found, proof, facts)
            record(already_reverted=found.as_json(), evidence_on=published.evidence_on)
            log.info("bisection #%s: %s", row.id, found)
            return f"none opened: {found}"
        now = datetime.now(UTC)
        kill = kill_switch(forge, policy)
        refusal = revert_refusal(
            policy,
            Culprit(subject, facts.author, repo.committed_at(culprit), facts.labels),
            Repository(
                policy.default_branch,
                kill,
                forge.reverts_opened_since(now.replace(hour=0, minute=0, second=0, microsecond=0)),
            ),
            now,
        )
        if refusal:
            record(revert_refused=str(refusal), revert_refused_reason=refusal.key)
            if refusal.key == "kill_switch" and kill is not None:
                hold(forge, self.holds, policy, kill, held_revert(forge, work.repo, row.id, culprit, facts.pr, kill))
            publisher.refused(facts, evidence, refusal)
            log.warning("bisection #%s: no revert PR for %s: %s", row.id, culprit[:12], refusal)
            return f"not opened: {refusal}"
        published, pr, followup = publisher.revert(
            row, admitted.loaded.problem, culprit, facts, evidence, work.followup
        )
        record(
            pr_body=pr.body,
            branch=published.branch,
            revert_pr=published.pr_number,
            revert_pr_url=published.pr_url,
            followup=followup,
            evidence_on=published.evidence_on,
            notes=list(published.notes),
            followup_passed_over=[p.as_json() for p in published.passed_over],
            **(dict(revert_refused=published.refused, revert_refused_reason="push") if published.refused else {}),
        )
        if published.refused:  # GitHub refused the branch (workflow files): said on the culprit PR, no PR opened
            log.warning("bisection #%s: %s", row.id, published.refused)
            return f"not opened: {published.refused}"
        if policy.revert.action is RevertAction.COMMENT_ONLY and not published.existing_revert:
            where = (
                f"#{published.evidence_on}"
                if published.evidence_on
                else f"bisection #{row.id} on the dashboard (the culprit has no PR)"
            )
            return f"not opened (`revert.action: comment_only`): the evidence is on {where}"
        return f"#{published.pr_number}"


def culprits(row: BisectionRecord) -> dict[str, tuple[str, ...]]:
    """A group's culprits, each with the tests it broke (the tests whose own bisection found it), in test order."""
    broke: dict[str, list[str]] = {}
    for e in entries(row.tests):
        if e.culprit:
            broke.setdefault(e.culprit, []).append(e.test)
    return {c: tuple(ts) for c, ts in broke.items()}
