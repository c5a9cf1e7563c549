"""bot.ports.Forge and bot.ports.CiReads as GitHubForge answers them, against the sandbox: plain values out (no
PyGithub object), and a job's log redirect asked through PyGithub's requester, so it is counted (and retried) like
every other GitHub call, and the signed URL it points at counted as a download."""

import sys

import pytest

from bot.adapters.github.forge import GitHubForge, connect
from bot.observability.github_api import STATS, install
from bot.ports import CulpritFacts
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build

LINE = "the step said: naïve"  # not ASCII: the log is decoded as UTF-8


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("ports")
    scenario = build(tmp / "scenario", commits=10, seed=2)
    state = SandboxState(tmp / "sandbox")
    seeded = seed_from_scenario(state, tmp / "scenario")
    state.bind_workflow(seeded.repo, "echo.yml", [sys.executable, "-c", f"print({LINE!r})"])
    base, stop = run_in_thread(state)
    install()  # as the app factory does, before the client is built
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    yield dict(scenario=scenario, state=state, seeded=seeded, forge=forge)
    stop()


def test_culprit_facts_are_the_linked_prs_as_plain_values(sandbox):
    forge, scenario = sandbox["forge"], sandbox["scenario"]
    pr = next(p for p in scenario.prs if p["number"] == scenario.culprit_pr)
    # GitHub's link wins over the number a subject names (99999: none such)
    facts = forge.culprit_facts(scenario.culprit, 99999)
    assert facts == CulpritFacts(scenario.culprit_pr, pr["title"], pr["author"], facts.labels)
    assert all(type(label) is str for label in facts.labels)
    assert (forge.slug, forge.site.endswith("/" + sandbox["seeded"].repo)) == (sandbox["seeded"].repo, True)


def test_a_jobs_log_is_fetched_through_the_counted_client(sandbox):
    forge, state = sandbox["forge"], sandbox["state"]
    run_id = state.start_run(sandbox["seeded"].repo, "echo.yml", "main", event="workflow_dispatch")
    assert state.actions.wait(run_id, 50).conclusion == "success"
    STATS.reset()
    [job] = forge.run_jobs(run_id)
    text = forge.job_log(job.id)
    assert text is not None and LINE in text
    assert not text.startswith("\ufeff") and text.splitlines()[0][:4].isdigit()  # the BOM taken off, once
    calls, _, _, _ = STATS.snapshot()
    # the run's jobs through the requester, and the job's log: GitHub's 302, asked of the requester and not
    # followed; the signed URL on the blob host fetched without PyGithub, counted as a download
    assert calls == {("GET", "2xx"): 1, ("GET", "3xx"): 1}
    assert STATS.downloads_snapshot() == {"2xx": 1}


def test_the_kill_switch_is_read_with_the_roles_the_policy_names():
    from bot.adapters.policy_files import parse
    from bot.service.holds import kill_switch

    policy = parse(
        """
repository: o/r
watch: [{workflow: nightly}]
tests: [{id: kl, match: kl, probe: {name: command, command: [./t.sh]}}]
revert: {kill_switch_label: stop-bot, kill_switch_roles: [admin]}
commands: {allow_users: [ann]}
""",
        "p.yaml",
    )

    class Forge:
        def kill_switch(self, *args):
            self.args = args
            return 7

    forge = Forge()
    assert kill_switch(forge, policy) == 7
    assert forge.args == ("stop-bot", ["admin"], ["ann"])
    assert parse(policy.model_dump_json(exclude={"revert"}), "p.json").revert.kill_switch_roles == ["admin", "maintain"]


def test_a_run_of_130_jobs_is_read_whole_across_pages(sandbox):
    """GitHub answers at most 100 jobs a page (`per_page`), the rest behind `Link: rel="next"`: SGLang's nightly
    has ~40 jobs, a re-run attempt's `filter=latest` more, a matrix of shards more still."""
    from dataclasses import replace

    forge, state = sandbox["forge"], sandbox["state"]
    run_id = state.start_run(sandbox["seeded"].repo, "echo.yml", "main", event="workflow_dispatch")
    run = state.actions.wait(run_id, 50)
    [first] = run.jobs
    run.jobs += [replace(first, id=state.new_id(), name=f"shard ({i})") for i in range(1, 130)]
    STATS.reset()
    jobs = forge.run_jobs(run_id)
    assert [j.id for j in jobs] == [j.id for j in run.jobs] and len(jobs) == 130
    calls, _, _, _ = STATS.snapshot()
    assert calls == {("GET", "2xx"): 2}  # two pages of 100


def test_the_kill_switch_holds_the_moment_its_issue_is_opened(sandbox):
    """Found by listing the label, not by search, which lags behind writes (the sandbox's search index does too):
    a maintainer who turns the switch on a second before a revert is still obeyed."""
    forge, state, seeded = sandbox["forge"], sandbox["state"], sandbox["seeded"]
    assert forge.kill_switch("stop-revert-bisect", ["admin", "maintain"], []) is None
    lag, state.search.lag_s = state.search.lag_s, 3600  # search would not see it for an hour
    made = state.add_issue(
        seeded.repo, title="Stop", body="a release", user=seeded.maintainer, labels=["stop-revert-bisect"]
    )
    outsider = state.add_issue(seeded.repo, title="Stop?", body="", user="drive-by", labels=["stop-revert-bisect"])
    assert forge.kill_switch("stop-revert-bisect", ["admin", "maintain"], []) == made.number
    assert (
        forge.kill_switch("stop-revert-bisect", ["admin"], ["drive-by"]) == outsider.number
    )  # a maintainer: not admin
    assert forge.kill_switch("stop-revert-bisect", ["admin"], []) is None  # anyone can label their own issue
    made.state = outsider.state = "closed"
    assert forge.kill_switch("stop-revert-bisect", ["admin", "maintain"], ["drive-by"]) is None
    state.search.lag_s = lag
