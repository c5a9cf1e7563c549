"""Running requested bisections on this machine (the local pool) for repositories on the forge.

The repository is cloned (then fetched) from the forge with the token in a per-command header;
the bisection is stored with where it was asked for, its status comment is edited as it goes,
and a proven revert is published through the forge.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

from bot.domain.bisect.model import Status
from bot.domain.errors import RepoError, RevertBisectError
from bot.service.backends import backend_for
from bot.domain.guards import Culprit, Repository, revert_refusal, start_refusal
from bot.domain.outcome import BisectionOutcome, outcome_of
from bot.service.holds import held_revert, held_start, hold
from bot.service.publish import publish
from bot.service.status import render_status
from bot.adapters.github.forge import ForgeError, GitHubForge
from bot.adapters.git.repo import GitRepo, sync_clone
from bot.domain.requests import StartRequest
from bot.domain.scope import Scoped
from bot.observability import bind
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.driver import Driver, Snapshot
from bot.service.probe import probe_argv
from bot.domain.policy import Direction, Policy, RevertAction, Test
from bot.adapters.git.already import RevertFound, find_revert
from bot.service.draft import PrRecord, draft
from bot.adapters.git.revert import create_revert, reverter_for
from bot.domain.subjects import pr_number
from bot.service.pr_body import FailingTest
from bot.adapters.store.holds import Holds
from bot.adapters.store.store import Store

STATUS_EVERY_S = 5.0
REFUSED_COMMENT = (
    "revert-bisect bisected `{test}` to this PR ({evidence}) but opened no revert: {why}. "
    "The runs are in bisection #{id}; a maintainer can revert by hand."
)
log = logging.getLogger("revert_bisect.bisections")


@dataclass(frozen=True)
class _Work:
    """One bisection to run and publish; `thread`/`comment_id` when a comment asked for it."""

    repo: str
    test: str
    good: str
    bad: str | None
    origin: dict
    key: str  # one bisection per key: a retried job resumes it instead of starting another
    thread: int | None
    comment_id: int | None
    followup: int | None
    dry_run: bool


def off_branch(repo: GitRepo, good: str, bad: str, branch_ref: str) -> str | None:
    """Only commits reachable from the watched branch are ever checked out on a runner: never a fork's PR
    head or a side branch, whose code nobody with write access has merged."""
    for name, rev in (("good", good), ("bad", bad)):
        sha = repo.resolve(rev, name)
        if not repo.is_ancestor(sha, branch_ref):
            return f"{name}={rev} is not on {branch_ref.removeprefix('origin/')}: only commits merged there are bisected"
    return None


def too_long(repo: GitRepo, good: str, bad: str, policy: Policy, test_id: str) -> str | None:
    """`bisect.max_commits`, counted over the commits the search may blame: the first-parent chain, or every
    commit of the range with `bisect.first_parent: false` (a wrong GOOD years back must not start a huge search)."""
    limit = policy.bisect.max_commits
    count = int(repo.repo.git.rev_list("--count", *(["--first-parent"] if policy.bisect.first_parent else []), f"{good}..{bad}"))
    if count <= limit:
        return None
    return (f"the range has {count:,} commits, more than `bisect.max_commits` ({limit}): ask for a narrower range with "
            f"`/revert-bisect {test_id} good=<sha>` (a later good commit) or raise the key")


def bisect_config(policy: Policy, test: Test, bad: str, dry_run: bool) -> BisectConfig:
    """The bisection the policy asks for on this test."""
    return BisectConfig(
        command=tuple(probe_argv(test)), workers=test.runner.parallelism, timeout_s=test.runner.timeout_minutes * 60,
        metric_file=test.metric is not None, threshold=test.metric.threshold if test.metric else None,
        higher_is_worse=test.metric is None or test.metric.direction is Direction.HIGHER_IS_WORSE,
        confidence=policy.bisect.confidence, flake_rate=None if policy.bisect.flake_rate == "auto" else float(policy.bisect.flake_rate),
        # `first_parent: false` is the CLI's --all-commits: any commit may be the culprit, so merges are descended into.
        descend_merges=policy.bisect.descend_merges or not policy.bisect.first_parent,
        max_infra_per_commit=policy.bisect.max_infra_per_commit,
        verify_revert=not dry_run, onto=bad,
        env=None if test.runner.env is None else test.runner.env.model_dump(),  # runners.envs.EnvSpec's JSON
    )


class LocalBisections:
    def __init__(self, store: Store, workspace: Path, policies: Mapping[str, Policy], clone_url: Callable[[str], str], token: Callable[[str], str]):
        self.store = store
        self.holds = Holds(store.engine)
        self.workspace = workspace
        self.policies = policies
        self.clone_url = clone_url
        self.token = token
        self._lock = threading.Lock()

    # -- the repository, synced from the forge --

    def _sync(self, repo: str) -> GitRepo:
        target = self.workspace / repo.replace("/", "__")
        try:
            sync_clone(self.clone_url(repo), target, self.token(repo))
        except RepoError as exc:
            raise ForgeError(str(exc)) from exc
        return GitRepo(target)

    # -- Bisections protocol --

    def start(self, request: StartRequest, forge: GitHubForge) -> None:
        """A `/revert-bisect` request: reported in its thread (status comment, reactions)."""
        if not request.good:
            forge.comment_once(request.thread, f"need-good-{request.comment_id}",
                               f"To bisect `{request.test}` from here I need the last good commit: `/revert-bisect {request.test} good=<sha>`.")
            return
        origin = dict(repo=request.repo, thread=request.thread, comment_id=request.comment_id, requested_by=request.requested_by, test=request.test)
        self._run(forge, _Work(request.repo, request.test, request.good, request.bad, origin, f"{request.repo}#comment:{request.comment_id}",
                               request.thread, request.comment_id, request.followup, request.dry_run))

    def start_nightly(self, repo_slug: str, scoped: Scoped, forge: GitHubForge) -> None:
        """A red scheduled run: one bisection per (test, range), never two for the same range."""
        origin = dict(repo=repo_slug, test=scoped.test.test.id, good=scoped.good, bad=scoped.bad, run=scoped.bad_run)
        key = f"{repo_slug}@{scoped.test.test.id}:{scoped.good}..{scoped.bad}"
        self._run(forge, _Work(repo_slug, scoped.test.test.id, scoped.good, scoped.bad, origin, key, None, None, None, False))

    def _run(self, forge: GitHubForge, work: _Work) -> None:
        policy = self.policies[work.repo]
        test = policy.test(work.test)
        with self._lock:  # one clone/fetch at a time per workspace
            repo = self._sync(work.repo)
        bad = work.bad or f"origin/{policy.default_branch}"
        config = bisect_config(policy, test, bad, work.dry_run)
        try:
            # A retried job (a GitHub hiccup, a restarted bot) resumes its bisection instead of starting another.
            existing = self.store.by_origin_key(work.key)
            if existing is None and (refusal := self._start_refusal(forge, policy, work) or off_branch(repo, work.good, bad, f"origin/{policy.default_branch}")
                                     or too_long(repo, work.good, bad, policy, work.test)):
                raise RevertBisectError(refusal)
            loaded = setup.load(self.store, existing.id) if existing else setup.create(self.store, repo, work.good, bad, config, work.origin, work.key)
        except RevertBisectError as exc:
            if work.thread:
                forge.comment_once(work.thread, f"refused-{work.comment_id}", f"I cannot start that bisection: {exc}")
            log.warning("bisection of %s %s..%s refused: %s", work.repo, work.good, bad, exc)
            return
        with bind(bisection_id=loaded.id):  # every log line of this bisection carries its id
            self._drive(forge, policy, test, repo, loaded, work)

    def _drive(self, forge: GitHubForge, policy: Policy, test, repo: GitRepo, loaded, work: _Work) -> None:
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
            backend = backend_for(test, loaded.config, repo, forge, self.clone_url(work.repo), policy.default_branch, loaded.id)
            Driver(self.store, loaded.id, loaded.problem, loaded.config, backend, observe, reverter_for(repo),
                   cancelled=lambda: self.store.cancel_requested(loaded.id)).run()
        row = self.store.get(loaded.id)
        outcome = row.outcome or {}
        link = None
        found = self._reverted_on_branch(work, policy, outcome["culprit"]) if row.status == Status.FOUND.value and not work.dry_run else None
        if found or (row.status == Status.FOUND.value and (outcome.get("ab") or {}).get("passed") and not work.dry_run):
            link = self._publish(forge, policy, repo, loaded, row, work, found)
        say(render_status(work.test, loaded.problem, None, row, link))
        log.info("bisection #%s of %s: %s %s", row.id, work.repo, row.status, link or "")
        # rocket: the revert PR is open; confused: the bisection ended without one (the status comment says why).
        if work.comment_id and not work.dry_run:
            forge.react(work.thread, work.comment_id, "rocket" if link and link.startswith("#") else "confused")

    def _kill_switch(self, forge: GitHubForge, policy: Policy) -> int | None:
        return forge.kill_switch(policy.revert.kill_switch_label, ["admin", "maintain"], policy.commands.allow_users)

    def _start_refusal(self, forge: GitHubForge, policy: Policy, work: _Work) -> str | None:
        kill = self._kill_switch(forge, policy)
        if kill is not None:  # said on the kill-switch issue too: a nightly's refusal has no thread to answer in
            hold(forge, self.holds, policy, kill, held_start(forge, work.origin, work.key, kill))
        return start_refusal(policy, kill, policy.default_branch)

    def _reverted_on_branch(self, work: _Work, policy: Policy, culprit: str) -> RevertFound | None:
        """The culprit's revert on the branch, merged before the bisection or while it ran (so fetched again)."""
        with self._lock:
            repo = self._sync(work.repo)
        return find_revert(repo, culprit, f"origin/{policy.default_branch}", policy.default_branch)

    def _publish(self, forge, policy, repo, loaded, row, work: _Work, found: RevertFound | None = None) -> str | None:
        if policy.mode == "shadow":  # everything but writes to GitHub: no branch, PR, issue or comment elsewhere
            return "not opened (shadow mode)"
        culprit = row.outcome["culprit"]
        pulls = forge.pulls_for_commit(culprit)
        subject = repo.subjects([culprit])[culprit]
        culprit_pr = pulls[0] if pulls else pr_number(subject)
        pr_obj = forge.repo.get_pull(culprit_pr) if culprit_pr else None
        author = pr_obj.user.login if pr_obj else None
        ab = row.outcome.get("ab") or {}
        evidence = f"HEAD fails, HEAD + revert passes ({len(ab.get('head_verdicts', []))} runs each); P={row.outcome.get('confidence', 0):.3f}"
        record = dict(culprit_pr=culprit_pr, culprit_subject=subject)  # for the dashboard and the trust report
        if found:  # nothing to open, so nothing to refuse: that revert's PR gets the evidence instead
            proof = evidence if ab.get("passed") else f"P={row.outcome.get('confidence', 0):.3f}"  # no A/B: HEAD had it
            published = publish(forge, policy, repo.path, self.clone_url(work.repo), self.token(work.repo), None, None,
                                bisection_id=row.id, test_id=work.test, evidence=proof, culprit_pr=culprit_pr,
                                culprit_author=author, followup=None, already=found)
            self._record(row, **record, already_reverted=found.as_json(), evidence_on=published.evidence_on)
            log.info("bisection #%s: %s", row.id, found)
            return f"none opened: {found}"
        now = datetime.now(timezone.utc)
        kill = self._kill_switch(forge, policy)
        refusal = revert_refusal(
            policy,
            Culprit(subject, author, repo.repo.commit(culprit).committed_datetime, tuple(label.name for label in pr_obj.labels) if pr_obj else ()),
            Repository(policy.default_branch,
                       kill,
                       forge.reverts_opened_since(now.replace(hour=0, minute=0, second=0, microsecond=0))),
            now)
        if refusal:
            self._record(row, **record, revert_refused=str(refusal), revert_refused_reason=refusal.key)
            if refusal.key == "kill_switch":
                hold(forge, self.holds, policy, kill, held_revert(forge, work.repo, row.id, culprit, culprit_pr, kill))
            if culprit_pr:
                forge.comment_once(culprit_pr, f"culprit-{row.id}", REFUSED_COMMENT.format(test=work.test, evidence=evidence, why=refusal, id=row.id))
            log.warning("bisection #%s: no revert PR for %s: %s", row.id, culprit[:12], refusal)
            return f"not opened: {refusal}"
        comment_only = policy.revert.action is RevertAction.COMMENT_ONLY
        followup = work.followup or policy.followups.get(culprit_pr or -1) or (forge.followup_for(culprit_pr) if culprit_pr else None)
        if followup is None and culprit_pr and not comment_only:  # nowhere to track the proper fix yet: open the place
            followup, _ = forge.ensure_issue(
                f"tracking-{culprit_pr}", f"Fix the regression from #{culprit_pr} so it can be re-landed",
                f"revert-bisect bisected `{work.test}` to #{culprit_pr} and reverted it. This issue tracks the proper fix.")
        revert = create_revert(repo, culprit, row.head)
        test = policy.test(work.test)
        prs = {culprit: PrRecord(culprit_pr, pr_obj.title, author)} if pr_obj else {}
        pr = draft(row, loaded.problem, repo, revert, repo_slug=work.repo, branch=policy.default_branch,
                   test=FailingTest(work.test, test.metric.name if test.metric else None, test.metric.threshold if test.metric else None),
                   prs=prs, followups=[followup] if followup else [])
        published = publish(forge, policy, repo.path, self.clone_url(work.repo), self.token(work.repo), revert, pr,
                            bisection_id=row.id, test_id=work.test, evidence=evidence, culprit_pr=culprit_pr,
                            culprit_author=author, followup=followup)
        self._record(row, **record, pr_body=pr.body, branch=published.branch, revert_pr=published.pr_number,
                     revert_pr_url=published.pr_url, followup=followup, evidence_on=published.evidence_on)
        if comment_only and not published.existing_revert:
            where = f"#{published.evidence_on}" if published.evidence_on else f"bisection #{row.id} on the dashboard (the culprit has no PR)"
            return f"not opened (`revert.action: comment_only`): the evidence is on {where}"
        return f"#{published.pr_number}"

    def _record(self, row, **extra) -> None:
        self.store.save_progress(row.id, outcome=(outcome_of(row) or BisectionOutcome()).with_facts(**extra).as_json())

    def status(self, repo: str, thread: int) -> str:
        rows = self.store.from_thread(repo, thread)
        if not rows:
            return "No bisection was started from this thread."
        return "\n".join(f"- #{r.id} `{(r.origin or {}).get('test')}` {r.good[:12]}..{r.bad[:12]}: {r.status or r.phase}" for r in rows)

    def cancel(self, repo: str, thread: int, by: str) -> str:
        """Flag every unfinished bisection of the thread; the process driving each stops within a second."""
        stopped = [r.id for r in self.store.from_thread(repo, thread) if not r.status and self.store.request_cancel(r.id, by)]
        if not stopped:
            return "Nothing is running from this thread."
        return "Cancelling " + ", ".join(f"#{i}" for i in stopped) + ": runs in flight are stopped and no revert will be opened."
