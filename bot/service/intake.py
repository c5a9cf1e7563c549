"""What to bisect, and whether: a request (a `/revert-bisect` command, a red scheduled run) checked against the kill
switch, the watched branch and `bisect.max_commits`, with CI's readings of the test, and its bisection stored (or,
for a retried job, the one it already started loaded)."""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from bot.domain.errors import RevertBisectError
from bot.domain.guards import start_refusal
from bot.domain.policy import Policy, Test
from bot.domain.repo_policies import RepoPolicies
from bot.domain.requests import CiReading, Member, StartRequest
from bot.domain.scope import Scoped
from bot.domain.signals import Outcome
from bot.ports import Forge, Git
from bot.ports.store import BisectionStore, HoldLog
from bot.service import setup
from bot.service.config import bisect_config, group_config, measured_by
from bot.service.holds import held_start, hold, kill_switch
from bot.service.workspace import Workspace

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
    return (*readings, CiReading(scoped.bad, False, scoped.test.metric, bad_url, scoped.test.line))


def nightly_request(repo_slug: str, scoped: Scoped, site: str) -> StartRequest:
    """A red scheduled run's test over its range, with the test's readings in CI's runs from GOOD to BAD."""
    return StartRequest(
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
        ci=ci_readings(scoped, f"{site}/actions/runs/{scoped.bad_run}"),
        started=scoped.started,
        reproduced=scoped.reproduced,
    )


def nightly_group_request(repo_slug: str, group: Sequence[Scoped], site: str) -> StartRequest:
    """Several red tests of one scheduled run over the union of their ranges: GOOD the oldest of their GOODs (the
    earliest run one of them passed in), each test's own GOOD, cases and CI readings with it."""
    oldest = min(group, key=lambda s: s.good_run)
    url = f"{site}/actions/runs/{oldest.bad_run}"
    members = tuple(Member(s.test.test.id, s.good, s.test.cases, ci_readings(s, url)) for s in group)
    return replace(
        nightly_request(repo_slug, oldest, site), test=group[0].test.test.id, cases=(), ci=(), members=members
    )


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


@dataclass(frozen=True)
class Admitted:
    """A request let in, and its bisection as stored: what driving and concluding it work from."""

    work: StartRequest
    policy: Policy
    test: Test
    repo: Git
    loaded: setup.Loaded


class Intake:
    def __init__(
        self, store: BisectionStore, holds: HoldLog, workspace: Workspace, policies: Mapping[str, RepoPolicies]
    ) -> None:
        self.store = store
        self.holds = holds
        self.workspace = workspace
        self.policies = policies

    def admit(self, forge: Forge, work: StartRequest) -> Admitted | None:
        """The request's bisection, stored (or loaded: a retried job resumes it instead of starting another); None
        when it is refused, said in its thread (if any) and the log. The test's own policy (the one of the
        repository's policies that declares it) decides."""
        policy = self.policies[work.repo].for_test(work.test)
        test = policy.test(work.test) if policy is not None else None
        if policy is None or test is None:  # the policies changed between the request and now
            why = f"no policy of {work.repo} declares the test `{work.test}` (any more)"
            if work.thread:
                forge.comment_once(work.thread, f"refused-{work.comment_id}", f"I cannot start that bisection: {why}")
            log.warning("bisection of %s %s refused: %s", work.repo, work.test, why)
            return None
        repo = self.workspace.sync(work.repo)
        bad = work.bad or f"origin/{policy.default_branch}"
        try:
            # the transplanted test file is BAD's: a commit id every runner's clone has, not a moving ref
            bad_sha = repo.resolve(bad, "BAD") if test.probe.missing == "transplant" else None
            if work.members:  # several red tests, one search: each step runs those it carries
                members = [(policy.test(m.test), m.cases) for m in work.members]
                if any(t.probe.missing == "transplant" for t, _ in members):
                    bad_sha = repo.resolve(bad, "BAD")
                config = group_config(policy, members, bad, work.dry_run, bad_sha)
            else:
                config = bisect_config(policy, test, bad, work.dry_run, work.cases, bad_sha)
            config = replace(measured_by(config, work.metrics, work.onto), trust_endpoints=work.reproduced)
            existing = self.store.by_origin_key(work.key)
            if existing is None and (
                refusal := self._start_refusal(forge, policy, work)
                or off_branch(repo, work.good, bad, f"origin/{policy.default_branch}")
                or too_long(repo, work.good, bad, policy, work.test)
            ):
                raise RevertBisectError(refusal)
            loaded = (
                setup.load(self.store, existing.id, self.workspace.clones.open)
                if existing
                else setup.create(
                    self.store,
                    repo,
                    work.good,
                    bad,
                    config,
                    work.origin(),
                    work.key,
                    work.ci,
                    members=work.group,
                    test=work.test,
                )
            )
        except RevertBisectError as exc:
            if work.thread:
                forge.comment_once(work.thread, f"refused-{work.comment_id}", f"I cannot start that bisection: {exc}")
            log.warning("bisection of %s %s..%s refused: %s", work.repo, work.good, bad, exc)
            return None
        return Admitted(work, policy, test, repo, loaded)

    def _start_refusal(self, forge: Forge, policy: Policy, work: StartRequest) -> str | None:
        kill = kill_switch(forge, policy)
        if kill is not None:  # said on the kill-switch issue too: a nightly's refusal has no thread to answer in
            hold(forge, self.holds, policy, kill, held_start(forge, work.origin(), work.key, kill))
        return start_refusal(policy, kill, policy.default_branch)
