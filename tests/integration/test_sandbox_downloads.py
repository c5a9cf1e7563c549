"""The sandbox's downloads behave as GitHub's (REALITY.md, "GitHub: downloads"; docs/github-contract.md,
"Downloads"): a 302 to a signed URL on another host name, on a port of its own, expiring after a minute; that
host refuses credentials (400) and unknown or expired signatures (403), in Azure's XML; a job's log is UTF-8
text/plain without a charset behind a byte-order mark; a run's logs are a zip, one file per job and per step."""

from __future__ import annotations

import calendar
import io
import sys
import time
import zipfile
from urllib.parse import parse_qs, urlsplit
from xml.etree import ElementTree

import pytest
import requests
from github import Auth, Github

from sandbox import SandboxState, run_in_thread, seed_from_scenario
from scenarios.mamba_track_boundary import build

LINE = "✓ PASSED: naïve"  # not Latin-1: a client guessing the charset garbles it


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("downloads")
    build(tmp / "scenario", commits=8, seed=1)
    state = SandboxState(tmp / "github")
    seeded = seed_from_scenario(state, tmp / "scenario")
    script = f'import os; print({LINE!r}); open(os.environ["REVERT_BISECT_RESULT"], "w").write("{{}}")'
    state.bind_workflow(seeded.repo, "echo.yml", [sys.executable, "-c", script])
    base, stop = run_in_thread(state)
    run_id = state.start_run(seeded.repo, "echo.yml", "main", event="workflow_dispatch")
    assert state.actions.wait(run_id, 60).conclusion == "success"
    token = seeded.tokens["revert-bisect-bot"]
    yield dict(state=state, repo=seeded.repo, base=base, run=state.actions.run(run_id), token=token)
    state.actions.shutdown()
    stop()


def redirect(sb, path: str) -> requests.Response:
    url = f"{sb['base']}/repos/{sb['repo']}/actions/{path}"
    return requests.get(url, headers={"Authorization": f"token {sb['token']}"}, allow_redirects=False, timeout=10)


def downloads(sb) -> dict[str, str]:
    run = sb["run"]
    return {
        "artifact": f"artifacts/{run.artifacts[0].id}/zip",
        "run logs": f"runs/{run.id}/logs",
        "job log": f"jobs/{run.jobs[0].id}/logs",
    }


def error_code(response: requests.Response) -> str | None:
    return ElementTree.fromstring(response.content.decode("utf-8-sig")).findtext("Code")


def test_every_download_answers_302_to_another_host_with_a_signed_url_that_expires_in_a_minute(sandbox):
    api = urlsplit(sandbox["base"])
    for what, path in downloads(sandbox).items():
        answer = redirect(sandbox, path)
        assert answer.status_code == 302 and not answer.content, what
        location = urlsplit(answer.headers["Location"])
        assert location.hostname != api.hostname and location.port != api.port, what  # another host, port of its own
        query = {k: v[0] for k, v in parse_qs(location.query).items()}
        assert {"se", "sig", "sp", "sv"} <= set(query), what
        expiry = calendar.timegm(time.strptime(query["se"], "%Y-%m-%dT%H:%M:%SZ"))
        assert 50 <= expiry - time.time() <= 61, what
        assert requests.get(answer.headers["Location"], timeout=10).status_code == 200, what


def test_the_blob_host_refuses_a_request_carrying_authorization(sandbox):
    location = redirect(sandbox, downloads(sandbox)["artifact"]).headers["Location"]
    refused = requests.get(location, headers={"Authorization": f"token {sandbox['token']}"}, timeout=10)
    assert refused.status_code == 400 and refused.headers["Content-Type"] == "application/xml"
    assert error_code(refused) == "InvalidAuthenticationInfo"
    assert requests.get(location, timeout=10).status_code == 200  # the same URL, without credentials


def test_pygithub_following_the_redirect_fails_as_against_github(sandbox, tmp_path):
    """PyGithub follows a 302 only to its own host or an allow-listed domain: the blob host is neither."""
    gh = Github(base_url=sandbox["base"], auth=Auth.Token(sandbox["token"]), retry=None)
    artifact = next(iter(gh.get_repo(sandbox["repo"]).get_workflow_run(sandbox["run"].id).get_artifacts()))
    with pytest.raises(AssertionError):
        gh.requester.getFile(artifact.archive_download_url, str(tmp_path / "a.zip"))


def test_an_unknown_or_tampered_signature_is_403(sandbox):
    location = redirect(sandbox, downloads(sandbox)["job log"]).headers["Location"]
    for bad in (location.replace("sig=", "sig=0"), location.split("&sig=")[0], location.replace("se=", "se=1")):
        answer = requests.get(bad, timeout=10)
        assert answer.status_code == 403 and error_code(answer) == "AuthenticationFailed", bad
    other = location.replace(f"/{sandbox['run'].jobs[0].id}/", "/1/")  # a signature for another blob
    assert requests.get(other, timeout=10).status_code == 403


def test_a_signed_url_expires_after_a_minute_on_the_sandboxs_clock(sandbox):
    blobs = sandbox["state"].blobs
    real, signed_at = blobs.clock, float(int(time.time()))
    try:
        blobs.clock = lambda: signed_at
        location = redirect(sandbox, downloads(sandbox)["artifact"]).headers["Location"]
        blobs.clock = lambda: signed_at + 59
        assert requests.get(location, timeout=10).status_code == 200
        blobs.clock = lambda: signed_at + 61
        expired = requests.get(location, timeout=10)
        assert expired.status_code == 403 and error_code(expired) == "AuthenticationFailed"
        assert "expiry" in expired.content.decode("utf-8-sig")
        fresh = redirect(sandbox, downloads(sandbox)["artifact"]).headers["Location"]  # asked again: valid again
        assert requests.get(fresh, timeout=10).status_code == 200
    finally:
        blobs.clock = real


def test_a_job_log_is_utf8_text_plain_without_a_charset_behind_a_bom(sandbox):
    answer = requests.get(redirect(sandbox, downloads(sandbox)["job log"]).headers["Location"], timeout=10)
    assert answer.headers["Content-Type"] == "text/plain"
    assert answer.content.startswith(b"\xef\xbb\xbf")
    assert LINE not in answer.text  # requests guesses ISO-8859-1 for text/plain without a charset, as for GitHub's
    text = answer.content.decode("utf-8-sig")
    assert LINE in text and text.splitlines()[0][:4].isdigit()


def test_run_logs_are_a_zip_with_a_file_per_job_and_per_step(sandbox):
    """The layout gh reads (cli/cli pkg/cmd/run/view/logs.go): `<n>_<job>.txt` holding the whole job's log at the
    top, and `<job>/<step number>_<step name>.txt` for each step the job's API lists, `/` and `:` taken out."""
    run = sandbox["run"]
    job = requests.get(
        f"{sandbox['base']}/repos/{sandbox['repo']}/actions/runs/{run.id}/jobs",
        headers={"Authorization": f"token {sandbox['token']}"},
        timeout=10,
    ).json()["jobs"][0]
    answer = requests.get(redirect(sandbox, downloads(sandbox)["run logs"]).headers["Location"], timeout=10)
    assert answer.status_code == 200 and answer.headers["Content-Type"] == "application/zip"
    archive = zipfile.ZipFile(io.BytesIO(answer.content))
    name = job["name"].replace("/", "").replace(":", "")
    steps = [
        f"{name}/{s['number']}_{s['name'].replace('/', '').replace(':', '')[:90].strip()}.txt" for s in job["steps"]
    ]
    assert sorted(archive.namelist()) == sorted([f"0_{name}.txt", *steps])
    whole = archive.read(f"0_{name}.txt").decode("utf-8-sig")
    assert LINE in whole
    parts = [archive.read(s).decode("utf-8-sig") for s in steps]
    assert "".join(parts).splitlines() == whole.splitlines()  # every line in exactly one step's file, in order
    assert sum(LINE in p for p in parts) == 1


def test_a_blob_host_outage_answers_503_until_it_ends(sandbox):
    blobs = sandbox["state"].blobs
    location = redirect(sandbox, downloads(sandbox)["artifact"]).headers["Location"]
    blobs.outage(2)
    try:
        assert [requests.get(location, timeout=10).status_code for _ in range(3)] == [503, 503, 200]
    finally:
        blobs.outage(0)
