"""The bot's downloads against the sandbox, whose downloads behave as GitHub's (tests/integration/
test_sandbox_downloads.py holds it to that): artifacts and logs fetched from the other host without credentials, an
expired URL asked for again, a blob host that keeps failing given up after bounded tries -- an infra result with
the reason in the Actions backend, never an endless poll -- and the nightly job's metrics artifact and log read."""

from __future__ import annotations

import json
import sys

import pytest

from bot.adapters.dispatch.actions import ArtifactUnreadable, GitHubActionsBackend, Limits
from bot.adapters.github.actions import GitHubActions
from bot.adapters.github.downloads import BlobClient, DownloadLimits, Downloads
from bot.adapters.github.forge import GitHubForge, connect
from bot.adapters.policy_files import parse
from bot.domain.joblog import plain
from bot.ingress.jobs import run_reads
from bot.observability.github_api import STATS, install
from runners.spec import StepSpec
from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build

LINE = "✗ FAILED: test_kl.py (naïve)"
METRICS = {"avg_kl_div": 0.0123, "threshold": 0.002}


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("bot-downloads")
    build(tmp / "scenario", commits=8, seed=1)
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    script = (
        f"import json, os; print({LINE!r}); "
        f'open(os.environ["REVERT_BISECT_RESULT"], "w").write(json.dumps({METRICS!r}))'
    )
    state.bind_workflow(seeded.repo, "echo.yml", [sys.executable, "-c", script])
    base, stop = run_in_thread(state)
    install()
    forge = GitHubForge(connect(base, seeded.tokens["revert-bisect-bot"], throttle=False), seeded.repo)
    run_id = state.start_run(seeded.repo, "echo.yml", "main", event="workflow_dispatch")
    assert state.actions.wait(run_id, 60).conclusion == "success"
    yield dict(state=state, blobs=state.blobs, forge=forge, run_id=run_id, repo=seeded.repo)
    state.actions.shutdown()
    stop()


def served(blobs, since: int, part: str) -> list[tuple[int, bool]]:
    """(status, carried Authorization) of the blob host's answers since `since` to paths containing `part`."""
    return [(status, auth) for path, status, auth in blobs.served[since:] if part in path]


def test_an_artifact_is_downloaded_from_the_other_host_without_credentials(world):
    blobs, before = world["blobs"], len(world["blobs"].served)
    STATS.reset()
    files = world["forge"].run_artifact(world["run_id"], "result")
    assert json.loads(files["result.json"]) == METRICS
    assert served(blobs, before, "/artifacts/") == [(200, False)]
    calls, _, _, _ = STATS.snapshot()
    assert calls[("GET", "3xx")] == 1 and STATS.downloads_snapshot() == {"2xx": 1}  # the 302 asked, not followed
    assert world["forge"].run_artifact(world["run_id"], "no-such-artifact") == {}


def test_a_jobs_log_is_read_from_the_other_host_and_decoded_as_utf8(world):
    before = len(world["blobs"].served)
    [job] = world["forge"].run_jobs(world["run_id"])
    text = world["forge"].job_log(job.id)
    assert LINE in text and not text.startswith("\ufeff")
    assert served(world["blobs"], before, "/job-logs/") == [(200, False)]


def test_an_expired_url_is_asked_of_github_again(world, monkeypatch):
    """The first URL GitHub hands out is used only after it expired (a slow queue, a paused process): the blob host
    answers 403, and the bot asks GitHub for a fresh URL, which works."""
    blobs = world["blobs"]
    now = [blobs.clock()]
    monkeypatch.setattr(blobs, "clock", lambda: now[0])
    sign, signed = blobs.sign, []

    def sign_then_wait(path: str) -> str:
        url = sign(path)
        signed.append(url)
        if len(signed) == 1:
            now[0] += 61
        return url

    monkeypatch.setattr(blobs, "sign", sign_then_wait)
    before = len(blobs.served)
    STATS.reset()
    files = world["forge"].run_artifact(world["run_id"], "result")
    assert json.loads(files["result.json"]) == METRICS
    assert served(blobs, before, "/artifacts/") == [(403, False), (200, False)]
    assert len(signed) == 2 and signed[0] != signed[1]
    assert STATS.snapshot()[0][("GET", "3xx")] == 2 and STATS.downloads_snapshot() == {"4xx": 1, "2xx": 1}


def limited(actions: GitHubActions, tries: int) -> GitHubActions:
    actions.downloads = Downloads(actions.repo.requester, BlobClient(DownloadLimits(tries=tries, backoff_s=0.0)))
    return actions


def test_a_blob_host_that_keeps_failing_gives_up_after_bounded_tries(world):
    blobs = world["blobs"]
    actions = limited(world["forge"].actions("echo.yml"), tries=3)
    before = len(blobs.served)
    blobs.outage(None)
    try:
        with pytest.raises(ArtifactUnreadable) as err:
            actions.artifact_file(world["run_id"], "result", "result.json")
    finally:
        blobs.outage(0)
    assert served(blobs, before, "/artifacts/") == [(503, False)] * 3
    assert "3 tries failed" in str(err.value) and "503 ServerBusy" in str(err.value)
    assert actions.artifact_file(world["run_id"], "result", "result.json") == json.dumps(METRICS).encode()


class OneRun(GitHubActions):
    """The real Actions adapter, whose dispatch hands back a run the test started."""

    run_id = 0

    def dispatch(self, ref, inputs):
        return self.run_id


def test_the_backend_makes_a_download_that_keeps_failing_an_infra_result_once(world):
    state, blobs = world["state"], world["blobs"]
    run = state.actions.run(world["run_id"])
    state.actions._attach(run, "revert-bisect-step-1", {"result.json": b"{}"})  # what the step workflow uploads
    actions = limited(OneRun(world["forge"].repo, "echo.yml"), tries=2)
    actions.run_id = run.id
    inputs = lambda spec, correlation: {}  # noqa: E731
    backend = GitHubActionsBackend(actions, "main", inputs, 1, ["self-hosted"], Limits(poll_s=0.0))
    before = len(blobs.served)
    blobs.outage(None)
    try:
        backend.submit(StepSpec(1, run.head_sha, ("probe",)))
        [got] = backend.wait(30)
        assert backend.wait(0) == [] and backend.free == 1  # not polled again
    finally:
        blobs.outage(0)
    assert (got.exit_code, got.metric) == (None, None)
    assert got.infra_reason.startswith(f"run {run.id} concluded success; its artifact revert-bisect-step-1: ")
    assert "2 tries failed, the last: 503 ServerBusy" in got.infra_reason
    assert served(blobs, before, "/artifacts/") == [(503, False)] * 2


def test_the_nightly_job_reads_its_metrics_artifact_and_the_log(world):
    policy = parse(
        f"""
repository: {world["repo"]}
watch: [{{workflow: echo}}]
tests: [{{id: kl, match: kl, probe: {{name: command, command: [./t.sh]}}}}]
results: {{metrics_artifact: result}}
""",
        "p.yaml",
    )
    junit, metrics = run_reads.artifacts(world["forge"], policy, world["run_id"])
    assert (junit, metrics) == ((), METRICS)
    [job] = world["forge"].run_jobs(world["run_id"])
    assert LINE in plain(world["forge"].job_log(job.id))
