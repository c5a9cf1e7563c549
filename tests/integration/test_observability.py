"""/readyz, /metrics and the JSON logs of the service, in process: signed deliveries, real store rows,
PyGithub clients built the bot's way against the sandbox."""

import io
import json
import logging
import shutil
import subprocess
import uuid
from pathlib import Path

import pytest
import sqlalchemy
from fastapi.testclient import TestClient
from prometheus_client.parser import text_string_to_metric_families

from bot.adapters.github.failures import classify
from bot.adapters.store.db import HEAD_REVISION, _alembic_config, connect
from bot.adapters.store.deliveries import Deliveries, Jobs
from bot.adapters.store.store import NewBisection, NewStep, StepReport, Store
from bot.app import create_app
from bot.domain.bisect.ledger import Entry
from bot.ingress.webhooks.signature import sign
from bot.ingress.worker import Worker
from bot.observability import bind
from bot.observability.github_api import STATS
from bot.observability.logs import redact, setup_logging
from bot.observability.ready import check
from bot.settings import BotSettings
from tests.support.hand_rows import progress

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "github" / "webhooks"
POLICIES = Path(__file__).resolve().parents[2] / "policies"
SECRET = "obs-secret-" + uuid.uuid4().hex
TOKEN = "ghp_" + uuid.uuid4().hex
PEM_BODY = [
    "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC" + uuid.uuid4().hex,
    "q1w2e3r4t5y6u7i8o9p0" + uuid.uuid4().hex,
]
PEM = "-----BEGIN PRIVATE KEY-----\n" + "\n".join(PEM_BODY) + "\n-----END PRIVATE KEY-----\n"
LIMIT = 64 * 1024


def make_app(tmp_path: Path, name: str = "bot.db", url: str | None = None, **overrides):
    db = url or f"sqlite:///{tmp_path / name}"
    fields = dict(webhook_secret=SECRET, db=db, policies=POLICIES, max_body_bytes=LIMIT) | overrides
    app = create_app(BotSettings(**fields), handlers={})  # no worker: queued jobs stay queued
    return app, TestClient(app), db


def post(client, body: bytes, event: str | None, delivery: str | None = None, signature: str | None = "sign"):
    headers = {"Content-Type": "application/json", "X-GitHub-Delivery": delivery or str(uuid.uuid4())}
    if event:
        headers["X-GitHub-Event"] = event
    if signature == "sign":
        headers["X-Hub-Signature-256"] = sign(SECRET.encode(), body)
    elif signature:
        headers["X-Hub-Signature-256"] = signature
    return client.post("/webhooks/github", content=body, headers=headers)


def fixture(name: str) -> bytes:
    return (FIXTURES / name).read_bytes()


def scrape(client) -> dict[str, list]:
    """Sample name -> [(labels, value)], parsed by prometheus_client's own parser."""
    r = client.get("/metrics")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/plain")
    out: dict[str, list] = {}
    for family in text_string_to_metric_families(r.text):
        for s in family.samples:
            out.setdefault(s.name, []).append((s.labels, s.value))
    return out


def value(samples, name, **labels) -> float | None:
    found = [v for lab, v in samples.get(name, []) if all(lab.get(k) == str(w) for k, w in labels.items())]
    assert len(found) <= 1, (name, labels, found)
    return found[0] if found else None


@pytest.fixture
def json_logs():
    root = logging.getLogger()
    level = root.level
    buf = io.StringIO()
    handler = setup_logging("json", stream=buf)
    yield buf
    root.removeHandler(handler)
    root.setLevel(level)


def lines(buf) -> list[dict]:
    return [json.loads(line) for line in buf.getvalue().splitlines() if line.strip()]


# -- readiness --


def test_ready_on_a_migrated_store(tmp_path):
    _, client, _ = make_app(tmp_path)
    r = client.get("/readyz")
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["status"] == "ready" and body["failed"] == []
    assert body["checks"]["schema"] == {"ok": True, "expected": HEAD_REVISION, "revision": HEAD_REVISION}
    assert body["checks"]["policies"]["ok"] and body["checks"]["policies"]["count"] == len(
        list(POLICIES.glob("*.yaml"))
    )
    assert client.get("/healthz").json()["status"] == "ok"


def test_not_ready_when_the_schema_is_behind(tmp_path):
    from alembic import command
    from alembic.script import ScriptDirectory

    _, client, db = make_app(tmp_path)
    previous = ScriptDirectory.from_config(_alembic_config()).get_revision(HEAD_REVISION).down_revision
    engine = sqlalchemy.create_engine(db)
    with engine.begin() as conn:
        cfg = _alembic_config()
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, previous)
    engine.dispose()
    r = client.get("/readyz")
    assert r.status_code == 503, r.text
    body = r.json()
    assert body["failed"] == ["schema"]
    assert body["checks"]["schema"]["revision"] == previous and body["checks"]["schema"]["expected"] == HEAD_REVISION
    assert body["checks"]["store"]["ok"]


def test_not_ready_when_the_store_is_gone_and_deliveries_are_refused(tmp_path):
    app, client, _ = make_app(tmp_path / "gone")
    assert client.get("/readyz").status_code == 200
    shutil.rmtree(tmp_path / "gone")
    app.state.observability.engine.dispose()  # pooled connections would keep the deleted file open
    r = client.get("/readyz")
    assert r.status_code == 503, r.text
    assert r.json()["failed"] == ["store", "schema", "queue"]
    assert "unable to open database file" in r.json()["checks"]["store"]["error"]
    assert post(client, fixture("issue_comment.created.json"), "issue_comment").status_code == 503
    samples = scrape(client)  # still answers: the store series are missing, store_up says why
    assert value(samples, "revert_bisect_store_up") == 0
    assert "revert_bisect_jobs" not in samples
    assert (
        value(samples, "revert_bisect_webhook_deliveries_total", event="issue_comment", outcome="store_unavailable")
        == 1
    )


def test_not_ready_when_the_job_queue_cannot_be_read(tmp_path):
    app, client, db = make_app(tmp_path)
    engine = sqlalchemy.create_engine(db)
    with engine.begin() as conn:
        conn.execute(sqlalchemy.text("ALTER TABLE jobs RENAME TO jobs_elsewhere"))
    engine.dispose()
    r = client.get("/readyz")
    assert r.status_code == 503, r.text
    assert r.json()["failed"] == ["queue"] and "jobs" in r.json()["checks"]["queue"]["error"]


def test_readiness_of_an_unreachable_postgres():  # psycopg is in the test extra: missing, create_engine fails the test
    engine = sqlalchemy.create_engine("postgresql+psycopg://nobody@127.0.0.1:1/none")
    ready, body = check(engine, {"ok": True, "count": 0})
    assert not ready and body["failed"] == ["store", "schema", "queue"] and body["checks"]["store"]["error"]


def test_not_ready_when_the_policies_do_not_load(tmp_path):
    bad = tmp_path / "policies"
    bad.mkdir()
    (bad / "broken.yaml").write_text("repository: [unclosed\n")
    _, client, _ = make_app(tmp_path, policies=bad)
    r = client.get("/readyz")
    assert r.status_code == 503 and r.json()["failed"] == ["policies"]
    assert "broken.yaml" in r.json()["checks"]["policies"]["error"]
    empty = tmp_path / "none"
    _, client, _ = make_app(tmp_path, name="other.db", policies=empty)
    r = client.get("/readyz")
    assert (
        r.status_code == 200
        and r.json()["checks"]["policies"]["count"] == 0
        and "note" in r.json()["checks"]["policies"]
    )


# -- metrics --


def test_delivery_counters_and_queue_depth(tmp_path):
    app, client, db = make_app(tmp_path)
    other_app, other_client, _ = make_app(tmp_path, name="other.db")  # its own registry: no clash, no sharing
    comment = fixture("issue_comment.created.json")
    first = str(uuid.uuid4())
    assert post(client, comment, "issue_comment", first).status_code == 202
    assert post(client, comment, "issue_comment", first).status_code == 202  # redelivery
    assert post(client, comment, "issue_comment").status_code == 202
    assert post(client, fixture("issue_comment.edited.json"), "issue_comment").status_code == 202
    assert post(client, fixture("push.json"), "push").status_code == 202
    assert post(client, fixture("ping.json"), "ping").status_code == 200
    assert post(client, comment, "issue_comment", signature="sha256=" + "0" * 64).status_code == 401
    assert post(client, comment, "issue_comment", signature=None).status_code == 401
    assert post(client, comment, None).status_code == 400
    assert post(client, b"not json", "push").status_code == 400
    assert post(client, b"x" * (LIMIT + 1), "push").status_code == 413
    assert post(other_client, fixture("push.json"), "push").status_code == 202

    samples = scrape(client)
    expected = {
        ("issue_comment", "queued"): 3,
        ("issue_comment", "duplicate"): 1,
        ("push", "ignored"): 1,
        ("ping", "ignored"): 1,
        ("unverified", "refused_signature"): 2,
        ("invalid", "refused_bad_request"): 1,
        ("push", "refused_bad_request"): 1,
        ("unverified", "too_large"): 1,
    }
    got = {(lab["event"], lab["outcome"]): v for lab, v in samples["revert_bisect_webhook_deliveries_total"]}
    assert got == expected
    assert {
        (lab["event"], lab["outcome"]): v for lab, v in scrape(other_client)["revert_bisect_webhook_deliveries_total"]
    } == {("push", "ignored"): 1}

    jobs = Deliveries(sqlalchemy.create_engine(db)).jobs()
    for state in ("queued", "running", "done", "failed"):
        assert value(samples, "revert_bisect_jobs", state=state) == sum(1 for j in jobs if j.state == state)
    assert value(samples, "revert_bisect_jobs", state="queued") == 3
    assert 0 < value(samples, "revert_bisect_oldest_queued_job_age_seconds") < 300
    assert value(samples, "revert_bisect_store_up") == 1


def tiny_repo(path: Path) -> tuple[str, str]:
    def git(*args):
        return subprocess.run(
            ["git", "-C", str(path), *args], capture_output=True, text=True, check=True
        ).stdout.strip()

    path.mkdir()
    git("init", "-q", "-b", "main")
    (path / "t.sh").write_text("exit 0\n")
    git("add", ".")
    git("commit", "-q", "-m", "good")
    good = git("rev-parse", "HEAD")
    (path / "t.sh").write_text("exit 1\n")
    git("commit", "-q", "-am", "bad")
    return good, git("rev-parse", "HEAD")


@pytest.mark.parametrize("dialect", ["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def test_bisections_steps_and_durations_come_from_the_store(tmp_path, dialect, request):
    _, client, db = make_app(tmp_path, url=request.getfixturevalue("pg_url") if dialect == "postgres" else None)
    assert client.get("/readyz").status_code == 200
    good, bad = tiny_repo(tmp_path / "repo")
    store = Store(connect(db))
    new = NewBisection(
        str(tmp_path / "repo"), good, "main", good, bad, ["./t.sh"], {"workers": 2}, tests=(Entry("./t.sh"),)
    )
    running = store.create(new, "calibrating")
    ids = store.add_steps(
        running,
        [
            NewStep(good, "calibrate", 1, backend="local"),
            NewStep(bad, "calibrate", 1, backend="github_actions"),
            NewStep(bad, "search", 1, backend="local"),
            NewStep(good, "search", 1),
            NewStep(bad, "confirm", 1),
        ],
    )
    actions = "actions-runner-3 (http://127.0.0.1:9/acme/engine/actions/runs/17)"
    store.finish_step(ids[0], StepReport(0, None, None, "good", "local/wt-0", 1.5, "ok"))
    store.finish_step(ids[1], StepReport(1, None, None, "bad", actions, 700.0, "failed"))
    store.finish_step(ids[2], StepReport(1, None, None, "bad", "local/wt-1", 4.0, "failed"))
    store.finish_step(ids[3], StepReport(125, None, None, "skip", "ssh://gpu-box", 9000.0, "skipped"))
    assert store.mark_lost(running, "lost: driver died", step_ids=[ids[4]]) == 1  # ids[4] lost; none left running
    progress(store, running, phase="searching")
    finished = store.create(new, "calibrating")
    progress(store, finished, phase="done", status="found", outcome={"message": "found", "culprit": bad})
    waiting = store.add_steps(finished, [NewStep(good, "confirm", 2)])  # still running: no verdict, no runner

    samples = scrape(client)
    bisections = {(lab["status"], lab["phase"]): v for lab, v in samples["revert_bisect_bisections"]}
    assert bisections == {("running", "searching"): 1, ("found", "done"): 1}
    steps = {(lab["state"], lab["verdict"], lab["backend"]): v for lab, v in samples["revert_bisect_steps"]}
    assert steps == {
        ("done", "good", "local"): 1,
        ("done", "bad", "github_actions"): 1,
        ("done", "bad", "local"): 1,
        ("done", "skip", "other"): 1,
        ("lost", "infra", "other"): 1,
        ("running", "none", "other"): len(waiting),
    }

    done = [s for b in (running, finished) for s in store.get(b).steps if s.state == "done"]
    count = {lab["backend"]: v for lab, v in samples["revert_bisect_step_duration_seconds_count"]}
    assert sum(count.values()) == len(done) == 4
    assert count == {"local": 2, "github_actions": 1, "other": 1}
    total = {lab["backend"]: v for lab, v in samples["revert_bisect_step_duration_seconds_sum"]}
    assert total == {"local": 5.5, "github_actions": 700.0, "other": 9000.0}

    def bucket(backend, le):
        return value(samples, "revert_bisect_step_duration_seconds_bucket", backend=backend, le=le)

    assert (bucket("local", "1.0"), bucket("local", "5.0"), bucket("local", "+Inf")) == (0, 2, 2)
    assert (bucket("github_actions", "600.0"), bucket("github_actions", "1200.0")) == (0, 1)
    assert (bucket("other", "7200.0"), bucket("other", "+Inf")) == (0, 1)
    les = [lab["le"] for lab, _ in samples["revert_bisect_step_duration_seconds_bucket"] if lab["backend"] == "local"]
    assert les == [
        "1.0",
        "5.0",
        "15.0",
        "30.0",
        "60.0",
        "120.0",
        "300.0",
        "600.0",
        "1200.0",
        "1800.0",
        "3600.0",
        "7200.0",
        "+Inf",
    ]


# -- GitHub API calls --


@pytest.fixture
def sandbox(tmp_path):
    from sandbox import SandboxState, run_in_thread

    state = SandboxState(tmp_path / "sandbox")
    token = "sandbox-token-" + uuid.uuid4().hex
    state.add_user("revert-bisect-bot", token=token)
    state.create_repo("acme/engine")
    base, stop = run_in_thread(state)
    yield state, base, token
    stop()


def test_github_api_calls_are_counted_for_the_bots_clients(tmp_path, sandbox, json_logs):
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa
    from github import GithubException

    from bot.adapters.github.app_auth import AppCredentials
    from bot.adapters.github.forge import connect as github

    state, base, token = sandbox
    _, client, _ = make_app(tmp_path)
    STATS.reset()
    gh = github(base, token, throttle=False)  # as bot.wiring builds it
    assert gh.get_repo("acme/engine").full_name == "acme/engine"
    with pytest.raises(GithubException):
        gh.get_repo("acme/nothing")
    samples = scrape(client)
    calls = {(lab["method"], lab["status_class"]): v for lab, v in samples["revert_bisect_github_api_calls_total"]}
    assert calls == {("GET", "2xx"): 1, ("GET", "4xx"): 1}
    # both requests count against the limit, the 404 too (only a 304 does not): the latest answer says 4998 left
    assert value(samples, "revert_bisect_github_rate_limit_remaining", resource="core") == 4998
    assert value(samples, "revert_bisect_github_rate_limit_limit", resource="core") == 5000

    # A GitHub App: the JWT calls (installation, token) and the installation's client count too.
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public = (
        key.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    state.register_app(4242, public, ["acme/engine"])
    STATS.reset()
    app_auth = AppCredentials(4242, private, base, throttle=False)  # as bot.wiring builds it
    assert app_auth.client("acme/engine").get_repo("acme/engine").full_name == "acme/engine"
    calls = {
        (lab["method"], lab["status_class"]): v for lab, v in scrape(client)["revert_bisect_github_api_calls_total"]
    }
    assert calls.get(("POST", "2xx"), 0) >= 1  # the installation token
    assert calls.get(("GET", "2xx"), 0) >= 2  # the installation, the repository
    # The installation token it used is redacted from logs although nobody configured it.
    installation_token = app_auth.token("acme/engine")
    logging.getLogger("revert_bisect.test").warning("token %s", installation_token)
    assert installation_token not in json_logs.getvalue() and "token ***" in json_logs.getvalue()


# -- logs --


def test_json_log_lines_carry_the_delivery_and_job(tmp_path, json_logs):
    _, client, db = make_app(tmp_path)
    delivery = str(uuid.uuid4())
    r = post(client, fixture("issue_comment.created.json"), "issue_comment", delivery)
    assert r.status_code == 202
    job_id = r.json()["job"]
    # an acknowledgement is counted, not logged: the request path formats no log line (the job's lines say it)
    assert [line for line in lines(json_logs) if line["logger"] == "revert_bisect.webhooks"] == []

    post(client, b"{}", "push", signature="sha256=" + "0" * 64)
    refused = [line for line in lines(json_logs) if line.get("outcome") == "refused_signature"]
    assert len(refused) == 1 and refused[0]["level"] == "WARNING" and "delivery_id" in refused[0]

    def handle(job):
        log = logging.getLogger("revert_bisect.command")
        log.info("handling")
        with bind(bisection_id=7, step_id=11):
            log.info("dispatching")
        log.info("after")

    engine = connect(db)
    assert Worker(Jobs(engine), {"command": handle}, classify=classify).run_once().id == job_id
    by_message = {line["message"]: line for line in lines(json_logs) if line["logger"] == "revert_bisect.command"}
    assert by_message["handling"]["delivery_id"] == delivery and by_message["handling"]["job_id"] == job_id
    assert "bisection_id" not in by_message["handling"]
    assert by_message["dispatching"]["bisection_id"] == 7 and by_message["dispatching"]["step_id"] == 11
    assert "bisection_id" not in by_message["after"] and by_message["after"]["job_id"] == job_id
    worker_lines = [line for line in lines(json_logs) if line["logger"] == "revert_bisect.worker"]
    assert worker_lines and all(line["job_id"] == job_id and line["delivery_id"] == delivery for line in worker_lines)
    assert {"ts", "level", "logger", "message"} <= set(worker_lines[0]) and worker_lines[0]["ts"].endswith("Z")
    logging.getLogger("revert_bisect.test").info("outside")
    assert "job_id" not in lines(json_logs)[-1] and "delivery_id" not in lines(json_logs)[-1]


def test_secrets_never_reach_the_logs(tmp_path, json_logs, caplog):
    key = tmp_path / "app.pem"
    key.write_text(PEM)
    make_app(tmp_path, github_token=TOKEN, github_app_id=1, github_app_private_key=key)
    log = logging.getLogger("revert_bisect.test")
    log.info("the webhook secret is %s", SECRET)
    log.warning(f"token {TOKEN} refused")
    log.info("key line", extra={"payload": {"key": PEM, "lines": PEM_BODY}})
    try:
        raise RuntimeError(f"cannot sign with {PEM_BODY[1]}")
    except RuntimeError:
        log.exception("signing failed")
    text_buf = io.StringIO()
    text = setup_logging("text", stream=text_buf)  # replaces the JSON handler: the text format redacts too
    try:
        log.error("text: %s %s", SECRET, TOKEN)
    finally:
        logging.getLogger().removeHandler(text)
    written = json_logs.getvalue() + text_buf.getvalue()
    for secret in [SECRET, TOKEN, PEM, *PEM_BODY]:
        assert secret not in written
    parsed = [line for line in lines(json_logs) if line["logger"] == "revert_bisect.test"]
    assert parsed[0]["message"] == "the webhook secret is ***"
    assert "***" in parsed[-1]["exc"] and "RuntimeError" in parsed[-1]["exc"]
    assert "text: *** ***" in text_buf.getvalue()
    assert redact(f"a{SECRET}b") == "a***b"
    assert SECRET not in caplog.text and TOKEN not in caplog.text  # other handlers get the records redacted too
