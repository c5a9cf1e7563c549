"""Running requested bisections for repositories on the forge: start, drive, record.

The repository is cloned (then fetched) from the forge with the token in a per-command header;
the bisection is stored with where it was asked for, its steps run where its policy says (the local
pool or the step workflow on self-hosted runners), its status comment is edited as it goes, and
the guards decide whether a proven revert is published (bot.service.publish writes it).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path

from bot.domain.bisect.model import Status
from bot.domain.errors import ForgeError, RepoError, RevertBisectError
from bot.domain.guards import Culprit, Repository, revert_refusal, start_refusal
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.domain.policy import Policy, RevertAction
from bot.domain.requests import CiReading, StartRequest
from bot.domain.scope import Scoped
from bot.domain.signals import Outcome
from bot.domain.subjects import pr_number
from bot.observability.logs import bind
from bot.ports import BackendFor, Clones, Forge, Git, RevertFound
from bot.ports.store import BisectionStore, HoldLog
from bot.service import setup
from bot.service.config import bisect_config
from bot.service.driver import Driver, Snapshot
from bot.service.holds import held_revert, held_start, hold
from bot.service.publish import Publisher
from bot.service.status import render_status

STATUS_EVERY_S = 5.0
log = logging.getLogger("revert_bisect.bisections")


def ci_readings(scoped: Scoped, bad_url: str) -> tuple[CiReading, ...]:
    """What CI said of the test from GOOD to BAD, oldest first: GOOD's pass, the runs between with a signal, BAD's
    failure (a run without a signal -- the job skipped, the test not run, the log expired -- says nothing). For a
    test with a metric, a failure CI printed no reading for says nothing either: the test died before measuring
    (a commit that does not build, a crash), which is not the regression; the bisection's own runs tell those."""
    signals = (scoped.good_signal, *reversed(scoped.history))
    measured = scoped.test.test.metric is not None
    told = [
        s
        for s in signals
        if s is not None
        and s.outcome is not Outcome.NONE
        and not (measured and s.outcome is Outcome.FAILED and s.metric is None)
    ]
    readings = [CiReading(s.sha, s.outcome is Outcome.PASSED, s.metric, s.url) for s in told]
    return (*readings, CiReading(scoped.bad, False, scoped.test.metric, bad_url))


def off_branch(repo: Git, good: str, bad: str, branch_ref: str) -> str | None:
    """Only commits reachable from the watched branch are ever checked out on a runner: never a fork's PR
    head or a side branch, whose code nobody with write access has merged."""
    for name, rev in (("good", good), ("bad", bad)):
        sha = repo.resolve(rev, name)
        if not repo.is_ancestor(sha, branch_ref):
            return (
                f"{name}={rev} is not on {branch_ref.removeprefix('origin/')}: only commits merged there are bisected"
            )
    return None


def too_long(repo: Git, good: str, bad: str, policy: Policy, test_id: str) -> str | None:
    """`bisect.max_commits`, counted over the commits the search may blame: the first-parent chain, or every
    commit of the range with `bisect.first_parent: false` (a wrong GOOD years back must not start a huge search)."""
    limit = policy.bisect.max_commits
    count = repo.count(good, bad, policy.bisect.first_parent)
    if count <= limit:
        return None
    return (
        f"the range has {count:,} commits, more than `bisect.max_commits` ({limit}): ask for a narrower range with "
        f"`/revert-bisect {test_id} good=<sha>` (a later good commit) or raise the key"
    )


class Bisections:
    """Every bisection of this deployment, whichever backend runs its steps (the local pool, the step workflow)."""

    def __init__(
        self,
        store: BisectionStore,
        holds: HoldLog,
        backends: BackendFor,
        clones: Clones,
        workspace: Path,
        policies: Mapping[str, Policy],
        clone_url: Callable[[str], str],
        token: Callable[[str], str],
    ):
        self.store = store
        self.holds = holds
        self.backends = backends
        self.clones = clones
        self.workspace = workspace
        self.policies = policies
        self.clone_url = clone_url
        self.token = token
        self._lock = threading.Lock()

    # -- the repository, synced from the forge --

    def _sync(self, repo: str) -> Git:
        target = self.workspace / repo.replace("/", "__")
        try:
            self.clones.sync(self.clone_url(repo), target, self.token(repo))
        except RepoError as exc:
            raise ForgeError(str(exc)) from exc
        return self.clones.open(target)

    # -- Bisections protocol --

    def start(self, request: StartRequest, forge: Forge) -> None:
        """A `/revert-bisect` request: reported in its thread (status comment, reactions)."""
        if not request.good:
            forge.comment_once(
                request.thread,
                f"need-good-{request.comment_id}",
                f"To bisect `{request.test}` from here I need the last good commit: "
                f"`/revert-bisect {request.test} good=<sha>`.",
            )
            return
        self._run(forge, request)

    def start_nightly(self, repo_slug: str, scoped: Scoped, forge: Forge) -> None:
        """A red scheduled run: one bisection per (test, range), never two for the same range; the test's readings
        in CI's scheduled runs from GOOD to BAD go with it as free evidence."""
        self._run(
            forge,
            StartRequest(
                repo_slug,
                None,
                None,
                None,
                scoped.test.test.id,
                scoped.good,
                scoped.bad,
                None,
                False,
                run=scoped.bad_run,
                cases=scoped.test.cases,
                ci=ci_readings(scoped, f"{forge.site}/actions/runs/{scoped.bad_run}"),
            ),
        )

    def _run(self, forge: Forge, work: StartRequest) -> None:
        policy = self.policies[work.repo]
        test = policy.test(work.test)
        with self._lock:  # one clone/fetch at a time per workspace
            repo = self._sync(work.repo)
        bad = work.bad or f"origin/{policy.default_branch}"
        try:
            # the transplanted test file is BAD's: a commit id every runner's clone has, not a moving ref
            bad_sha = repo.resolve(bad, "BAD") if test.probe.missing == "transplant" else None
            config = bisect_config(policy, test, bad, work.dry_run, work.cases, bad_sha)
            # A retried job (a GitHub hiccup, a restarted bot) resumes its bisection instead of starting another.
            existing = self.store.by_origin_key(work.key)
            if existing is None and (
                refusal := self._start_refusal(forge, policy, work)
                or off_branch(repo, work.good, bad, f"origin/{policy.default_branch}")
                or too_long(repo, work.good, bad, policy, work.test)
            ):
                raise RevertBisectError(refusal)
            loaded = (
                setup.load(self.store, existing.id, self.clones.open)
                if existing
                else setup.create(self.store, repo, work.good, bad, config, work.origin(), work.key, work.ci)
            )
        except RevertBisectError as exc:
            if work.thread:
                forge.comment_once(work.thread, f"refused-{work.comment_id}", f"I cannot start that bisection: {exc}")
            log.warning("bisection of %s %s..%s refused: %s", work.repo, work.good, bad, exc)
            return
        with bind(bisection_id=loaded.id):  # every log line of this bisection carries its id
            self._drive(forge, policy, test, repo, loaded, work)

    def _drive(self, forge: Forge, policy: Policy, test, repo: Git, loaded, work: StartRequest) -> None:
        key, shown = f"status-{loaded.id}", [None]

        def say(text: str) -> None:  # the status comment, edited only when its text changes (GitHub's rate limit)
            if work.thread and text != shown[0]:
                forge.comment_once(work.thread, key, text)
                shown[0] = text

        say(render_status(work.test, loaded.problem, None, None))
        last = [0.0]

        def observe(snap: Snapshot) -> None:
            if time.monotonic() - last[0] >= STATUS_EVERY_S:
                last[0] = time.monotonic()
                say(render_status(work.test, loaded.problem, snap, None))

        if not loaded.row.status:
            backend = self.backends(
                test, loaded.config.workers, repo, forge, self.clone_url(work.repo), policy.default_branch, loaded.id
            )
            Driver(
                self.store,
                loaded.id,
                loaded.problem,
                loaded.config,
                backend,
                observe,
                self.clones.reverter(repo),
                cancelled=lambda: self.store.cancel_requested(loaded.id),
            ).run()
        row = self.store.get(loaded.id)
        outcome = row.outcome or {}
        link = None
        found = (
            self._reverted_on_branch(work, policy, outcome["culprit"])
            if row.status == Status.FOUND.value and not work.dry_run
            else None
        )
        if found or (row.status == Status.FOUND.value and (outcome.get("ab") or {}).get("passed") and not work.dry_run):
            link = self._publish(forge, policy, repo, loaded, row, work, found)
            row = self.store.get(loaded.id)  # with what publishing recorded (notes: a reviewer GitHub refused)
        say(render_status(work.test, loaded.problem, None, row, link))
        log.info("bisection #%s of %s: %s %s", row.id, work.repo, row.status, link or "")
        # rocket: the revert PR is open; confused: the bisection ended without one (the status comment says why).
        if work.comment_id and not work.dry_run:
            forge.react(work.thread, work.comment_id, "rocket" if link and link.startswith("#") else "confused")

    def _kill_switch(self, forge: Forge, policy: Policy) -> int | None:
        """Read once per decision (the start, the revert): it may be turned on while a bisection runs."""
        return forge.kill_switch(
            policy.revert.kill_switch_label, policy.revert.kill_switch_roles, policy.commands.allow_users
        )

    def _start_refusal(self, forge: Forge, policy: Policy, work: StartRequest) -> str | None:
        kill = self._kill_switch(forge, policy)
        if kill is not None:  # said on the kill-switch issue too: a nightly's refusal has no thread to answer in
            hold(forge, self.holds, policy, kill, held_start(forge, work.origin(), work.key, kill))
        return start_refusal(policy, kill, policy.default_branch)

    def _reverted_on_branch(self, work: StartRequest, policy: Policy, culprit: str) -> RevertFound | None:
        """The culprit's revert on the branch, merged before the bisection or while it ran (so fetched again)."""
        with self._lock:
            repo = self._sync(work.repo)
        return self.clones.find_revert(repo, culprit, f"origin/{policy.default_branch}", policy.default_branch)

    def _publish(
        self,
        forge: Forge,
        policy: Policy,
        repo: Git,
        loaded,
        row,
        work: StartRequest,
        found: RevertFound | None = None,
    ) -> str | None:
        """The guards' decision on the culprit, recorded; the publisher writes what it decided."""
        if policy.mode == "shadow":  # everything but writes to GitHub: no branch, PR, issue or comment elsewhere
            return "not opened (shadow mode)"
        culprit = row.outcome["culprit"]
        subject = repo.subjects([culprit])[culprit]
        facts = forge.culprit_facts(culprit, pr_number(subject))
        publisher = Publisher(
            forge,
            policy,
            work.repo,
            repo,
            self.clone_url(work.repo),
            self.token(work.repo),
            row.id,
            work.test,
            self.clones,
        )
        ab = row.outcome.get("ab") or {}
        evidence = (
            f"HEAD fails, HEAD + revert passes ({len(ab.get('head_verdicts', []))} runs each); "
            f"P={row.outcome.get('confidence', 0):.3f}"
        )
        record = dict(culprit_pr=facts.pr, culprit_subject=subject)  # for the dashboard and the trust report
        if found:  # nothing to open, so nothing to refuse: that revert's PR gets the evidence instead
            proof = evidence if ab.get("passed") else f"P={row.outcome.get('confidence', 0):.3f}"  # no A/B: HEAD had it
            published = publisher.confirm(found, proof, facts)
            self._record(row, **record, already_reverted=found.as_json(), evidence_on=published.evidence_on)
            log.info("bisection #%s: %s", row.id, found)
            return f"none opened: {found}"
        now = datetime.now(UTC)
        kill = self._kill_switch(forge, policy)
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
            self._record(row, **record, revert_refused=str(refusal), revert_refused_reason=refusal.key)
            if refusal.key == "kill_switch":
                hold(forge, self.holds, policy, kill, held_revert(forge, work.repo, row.id, culprit, facts.pr, kill))
            publisher.refused(facts, evidence, refusal)
            log.warning("bisection #%s: no revert PR for %s: %s", row.id, culprit[:12], refusal)
            return f"not opened: {refusal}"
        published, pr, followup = publisher.revert(row, loaded.problem, culprit, facts, evidence, work.followup)
        self._record(
            row,
            **record,
            pr_body=pr.body,
            branch=published.branch,
            revert_pr=published.pr_number,
            revert_pr_url=published.pr_url,
            followup=followup,
            evidence_on=published.evidence_on,
            notes=list(published.notes),
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

    def _record(self, row, **extra) -> None:
        self.store.save_progress(row.id, outcome=(outcome_of(row) or BisectionOutcome()).with_facts(**extra).as_json())

    def status(self, repo: str, thread: int) -> str:
        rows = self.store.from_thread(repo, thread)
        if not rows:
            return "No bisection was started from this thread."
        return "\n".join(
            f"- #{r.id} `{(r.origin or {}).get('test')}` {r.good[:12]}..{r.bad[:12]}: {r.status or r.phase}"
            for r in rows
        )

    def cancel(self, repo: str, thread: int, by: str) -> str:
        """Flag every unfinished bisection of the thread; the process driving each stops within a second."""
        stopped = [
            r.id for r in self.store.from_thread(repo, thread) if not r.status and self.store.request_cancel(r.id, by)
        ]
        if not stopped:
            return "Nothing is running from this thread."
        return (
            "Cancelling "
            + ", ".join(f"#{i}" for i in stopped)
            + ": runs in flight are stopped and no revert will be opened."
        )
