"""After the bot's revert is merged: the culprit PR is told how to re-land it -- revert the revert together with the
fix, in one PR -- and where the fix is worked on. The `pull_request` `closed` delivery of a merged PR is the cue
(routed to the job `revert_merged`); a PR the bot did not open as a revert is left alone."""

from __future__ import annotations

import logging
from collections.abc import Callable

from bot.domain.bisect.ledger import entries
from bot.domain.outcome import BisectionOutcome
from bot.ports import Forge
from bot.ports.store import BisectionRecord, BisectionStore, ClaimedJob

log = logging.getLogger("revert_bisect.reland")

RELAND_COMMENT = (
    "The revert of this PR, #{revert_pr}, was merged on `{base}`{merged_as}, so {tests} {be} green again.\n\n"
    "**To re-land it**, revert the revert together with the fix, in one PR: on a branch from `{base}`, "
    "`git revert {revert_sha}`, then the fix on top, so the same CI run tests both. {followup}\n\n"
    "(bisection #{id})"
)
FOLLOWUP = "The proper fix is being worked on in #{followup}: re-land with it, or after it."
NO_FOLLOWUP = "No follow-up was found: say in the re-land PR what fixes the regression."


class RevertMerged:
    """The job for a merged PR (bot.ports.store.ClaimedJob's payload: GitHub's `pull_request` event)."""

    def __init__(self, store: BisectionStore, forge_for: Callable[[str], Forge]):
        self.store = store
        self.forge_for = forge_for

    def __call__(self, job: ClaimedJob) -> None:
        payload = job.payload
        pr = payload.get("pull_request") or {}
        repo = (payload.get("repository") or {}).get("full_name")
        if payload.get("action") != "closed" or not pr.get("merged") or not repo or not pr.get("number"):
            return
        self.revert_merged(repo, int(pr["number"]), pr.get("merge_commit_sha"), (pr.get("base") or {}).get("ref"))

    def revert_merged(self, repo: str, number: int, merge_sha: str | None, base: str | None) -> int | None:
        """The re-land comment on the culprit PR of the bot's revert `number` (its id); None when `number` is not one
        of the bot's reverts or its culprit has no PR. Said once: a redelivery edits the same comment."""
        found = self._revert(repo, number)
        if found is None:
            return None
        row, outcome, tests = found
        if not outcome.culprit_pr:
            return None
        text = RELAND_COMMENT.format(
            revert_pr=number,
            base=base or "the default branch",
            merged_as=f" as `{merge_sha[:12]}`" if merge_sha else "",
            tests=", ".join(f"`{t}`" for t in tests),
            be="is" if len(tests) == 1 else "are",
            revert_sha=merge_sha[:12] if merge_sha else f"<the merge of #{number}>",
            followup=FOLLOWUP.format(followup=outcome.followup) if outcome.followup else NO_FOLLOWUP,
            id=row.id,
        )
        part = f"-{outcome.culprit[:12]}" if outcome.culprit else ""
        comment_id, _ = self.forge_for(repo).comment_once(outcome.culprit_pr, f"reland-{row.id}{part}", text)
        log.info("bisection #%s: revert #%s merged, re-land said on #%s", row.id, number, outcome.culprit_pr)
        return comment_id

    def _revert(self, repo: str, number: int) -> tuple[BisectionRecord, BisectionOutcome, list[str]] | None:
        """The bisection whose revert PR is `number`, its outcome and the tests the revert fixed."""
        for row in self.store.found_in(repo):
            fixed = [e for e in entries(row.tests) if e.told.revert_pr == number]
            if fixed:
                return row, fixed[0].told, [e.test for e in fixed]
        return None
