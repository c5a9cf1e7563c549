"""A run is read once per delivery (bot.ingress.jobs.nightly over bot.service.run_reading): the red attempt read
during the grace period is not read again to scope it, and two red tests' histories share the earlier runs they
read. On tests/unit/test_nightly_job.py's fake forge, which counts every jobs list and every log download."""

from __future__ import annotations

from collections import Counter
from datetime import timedelta

from bot.adapters.store.deliveries import ClaimedJob
from bot.domain.repo_policies import RepoPolicies
from bot.ingress.jobs.nightly import NightlyJob
from tests.support.suite_logs import File
from tests.unit.test_nightly_job import GLM, MTP, POLICY, REPO, T0, Bisections, FakeForge, Flakes, history, kl, sha

TWO = POLICY.model_copy(
    update={
        "tests": [
            *POLICY.tests,
            POLICY.tests[0].model_copy(update={"id": "mtp", "match": r"(?:^|/)test_qwen3_next_models_mtp\.py$"}),
        ]
    }
)


class Groups(Bisections):
    """Bisections as they start: one test alone, or several together (bot.domain.scope.together)."""

    def start_nightly_group(self, repo_slug, group, forge):
        for scoped in group:
            self.start_nightly(repo_slug, scoped, forge)


def deliver(forge, policy, id, at):
    bisections, flakes = Groups(), Flakes()
    job = NightlyJob({REPO: RepoPolicies.one(policy)}, lambda repo: forge, bisections, flakes, now=lambda: at)
    job(ClaimedJob(1, "nightly_failure", f"d-{id}", "workflow_run", forge.payload(id), 1))
    return bisections


def test_the_attempt_read_for_the_suite_runners_retry_is_not_read_again_to_scope_it():
    forge = FakeForge()
    history(forge)
    forge.add_run(40, 9, "failure", [[File(MTP, [True])], [File(GLM, [True])], [kl(0.0065, [False, False])]])
    bisections = deliver(forge, POLICY, 40, T0 + timedelta(minutes=1))  # well inside the grace: started at once
    [scoped] = bisections.started.values()
    assert scoped.reproduced and (scoped.good_run, scoped.bad_run) == (34, 40)
    assert forge.listed == [(40, None), (34, None)]  # the red run's jobs once, then its history's
    assert not [job for job, n in Counter(forge.downloaded).items() if n > 1]


def test_two_red_tests_histories_read_each_earlier_run_once():
    forge = FakeForge()
    history(forge)  # the MTP file passed in partitions 0 and 1 of runs 30..34 (partition 0 in 34)
    forge.add_run(40, 9, "failure", [[File(MTP, [False])], [File(GLM, [True])], [kl(0.0065)]])
    bisections = deliver(forge, TWO, 40, T0 + timedelta(hours=2))
    assert {s.test.test.id: (s.good, s.good_run) for s in bisections.started.values()} == {
        "qwen3-next-models": (sha(5), 34),
        "mtp": (sha(5), 34),
    }
    assert forge.listed == [(40, None), (34, None)]
    assert not [job for job, n in Counter(forge.downloaded).items() if n > 1]
