"""Scoping a red scheduled run: which watched tests failed, with which metric, over which commit range.

Pure: the caller fetches the run, its log (or results) and, per failed test, the signals of the workflow's earlier
runs (bot.domain.signals); what the red run's log says of each test is read by bot.domain.ci_results; this module
decides. GOOD is the newest earlier run in which the test ran and passed, not a run that succeeded as a whole. A
failure it cannot scope says why, so it is reported instead of dropped.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime

from bot.domain.ci_results import FailedTest, Results, as_results, failed_tests
from bot.domain.policy import Policy, Watch
from bot.domain.signals import Outcome, Signal, good


@dataclass(frozen=True)
class RunInfo:
    id: int
    workflow_name: str
    workflow_path: str
    head_branch: str
    head_sha: str
    event: str
    conclusion: str | None
    head_repository: str | None = None  # owner/name the head commit came from (a fork's, for a fork's PR)
    run_attempt: int = 1  # the newest attempt: a re-run of failed jobs is a new attempt of the same run id
    status: str = "completed"
    updated_at: datetime | None = None  # when the newest attempt last changed (its completion, once completed)
    url: str = ""  # the run's page
    # when the run was created (its trigger fired; GitHub's `created_at`): a re-run attempt keeps it, unlike
    # `run_started_at`, which "resets on re-run" -- a benchmark's series is ordered by it
    created_at: datetime | None = None


def _when(value: object) -> datetime | None:
    try:
        return datetime.fromisoformat(value.replace("Z", "+00:00")) if isinstance(value, str) else None
    except ValueError:
        return None


def run_info(data: dict) -> RunInfo:
    """A workflow run (or one attempt of it) as GitHub's REST API and the workflow_run webhook write it."""
    return RunInfo(
        data["id"],
        data.get("name") or "",
        data.get("path") or "",
        data.get("head_branch") or "",
        data["head_sha"],
        data.get("event") or "",
        data.get("conclusion"),
        head_repository=(data.get("head_repository") or {}).get("full_name"),
        run_attempt=int(data.get("run_attempt") or 1),
        status=data.get("status") or "completed",
        updated_at=_when(data.get("updated_at")),
        url=data.get("html_url") or "",
        created_at=_when(data.get("created_at")),
    )


@dataclass(frozen=True)
class Scoped:
    test: FailedTest
    good: str
    bad: str
    good_run: int
    bad_run: int
    # the test's signals in the runs after GOOD and before BAD, newest first: CI's own evidence inside the range
    history: tuple[Signal, ...] = ()
    good_signal: Signal | None = None  # GOOD's own reading (its metric when printed); BAD's is `test.metric`
    started: str = ""  # why it starts now: what reproduced the failure, or the re-run grace it waited out
    reproduced: bool = False  # a re-run attempt or the suite runner's retry failed it again: CI's endpoints stand


@dataclass(frozen=True)
class Unscoped:
    reason: str


def from_repository(policy: Policy, run: RunInfo) -> bool:
    """The run's head commit comes from the policy's repository itself, not a fork (GitHub's names ignore case)."""
    return (run.head_repository or "").lower() == policy.repository.lower()


def _same_workflow(watch: Watch, run: RunInfo) -> bool:
    """By path (`.github/workflows/pr-test.yml`, or the file's name), or by the workflow's name."""
    wanted = watch.workflow.strip()
    return wanted in (run.workflow_path, run.workflow_name) or (
        "/" not in wanted and run.workflow_path.endswith("/" + wanted)
    )


def watched(policy: Policy, run: RunInfo) -> Watch | None:
    """The policy's watch entry for this run, if the run is one the policy cares about: the watched workflow, one
    of its events, on its branch, from this repository (a fork's PR from its own `main` is not the nightly)."""
    for watch in policy.watch:
        if (
            _same_workflow(watch, run)
            and run.head_branch == watch.branch
            and run.event in watch.events
            and from_repository(policy, run)
        ):
            return watch
    return None


def unwatched(policy: Policy, run: RunInfo) -> str:
    """Why `watched` said no, in words."""
    where = f"run {run.id} ({run.workflow_path or run.workflow_name} on {run.head_branch}, {run.event}"
    if not from_repository(policy, run) and any(_same_workflow(w, run) for w in policy.watch):
        return f"{where}, from {run.head_repository or 'an unknown repository'}) is not from {policy.repository}"
    return f"{where}) is not watched by the policy"


def earlier_runs(policy: Policy, watch: Watch, red: RunInfo, runs: Sequence[RunInfo]) -> list[RunInfo]:
    """The runs (newest first) whose signals may name GOOD: earlier, completed runs of the same watch entry, on the
    red run's branch, from this repository; at most `watch.history` of them."""
    out = [
        r
        for r in runs
        if r.id < red.id
        and r.status == "completed"
        and r.head_branch == red.head_branch
        and watched(policy, r) is watch
    ]
    return out[: watch.history]


def _summary(policy: Policy, results: Results | str) -> re.Match | None:
    log = as_results(results).log
    matches = list(re.finditer(policy.results.log.summary, log)) if policy.results.log.summary else []
    return matches[-1] if matches else None


def died_before_summary(policy: Policy, run: RunInfo, results: Results | str) -> str | None:
    """A red run whose log (JUnit aside) lacks the `results.log.summary` line never finished its suite: the job
    died (runner lost, OOM, setup step, timeout), which is reported as such, not scoped as a test failure."""
    results = as_results(results)
    if not policy.results.log.summary or results.junit or _summary(policy, results):
        return None
    return (
        f"run {run.id} failed before its test summary (no line matches `results.log.summary`): the job died, "
        "it did not report a test failure; nothing to bisect"
    )


def suite_tally(policy: Policy, results: Results | str) -> str:
    """` (the suite ran: N of M tests failed)`, from the summary line's `passed` and `total`, when it has them."""
    found = _summary(policy, results)
    groups = found.groupdict() if found else {}
    if not (groups.get("passed") or "").isdigit() or not (groups.get("total") or "").isdigit():
        return ""
    return f" (the suite ran: {int(groups['total']) - int(groups['passed'])} of {groups['total']} tests failed)"


def failures(policy: Policy, run: RunInfo, results: Results | str) -> list[FailedTest] | Unscoped:
    """The watched tests this red run failed, or why there is nothing to bisect in it."""
    if run.conclusion != "failure":
        return Unscoped(f"run {run.id} concluded {run.conclusion}: nothing to bisect")
    results = as_results(results)  # the log's GitHub decorations taken off, once
    if watched(policy, run) is None:
        return Unscoped(unwatched(policy, run))
    if died := died_before_summary(policy, run, results):
        return Unscoped(died)
    found = failed_tests(policy, results)
    if not found:
        return Unscoped(
            f"run {run.id} failed{suite_tally(policy, results)}, but its log names none of the watched tests "
            f"({', '.join(t.id for t in policy.tests)})"
        )
    return found


def _tally(signals: Sequence[Signal]) -> str:
    counts = {o: sum(s.outcome is o for s in signals) for o in Outcome}
    return ", ".join(f"{n} {o}" for o, n in counts.items() if n) or "none"


def ranged(run: RunInfo, failure: FailedTest, signals: Sequence[Signal]) -> Scoped | Unscoped:
    """GOOD..BAD for one failed test, from its signals in the earlier runs read (newest first)."""
    green = good([s for s in signals if s.run_id < run.id])
    test = failure.test.id
    if green is None:
        return Unscoped(
            f"run {run.id} failed {test}, but none of the {len(signals)} earlier run(s) read shows it run and "
            f"passed ({_tally(signals)}): start one by hand with `/revert-bisect {test} good=<sha>`"
        )
    if green.sha == run.head_sha:
        return Unscoped(
            f"run {run.id} failed {test} on {run.head_sha[:12]}, where run {green.run_id} passed it: "
            "a flake, not a regression"
        )
    between = tuple(s for s in signals if green.run_id < s.run_id < run.id)
    return Scoped(failure, green.sha, run.head_sha, green.run_id, run.id, between, green)


def scope(
    policy: Policy, run: RunInfo, results: Results | str, history: Mapping[str, Sequence[Signal]]
) -> list[Scoped] | Unscoped:
    """Every failed test with its range; `history`: test id -> its signals in the earlier runs, newest first.
    Unscoped (the reasons, joined) when no failed test could be scoped."""
    found = failures(policy, run, results)
    if isinstance(found, Unscoped):
        return found
    out = [ranged(run, f, history.get(f.test.id, ())) for f in found]
    scoped = [r for r in out if isinstance(r, Scoped)]
    return scoped or Unscoped("; ".join(r.reason for r in out if isinstance(r, Unscoped)))


def together(policy: Policy, scoped: Sequence[Scoped]) -> list[list[Scoped]]:
    """The red tests of one run, as bisections: those that run the repository's own test (probe unittest or pytest)
    on the same `runner` are bisected together, `bisect.max_tests` at most in one; a command probe runs alone (a
    step cannot narrow or read a command per test). Their ranges all end at the run's head, so they overlap."""
    alone: list[list[Scoped]] = []
    by_runner: dict[str, list[Scoped]] = {}
    for s in scoped:
        test = s.test.test
        if test.probe.name in ("unittest", "pytest"):
            by_runner.setdefault(test.runner.model_dump_json(), []).append(s)
        else:
            alone.append([s])
    cap = policy.bisect.max_tests
    groups = [members[i : i + cap] for members in by_runner.values() for i in range(0, len(members), cap)]
    return groups + alone
