"""The nightly job on SGLang's CI as it really reports (bot.ingress.jobs.nightly): a red PR Test Base run read
from its final attempt, GOOD from the KL test's own history, flakes recorded and not bisected.

The forge is a fake of the Forge port holding runs, attempts, jobs and job logs in GitHub's shapes (jobs named
`<caller> / <called> (<partition>)`, logs in GitHub's format with run_suite's report); it counts every download, so
the tests assert what the job did not fetch too."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.adapters.policy_files import load
from bot.adapters.store.deliveries import ClaimedJob
from bot.domain.patience import NotYet
from bot.domain.repo_policies import RepoPolicies
from bot.domain.requests import StartRequest
from bot.domain.scope import RunInfo, Scoped
from bot.domain.signals import Flake, JobInfo
from bot.ingress.jobs.nightly import NightlyJob
from tests.support.suite_logs import KL_TEST, File, kl_output, partition_log

ROOT = Path(__file__).resolve().parents[2]
POLICY = load(ROOT / "policies" / "sglang.yaml")
REPO = "sgl-project/sglang"
PATH = ".github/workflows/pr-test.yml"
KL = "qwen3-next-models"
T0 = datetime(2026, 7, 17, 12, 0, tzinfo=UTC)
GRACE = timedelta(minutes=POLICY.watch[0].rerun_grace_minutes)
STAGE = "base-c-test-4-gpu-h100"
GLM = "test/registered/models_e2e/test_glm4_moe_models.py"
MTP = "test/registered/models_e2e/test_qwen3_next_models_mtp.py"


def sha(n: int) -> str:
    return f"{n:02d}" * 20


@dataclass
class FakeForge:
    runs: dict[int, RunInfo] = field(default_factory=dict)  # as they are now (their newest attempt)
    jobs: dict[tuple[int, int], list[JobInfo]] = field(default_factory=dict)  # (run, attempt) -> its jobs
    logs: dict[int, str | None] = field(default_factory=dict)
    downloaded: list[int] = field(default_factory=list)
    listed: list[tuple[int, int | None]] = field(default_factory=list)
    next_job: int = 1000

    site = f"https://github.com/{REPO}"
    slug = REPO

    def add_run(
        self, id, n, conclusion, partitions, *, event="schedule", head=REPO, attempt=1, updated=T0, other="success"
    ):
        """A PR Test Base run at sha(n): the KL test's partition job with `partitions[k]`'s files, and an unrelated
        job that concluded `other`."""
        run = RunInfo(
            id,
            "PR Test Base",
            PATH,
            "main",
            sha(n),
            event,
            conclusion,
            head,
            attempt,
            "completed",
            updated,
            f"https://github.com/{REPO}/actions/runs/{id}",
        )
        self.runs[id] = run
        jobs = []
        for k, files in enumerate(partitions):
            if files is None:  # the stage was skipped (e.g. an upstream job failed)
                jobs.append(self._job(f"{STAGE} / {STAGE} ({k})", "skipped", attempt, None))
                continue
            ok = all(f.attempts[-1] for f in files)
            jobs.append(
                self._job(f"{STAGE} / {STAGE} ({k})", "success" if ok else "failure", attempt, partition_log(files, k))
            )
        jobs.append(
            self._job(
                "base-b-test-1-gpu-small / base-b-test-1-gpu-small (0)",
                other,
                attempt,
                partition_log([File(GLM, [other == "success"])]),
            )
        )
        self.jobs[(id, attempt)] = jobs
        return run

    def rerun(self, id, attempt, status="completed", conclusion=None, partitions=None, updated=None):
        """A re-run of the failed jobs: attempt `attempt`; the jobs that passed before are not run again."""
        before = self.runs[id]
        self.runs[id] = replace(
            before, run_attempt=attempt, status=status, conclusion=conclusion, updated_at=updated or before.updated_at
        )
        if partitions is not None:
            newest = {j.name: j for j in self.jobs[(id, attempt - 1)]}
            for k, files in enumerate(partitions):
                if files is not None:
                    ok = all(f.attempts[-1] for f in files)
                    name = f"{STAGE} / {STAGE} ({k})"
                    newest[name] = self._job(name, "success" if ok else "failure", attempt, partition_log(files, k))
            self.jobs[(id, attempt)] = list(newest.values())

    def _job(self, name, conclusion, attempt, log):
        self.next_job += 1
        self.logs[self.next_job] = log
        return JobInfo(self.next_job, name, "completed", conclusion, attempt)

    def payload(self, id, attempt=1, conclusion="failure"):
        run = self.runs[id]
        return {
            "action": "completed",
            "repository": {"full_name": REPO},
            "workflow_run": {
                "id": id,
                "name": run.workflow_name,
                "path": PATH,
                "head_branch": "main",
                "head_sha": run.head_sha,
                "event": run.event,
                "conclusion": conclusion,
                "status": "completed",
                "workflow_id": 77,
                "run_attempt": attempt,
                "updated_at": run.updated_at.isoformat().replace("+00:00", "Z"),
                "head_repository": {"full_name": run.head_repository},
                "html_url": run.url,
            },
        }

    # -- the Forge port --

    def workflow_runs(self, workflow, branch, events, limit):
        assert workflow == 77
        found = [
            r for r in self.runs.values() if r.head_branch == branch and r.event in events and r.status == "completed"
        ]
        return sorted(found, key=lambda r: r.id, reverse=True)[:limit]

    def run(self, run_id):
        return self.runs[run_id]

    def run_attempt(self, run_id, attempt):
        raise AssertionError("not used")

    def run_jobs(self, run_id, attempt=None):
        self.listed.append((run_id, attempt))
        return self.jobs[(run_id, attempt or self.runs[run_id].run_attempt)]

    def job_log(self, job_id):
        self.downloaded.append(job_id)
        return self.logs[job_id]

    def run_artifact(self, run_id, name):
        return {}

    def job(self, run_id, name_end, attempt=None):
        return next(
            j for j in self.jobs[(run_id, attempt or self.runs[run_id].run_attempt)] if j.name.endswith(name_end)
        )


class Bisections:
    def __init__(self):
        self.started: dict[str, Scoped] = {}
        self.calls = 0

    def start_nightly(self, repo_slug, scoped, forge):  # one bisection per range, as bot.service.bisections does
        self.calls += 1
        key = StartRequest(
            repo_slug, None, None, None, scoped.test.test.id, scoped.good, scoped.bad, None, False, run=scoped.bad_run
        ).key
        self.started.setdefault(key, scoped)


class Flakes:
    def __init__(self):
        self.seen: dict[tuple, Flake] = {}

    def record(self, flake):
        key = (flake.repository, flake.test, flake.run_id)
        if key in self.seen:
            return False
        self.seen[key] = flake
        return True


def deliver(forge, id, at, attempt=1, bisections=None, flakes=None, conclusion="failure"):
    bisections, flakes = bisections or Bisections(), flakes or Flakes()
    job = NightlyJob({REPO: RepoPolicies.one(POLICY)}, lambda repo: forge, bisections, flakes, now=lambda: at)
    payload = forge.payload(id, attempt, conclusion)
    job(ClaimedJob(1, "nightly_failure", f"d-{id}-{attempt}", "workflow_run", payload, 1))
    return bisections, flakes


def kl(value, attempts=None):
    return File(KL_TEST, attempts or [value <= 0.002], kl_output(value))


def history(forge):
    """Runs 30..34 of PR Test Base, none green as a whole (the unrelated job fails in each): the KL test passed in
    run 31 (partition 2), failed in 32, its stage was skipped in 33, and in 34 it ran in partition 1 and passed."""
    forge.add_run(30, 1, "failure", [[File(GLM, [True])], [File(MTP, [True])], [kl(0.0004)]], other="failure")
    forge.add_run(31, 2, "failure", [[File(MTP, [True])], [File(GLM, [True])], [kl(0.0005)]], other="failure")
    forge.add_run(32, 3, "failure", [[File(MTP, [True])], [File(GLM, [True])], [kl(0.0061)]])
    forge.add_run(33, 4, "failure", [None, None, None], other="failure")
    forge.add_run(34, 5, "failure", [[File(MTP, [True])], [kl(0.0004)], [File(GLM, [True])]], other="failure")


def red(forge, attempts=None, id=40, n=9):
    return forge.add_run(id, n, "failure", [[File(MTP, [True])], [File(GLM, [True])], [kl(0.0065, attempts)]])


def test_good_is_the_newest_run_the_test_passed_in_no_run_ever_green_and_only_its_jobs_are_read():
    forge = FakeForge()
    history(forge)
    red(forge)
    bisections, _ = deliver(forge, 40, T0 + GRACE + timedelta(seconds=1))
    [scoped] = bisections.started.values()
    assert (scoped.good, scoped.bad, scoped.good_run, scoped.bad_run) == (sha(5), sha(9), 34, 40)
    assert scoped.test.metric == 0.0065 and scoped.history == ()
    # read: the red run's failed KL job; in run 34, partition (2) first (where the test failed on the red run),
    # which did not run it there, then the others in order until the one that did; never the red run's green jobs,
    # the unrelated job, or any run older than GOOD
    assert forge.downloaded == [
        forge.job(40, "(2)").id,
        forge.job(34, "(2)").id,
        forge.job(34, "(0)").id,
        forge.job(34, "(1)").id,
    ]
    assert forge.listed == [(40, None), (34, None)]
    assert not any(forge.runs[r].run_attempt > 1 for r in forge.runs)


def test_a_skipped_stage_gives_no_signal_and_the_walk_goes_on_to_the_last_pass():
    forge = FakeForge()
    history(forge)
    del forge.runs[34]
    red(forge)
    bisections, _ = deliver(forge, 40, T0 + GRACE + timedelta(seconds=1))
    [scoped] = bisections.started.values()
    assert (scoped.good_run, scoped.good) == (31, sha(2))
    # run 33 (skipped: no signal, nothing downloaded) and run 32 (failed, with its reading) lie inside the range
    assert [(s.run_id, s.outcome.value, s.metric) for s in scoped.history] == [
        (33, "no signal", None),
        (32, "failed", 0.0061),
    ]
    assert "was skipped" in scoped.history[0].why
    assert not {j.id for j in forge.jobs[(33, 1)]} & set(forge.downloaded)


def test_a_forks_main_is_neither_the_red_run_nor_history():
    forge = FakeForge()
    history(forge)
    # a fork's pull request from its own branch `main`: head_branch main, event pull_request; and a fork run of
    # the scheduled event would not count either
    forge.add_run(35, 6, "success", [[kl(0.0004)], [], []], event="pull_request", head="someone/sglang")
    forge.add_run(36, 7, "success", [[kl(0.0004)], [], []], head="someone/sglang")
    forge.add_run(37, 8, "failure", [[kl(0.0065)], [], []], head="someone/sglang")
    bisections, _ = deliver(forge, 37, T0 + GRACE + timedelta(seconds=1))
    assert not bisections.calls and not forge.downloaded and not forge.listed  # not even an API call
    red(forge)
    bisections, _ = deliver(forge, 40, T0 + GRACE + timedelta(seconds=1))
    [scoped] = bisections.started.values()
    assert scoped.good_run == 34  # not the fork's green 36, nor the fork PR's 35
    assert not {j.id for r in (35, 36, 37) for j in forge.jobs[(r, 1)]} & set(forge.downloaded)


def test_the_job_waits_the_grace_period_and_a_rerun_in_flight_before_scoping():
    forge = FakeForge()
    history(forge)
    red(forge)
    with pytest.raises(NotYet) as wait:
        deliver(forge, 40, T0 + timedelta(minutes=10))
    assert wait.value.after_s == pytest.approx((GRACE - timedelta(minutes=10)).total_seconds())
    # one read of the red attempt during the grace period (its jobs, their logs): had the suite runner's own retry
    # failed the test again it would start now; it did not, so it waits, and reads nothing more until the grace ends
    assert forge.listed == [(40, None)] and forge.downloaded
    forge.listed.clear()
    forge.downloaded.clear()
    forge.rerun(40, 2, status="in_progress")
    with pytest.raises(NotYet, match="attempt 2 is in_progress"):
        deliver(forge, 40, T0 + GRACE + timedelta(minutes=1))
    assert not forge.downloaded


def test_a_rerun_attempt_that_passes_is_a_flake_not_bisected():
    forge = FakeForge()
    history(forge)
    red(forge)
    done = T0 + timedelta(minutes=50)
    forge.rerun(40, 2, conclusion="success", partitions=[None, None, [kl(0.0009)]], updated=done)
    with pytest.raises(NotYet):  # the re-run completed 10 minutes ago: a re-run of the re-run may come
        deliver(forge, 40, done + timedelta(minutes=10))
    bisections, flakes = deliver(forge, 40, done + GRACE + timedelta(seconds=1))
    assert not bisections.calls
    [flake] = flakes.seen.values()
    assert (flake.test, flake.run_id, flake.sha) == (KL, 40, sha(9))
    assert flake.how == "failed, then passed on re-run attempt 2"
    # the webhook of the re-run's completion, when it comes, records nothing twice and bisects nothing
    again, _ = deliver(forge, 40, done + GRACE + timedelta(minutes=5), 2, flakes=flakes, conclusion="success")
    assert not again.calls and len(flakes.seen) == 1
    # ... and alone (the first attempt's job was lost, or the grace period was too short), it records the flake
    alone, flakes = deliver(forge, 40, done + GRACE + timedelta(minutes=5), 2, conclusion="success")
    assert not alone.calls and [f.how for f in flakes.seen.values()] == ["failed, then passed on re-run attempt 2"]
    # a run green at its first attempt costs no API call
    forge.listed.clear()
    forge.add_run(41, 10, "success", [[], [], [kl(0.0004)]])
    deliver(forge, 41, T0 + GRACE, conclusion="success")
    assert not forge.listed


def test_a_rerun_attempt_that_fails_again_is_bisected_once():
    forge = FakeForge()
    history(forge)
    red(forge)
    done = T0 + timedelta(minutes=50)
    forge.rerun(40, 2, conclusion="failure", partitions=[None, None, [kl(0.0066)]], updated=done)
    bisections, flakes = deliver(forge, 40, done + GRACE + timedelta(seconds=1))
    deliver(forge, 40, done + GRACE + timedelta(minutes=2), attempt=2, bisections=bisections, flakes=flakes)
    assert len(bisections.started) == 1 and not flakes.seen
    [scoped] = bisections.started.values()
    assert (scoped.good_run, scoped.bad_run) == (34, 40)
    assert scoped.test.metric == 0.0066  # the final attempt's reading, not the first's
    assert forge.job(40, "(2)", attempt=2).id in forge.downloaded
    assert forge.job(40, "(2)", attempt=1).id in forge.downloaded  # what failed before, read once for flakes


def test_a_pass_on_the_suite_runners_own_retry_is_a_flake_not_bisected():
    forge = FakeForge()
    history(forge)
    # the KL test failed once and passed on run_suite's retry; another file of its partition failed
    forge.add_run(
        40, 9, "failure", [[File(MTP, [True])], [File(GLM, [True])], [kl(0.0031, [False, True]), File(MTP, [False])]]
    )
    bisections, flakes = deliver(forge, 40, T0 + GRACE + timedelta(seconds=1))
    assert not bisections.calls
    [flake] = flakes.seen.values()
    assert flake.test == KL and flake.how == "passed on the suite runner's own retry"
    assert flake.url.endswith("/actions/runs/40")
