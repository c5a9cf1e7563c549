"""The dashboard and its JSON API: every state renders, API responses match the app's own OpenAPI
description (openapi-core), filters, paging, access control, and the timeline's reconstructed order."""

from __future__ import annotations

import json
import os
import re
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from datetime import UTC, datetime
from types import SimpleNamespace

import pytest
from openapi_core import OpenAPI
from openapi_core.testing import MockRequest, MockResponse
from pydantic import SecretStr
from starlette.testclient import TestClient

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import NewBisection, NewStep, StepReport, Store
from bot.app import create_app
from bot.domain.bisect.engine import decide
from bot.domain.bisect.explain import order_commits
from bot.domain.bisect.ledger import Entry, entries, outcome_model
from bot.domain.bisect.model import Outcome, Phase, Problem, Run, Settings, State, Status
from bot.domain.bisect.simulate import FlakyTest, linear_graph
from bot.domain.outcome import parse_outcome
from bot.service import setup
from bot.service.config import BisectConfig
from bot.service.describe import run_urls, runner_label
from bot.settings import BotSettings
from bot.web import detail, models, routes, views
from bot.web.auth import is_loopback
from bot.web.chart import render_svg
from scenarios.synthetic import build
from tests.support.hand_rows import progress, stored_outcome

LOCAL = ("127.0.0.1", 50123)
REMOTE = ("10.0.0.5", 1234)
TOKEN = "dash-token-0123456789"
KL = r"avg_kl_div=(?P<value>[0-9.eE+-]+)"


def _env(home) -> dict:
    env = {**os.environ, "XDG_DATA_HOME": str(home / "xdg-data"), "XDG_CACHE_HOME": str(home / "xdg-cache")}
    for who in ("AUTHOR", "COMMITTER"):
        env[f"GIT_{who}_NAME"] = "Test Runner"
        env[f"GIT_{who}_EMAIL"] = "tests@revert-bisect.invalid"
    return env


def _bisect(home, db: str, repo, *extra: str) -> dict:
    out = home / f"out-{len(list(home.glob('out-*')))}.json"
    argv = [
        sys.executable,
        "-m",
        "bot.cli.main",
        "bisect",
        "--json",
        str(out),
        "--db",
        db,
        "--repo",
        str(repo.path),
        "--good",
        repo.good,
        "--bad",
        repo.bad,
        *extra,
        "--",
        *repo.command(),
    ]
    proc = subprocess.run(argv, capture_output=True, text=True, timeout=180, env=_env(home))
    assert out.exists(), proc.stderr
    return json.loads(out.read_text())


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    """One store with bisections in every state: real ones run by the CLI on real git repositories, and
    hand-made ones (running, cancelled, untestable with lost steps, zero steps) written through Store."""
    home = tmp_path_factory.mktemp("dash")
    db = f"sqlite:///{home / 'store.db'}"
    ids: dict[str, int] = {}
    found_repo = build(home / "found", 16, 9)
    out = _bisect(
        home, db, found_repo, "--metric-regex", KL, "--threshold", "0.002", "--workers", "2", "--verify-revert"
    )
    assert out["status"] == "found", out
    ids["found"] = out["id"]
    ambiguous_repo = build(home / "ambiguous", 24, 12, unbuildable=frozenset({10, 11}))
    ids["ambiguous"] = _bisect(home, db, ambiguous_repo)["id"]
    ids["not_reproducible"] = _bisect(home, db, build(home / "norepro", 10, 99))["id"]

    store = Store(connect(db))
    repo = build(home / "manual", 12, 6)
    git = GitRepo(repo.path)

    def new(origin: dict | None = None, **config) -> int:
        cfg = BisectConfig(command=tuple(repo.command()), **config)
        return setup.create(store, git, repo.good, repo.bad, cfg, origin=origin).id

    def report(verdict, exit_code, metric=None, runner="local/wt-0", infra=None, env_key=None, reused=None):
        return StepReport(exit_code, metric, infra, verdict, runner, 1.25, "log", env_key, reused)

    # running: endpoints calibrated, one search probe done, one still running
    origin = {
        "repo": "octo/gpu-kernels",
        "thread": 7,
        "comment_id": 1,
        "requested_by": "ada",
        "test": "test_kl_divergence",
    }
    rid = new(origin, metric_file=True, threshold=0.002, workers=2)
    cal = store.add_steps(rid, [views_step(repo.good, "calibrate", 1), views_step(repo.bad, "calibrate", 1)])
    store.finish_step(
        cal[0],
        report(
            "good",
            0,
            0.0003,
            "gpu-1 (https://github.example/octo/gpu-kernels/actions/runs/101)",
            env_key="e" * 64,
            reused=False,
        ),
    )
    store.finish_step(
        cal[1],
        report(
            "bad",
            0,
            0.0065,
            "gpu-2 (https://github.example/octo/gpu-kernels/actions/runs/102)",
            env_key="e" * 64,
            reused=True,
        ),
    )
    s1 = store.add_steps(rid, [views_step(repo.shas[5], "search", 2), views_step(repo.shas[2], "search", 2)])
    store.finish_step(s1[0], report("bad", 0, 0.0061))
    progress(store, rid, "searching", guess=repo.shas[5], guess_probability=0.4, flake_rate=0.0, boundary=0.0034)
    ids["running"] = rid
    world_running_step = s1[1]

    # cancelled: a step cancelled on purpose, no answer
    cid = new()
    st = store.add_steps(cid, [views_step(repo.good, "calibrate", 1), views_step(repo.bad, "calibrate", 1)])
    store.finish_step(st[0], report("good", 0))
    store.mark_lost(cid, "cancelled: the bisection finished without it", state="cancelled")
    progress(
        store, cid, status="cancelled", outcome={"message": "cancelled on request before an answer", "culprit": None}
    )
    ids["cancelled"] = cid

    # untestable, its steps lost (the driving process died), infra reasons
    uid = new()
    st = store.add_steps(uid, [views_step(repo.good, "calibrate", 1), views_step(repo.bad, "calibrate", 1)])
    store.finish_step(st[0], report("infra", None, infra="timed out after 60 s"))
    store.mark_lost(uid, "lost: the process driving this step stopped before it finished")
    progress(
        store,
        uid,
        status="untestable",
        outcome={"message": "an endpoint cannot be tested", "culprit": None, "candidates": []},
    )
    ids["untestable"] = uid

    # zero steps, just created
    ids["empty"] = new()

    # a finished one that was published: the outcome keeps the PR body as drafted, and the PR's link
    pid = new({"repo": "octo/gpu-kernels", "test": "test_other"})
    st = store.add_steps(
        pid,
        [
            views_step(repo.good, "calibrate", 1),
            views_step(repo.bad, "calibrate", 1),
            views_step(repo.shas[5], "search", 2),
            views_step(repo.shas[4], "search", 3),
            views_step(repo.bad, "ab_head", 4),
            views_step("f" * 40, "ab_revert", 4),
        ],
    )
    for step_id, (v, code) in zip(st, [("good", 0), ("bad", 1), ("bad", 1), ("good", 0), ("bad", 1), ("good", 0)]):
        store.finish_step(step_id, report(v, code))
    progress(
        store,
        pid,
        status="found",
        outcome={
            "message": "found",
            "culprit": repo.shas[5],
            "confidence": 0.995,
            "candidates": [],
            "culprit_pr": 1006,
            "culprit_subject": "Change 6 (#1006)",
            "revert_pr": 77,
            "pr_body": "Reverts octo/gpu-kernels#1006\n\n## A/B verification\n\nHEAD fails, HEAD + revert passes.\n",
            "revert_pr_url": "https://github.example/octo/gpu-kernels/pull/77",
            "ab": {
                "head": repo.bad,
                "revert": "f" * 40,
                "passed": True,
                "head_verdicts": ["bad"],
                "revert_verdicts": ["good"],
            },
        },
    )
    ids["published"] = pid

    # a malformed stored outcome must still render
    mid = new()
    progress(store, mid, status="inconclusive", outcome={"message": "?"})
    stored_outcome(db, mid, {"message": 5, "culprit": 3, "candidates": "x", "ab": "nope", "confidence": "high"})
    ids["malformed"] = mid
    return SimpleNamespace(
        db=db, ids=ids, store=store, running_step=world_running_step, found_repo=found_repo, repo=repo
    )


def views_step(sha, kind, rnd):
    from bot.adapters.store.store import NewStep

    return NewStep(sha, kind, rnd)


@pytest.fixture(scope="module")
def app(world):
    return create_app(
        BotSettings(webhook_secret="whsec-dashboard-tests", db=world.db, dashboard_token=SecretStr(TOKEN)), handlers={}
    )


@pytest.fixture(scope="module")
def client(app):
    return TestClient(app, client=LOCAL)


@pytest.fixture(scope="module")
def openapi(app):
    return OpenAPI.from_dict(app.openapi())


def check(openapi: OpenAPI, response, pattern: str, args: dict | None = None) -> dict:
    """Validate a real response against the app's own OpenAPI description."""
    path = response.request.url.path
    request = MockRequest("http://testserver", "get", path, path_pattern=pattern, args=args or {})
    openapi.validate_response(
        request,
        MockResponse(
            response.content,
            status_code=response.status_code,
            content_type=response.headers["content-type"].split(";")[0],
        ),
    )
    return response.json()


STATES = [
    "found",
    "ambiguous",
    "not_reproducible",
    "running",
    "cancelled",
    "untestable",
    "empty",
    "published",
    "malformed",
]


@pytest.mark.parametrize("name", STATES)
def test_every_state_renders_and_matches_the_schema(world, client, openapi, name):
    bid = world.ids[name]
    page = client.get(f"/bisections/{bid}")
    assert page.status_code == 200, page.text
    html = page.text
    assert f"Bisection #{bid}" in html and 'id="timeline"' in html and "<main" in html
    data = check(openapi, client.get(f"/api/bisections/{bid}"), "/api/bisections/{bisection_id}")
    assert data["summary"]["id"] == bid
    assert data["timeline"][0]["role"] == "good" and data["timeline"][-1]["sha"] in (
        data["summary"]["bad"],
        data["summary"]["culprit"],
    )
    assert html.count('class="timeline-row') == len(data["timeline"])
    assert len(data["steps"]) == len(world.store.get(bid).steps)
    assert "whsec-dashboard-tests" not in html and TOKEN not in html  # never a secret


def test_found_with_metric(world, client, openapi):
    bid = world.ids["found"]
    data = client.get(f"/api/bisections/{bid}").json()
    repo = world.found_repo
    assert data["status"] == "found" and data["summary"]["culprit"] == repo.culprit
    order = [e["sha"] for e in data["timeline"]]
    # the reconstructed order is the real first-parent order of the commits that were run
    real = [repo.good] + repo.shas
    assert order == sorted(order, key=real.index)
    assert data["threshold"] == 0.002 and 0.0003 < data["boundary"] < 0.0065
    metric_runs = [s for s in data["steps"] if s["metric"] is not None and s["kind"] not in ("ab_head", "ab_revert")]
    assert len(data["chart"]["points"]) == len(metric_runs) > 0
    assert data["ab"]["passed"] is True and data["ab"]["steps"]
    top = max(data["posterior"]["entries"], key=lambda e: e["probability"])
    assert top["sha"] == repo.culprit
    html = client.get(f"/bisections/{bid}").text
    assert html.count("<circle") == len(metric_runs)
    assert 'data-line="threshold"' in html and 'data-line="boundary"' in html
    assert "A/B: HEAD vs HEAD + revert" in html and "proven" in html
    assert 'data-live="false"' in html


def test_running_page_is_live_and_shows_running_steps(world, client):
    bid = world.ids["running"]
    html = client.get(f"/bisections/{bid}").text
    assert 'data-live="true"' in html and "updates itself" in html and "EventSource" in html
    assert "test_kl_divergence" in html and "octo/gpu-kernels" in html
    assert (
        'href="https://github.example/octo/gpu-kernels/actions/runs/101"' in html
    )  # the run link from the runner text
    assert "built" in html and "reused" in html  # environments per step
    data = client.get(f"/api/bisections/{bid}").json()
    row = world.store.get(bid)
    assert [e["sha"] for e in data["timeline"]] == [row.good] + [
        c[0] for c in row.commits
    ]  # the whole range, oldest first
    assert [e["role"] for e in data["timeline"] if e["role"] != "untested"] == ["good", "tested", "tested", "bad"]
    assert all(e["subject"] and e["author"] for e in data["timeline"][1:])
    assert data["posterior"]["guess_probability"] == 0.4 and data["posterior"]["entries"]
    running = [s for s in data["steps"] if s["state"] == "running"]
    assert len(running) == 1 and running[0]["verdict"] is None


def test_lost_and_cancelled_steps(world, client):
    html = client.get(f"/bisections/{world.ids['untestable']}").text
    assert "lost: the process driving this step stopped" in html and "timed out after 60 s" in html
    html = client.get(f"/bisections/{world.ids['cancelled']}").text
    assert "cancelled on request" in html and ">cancelled<" in html


def test_revert_pr_body_and_links(world, client):
    bid = world.ids["published"]
    data = client.get(f"/api/bisections/{bid}").json()
    assert data["summary"]["revert_pr"] == 77 and data["summary"]["culprit_pr"] == 1006
    body = data["revert_pr_body"]
    assert body.startswith("Reverts octo/gpu-kernels#1006") and "## A/B verification" in body
    html = client.get(f"/bisections/{bid}").text
    assert "Revert PR body" in html and 'href="https://github.example/octo/gpu-kernels/pull/77"' in html
    assert (
        client.get(f"/api/bisections/{world.ids['found']}").json()["revert_pr_body"] is None
    )  # omitted when the outcome lacks it
    assert "Revert PR body" not in client.get(f"/bisections/{world.ids['found']}").text


def test_list_filters_and_schema(world, client, openapi):
    page = client.get("/")
    assert page.status_code == 200
    rows = re.findall(r'class="bisection-row" data-id="(\d+)"', page.text)
    assert [int(r) for r in rows] == sorted(world.ids.values(), reverse=True)  # newest first
    assert 'for="f-repository"' in page.text and 'for="f-state"' in page.text and 'for="f-test"' in page.text
    data = check(openapi, client.get("/api/bisections"), "/api/bisections")
    assert [i["id"] for i in data["items"]] == sorted(world.ids.values(), reverse=True) and not data["has_next"]

    def ids(**query) -> set[int]:
        r = client.get("/api/bisections", params=query)
        return {i["id"] for i in check(openapi, r, "/api/bisections", query)["items"]}

    assert ids(state="found") == {world.ids["found"], world.ids["published"]}
    assert ids(state="running") == {world.ids["running"], world.ids["empty"]}
    assert ids(state="searching") == {world.ids["running"]}
    assert ids(state="calibrating") == {world.ids["empty"]}
    assert ids(repository="octo/gpu") == {world.ids["running"], world.ids["published"]}
    assert ids(test="kl_div") == {world.ids["running"]}
    assert ids(state="found", repository="octo/gpu-kernels") == {world.ids["published"]}
    assert ids(state="nonsense") == set()
    html = client.get("/", params={"state": "cancelled"}).text
    assert re.findall(r'data-id="(\d+)"', html) == [str(world.ids["cancelled"])]
    assert '<option value="cancelled" selected>' in html
    assert "No bisections match" in client.get("/", params={"test": "no-such-test"}).text


def test_paging(world, client):
    r = client.get("/api/bisections", params={"per_page": 4}).json()
    assert len(r["items"]) == 4 and r["has_next"]
    r2 = client.get("/api/bisections", params={"per_page": 4, "page": 3}).json()
    assert len(r2["items"]) == len(world.ids) - 8 and not r2["has_next"]
    assert client.get("/api/bisections", params={"page": 0}).status_code == 422


def test_unknown_bisection_is_404(client, openapi):
    r = client.get("/api/bisections/999999")
    assert (
        r.status_code == 404 and "no bisection #999999" in check(openapi, r, "/api/bisections/{bisection_id}")["detail"]
    )
    page = client.get("/bisections/999999")
    assert page.status_code == 404 and "No bisection #999999" in page.text
    assert client.get("/bisections/999999/events").status_code == 404


def test_events_of_a_finished_bisection_end_with_done(world, client, monkeypatch):
    monkeypatch.setattr(routes, "EVENT_SETTLE_S", 0.0)
    r = client.get(f"/bisections/{world.ids['found']}/events")
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/event-stream")
    assert "event: done\ndata: " in r.text and "event: version" not in r.text


@pytest.fixture
def own_world(world, tmp_path):
    """A copy of the module's store, served by an app of its own, for a test that writes to it: the
    module's world stays as built for every other test, whichever order they run in."""
    source = sqlite3.connect(world.db.removeprefix("sqlite:///"))
    copy = sqlite3.connect(tmp_path / "store.db")
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    db = f"sqlite:///{tmp_path / 'store.db'}"
    app = create_app(
        BotSettings(webhook_secret="whsec-dashboard-tests", db=db, dashboard_token=SecretStr(TOKEN)), handlers={}
    )
    return SimpleNamespace(ids=world.ids, store=Store(connect(db)), client=TestClient(app, client=LOCAL))


def test_events_follow_what_is_recorded_after_the_end(own_world, monkeypatch):
    """The bot records the revert PR after the bisection has ended: an open page still gets that version,
    and `done` comes once the row has been quiet for EVENT_SETTLE_S."""
    world, client = own_world, own_world.client
    monkeypatch.setattr(routes, "EVENT_SETTLE_S", 1.5)
    monkeypatch.setattr(routes, "EVENT_INTERVAL_S", 0.1)
    bid = world.ids["ambiguous"]
    outcome = world.store.get(bid).outcome
    world.store.save_outcome(bid, "ambiguous", parse_outcome({**outcome, "note": "written after the end"}))
    before = client.get(f"/api/bisections/{bid}").json()["version"]
    events, started = [], time.monotonic()
    with client.stream("GET", f"/bisections/{bid}/events") as r:
        for line in r.iter_lines():
            if line.startswith("event: "):
                events.append(line[7:])
            elif line.startswith("data: "):
                events[-1] = (events[-1], line[6:])
                if events[-1][0] == "version" and len(events) == 3:
                    world.store.save_outcome(bid, "ambiguous", parse_outcome({**outcome, "revert_pr": 5}))  # published
    elapsed = time.monotonic() - started
    kinds = [kind for kind, _ in events]
    assert kinds[-1] == "done" and set(kinds[:-1]) == {"version"}, kinds
    versions = list(dict.fromkeys(data for _, data in events))
    assert (
        versions[0] == before
        and len(versions) == 2
        and versions[1] == client.get(f"/api/bisections/{bid}").json()["version"]
    )
    assert elapsed >= 1.5


def test_openapi_describes_the_api(app):
    spec = app.openapi()
    assert "/api/bisections" in spec["paths"] and "/api/bisections/{bisection_id}" in spec["paths"]
    ok = spec["paths"]["/api/bisections/{bisection_id}"]["get"]["responses"]["200"]["content"]["application/json"][
        "schema"
    ]
    assert ok["$ref"].endswith("/BisectionDetail")
    assert "/" not in spec["paths"]  # pages stay out of the API description


# -- access control ------------------------------------------------------------------------------


def test_testclient_sets_the_client_address(app):
    seen = []

    @app.get("/_whoami_test", include_in_schema=False)
    def whoami(request: __import__("fastapi").Request) -> dict:
        seen.append(request.client.host)
        return {}

    TestClient(app, client=REMOTE).get("/_whoami_test")
    assert seen == ["10.0.0.5"]


def test_remote_clients_need_the_token(world, app, openapi):
    remote = TestClient(app, client=REMOTE)
    bid = world.ids["found"]
    for path in ("/", f"/bisections/{bid}", "/api/bisections", f"/api/bisections/{bid}", f"/bisections/{bid}/events"):
        r = remote.get(path)
        assert r.status_code == 401, path
        assert r.headers["www-authenticate"].startswith("Bearer")
    check(openapi, remote.get("/api/bisections"), "/api/bisections")  # the 401 is described too
    assert remote.get("/api/bisections", headers={"Authorization": "Bearer wrong"}).status_code == 401
    assert remote.get("/api/bisections", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert remote.get(f"/bisections/{bid}", headers={"Authorization": f"Bearer {TOKEN}"}).status_code == 200
    assert remote.get("/healthz").status_code == 200  # only the dashboard is guarded here


def test_login_sets_a_cookie_that_is_not_the_token(app):
    remote = TestClient(app, client=REMOTE, follow_redirects=False)
    assert remote.get("/login", params={"token": "wrong"}).status_code == 401
    r = remote.get("/login", params={"token": TOKEN})
    assert r.status_code == 303 and r.headers["location"] == "/"
    cookie = r.cookies.get("revert_bisect_dashboard")
    assert cookie and TOKEN not in cookie and "httponly" in r.headers["set-cookie"].lower()
    assert remote.get("/").status_code == 200  # the client kept the cookie
    forged = TestClient(app, client=REMOTE, cookies={"revert_bisect_dashboard": TOKEN})
    assert forged.get("/").status_code == 401
    form = TestClient(app, client=REMOTE, follow_redirects=False)
    page = form.get("/login")
    assert page.status_code == 200 and 'type="password"' in page.text and 'for="login-token"' in page.text
    assert form.post("/login", data={"token": "wrong"}).status_code == 401
    assert (
        form.post("/login", data={"token": TOKEN}).status_code == 303 and form.get("/api/bisections").status_code == 200
    )


def test_without_a_token_remote_clients_get_403_saying_how(world, openapi):
    app = create_app(BotSettings(webhook_secret="whsec-dashboard-tests", db=world.db), handlers={})
    remote = TestClient(app, client=REMOTE)
    r = remote.get("/api/bisections")
    assert r.status_code == 403 and "REVERT_BISECT_DASHBOARD_TOKEN" in r.json()["detail"]
    check(OpenAPI.from_dict(app.openapi()), r, "/api/bisections")
    assert remote.get("/", headers={"Authorization": "Bearer anything"}).status_code == 403
    assert remote.get("/login", params={"token": "x"}).status_code == 403
    for host in ("127.0.0.1", "::1"):
        assert TestClient(app, client=(host, 1)).get("/api/bisections").status_code == 200


def test_settings_read_the_token_from_the_environment(monkeypatch):
    monkeypatch.setenv("REVERT_BISECT_DASHBOARD_TOKEN", "from-env-123")
    settings = BotSettings(webhook_secret="whsec-dashboard-tests")
    assert settings.dashboard_token.get_secret_value() == "from-env-123"
    assert "from-env-123" not in repr(settings)


@pytest.mark.parametrize(
    "host, loopback",
    [
        ("127.0.0.1", True),
        ("::1", True),
        ("127.8.0.1", True),
        ("::ffff:127.0.0.1", True),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("testclient", False),
        (None, False),
        ("", False),
    ],
)
def test_loopback(host, loopback):
    assert is_loopback(host) is loopback


# -- pure pieces -----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "n, culprit, workers", [(40, 23, 1), (40, 23, 3), (64, 1, 2), (64, 64, 4), (17, 9, 2), (100, 37, 5)]
)
def test_reconstructed_order_is_the_real_order_for_round_searches(n, culprit, workers):
    """Replay the engine in synchronous rounds; the timeline built from its runs alone (no graph) is in range order,
    for a search that takes a pass as proof (under auto a commit below a pass may be read: order_commits says so)."""
    graph, good, bad = linear_graph(n)
    problem = Problem(graph, good, bad, Settings(flake_rate=0.0))
    test = FlakyTest(culprit)
    state, runs, steps = State(), [], []
    while True:
        decision = decide(problem, state, runs, (), workers)
        state = decision.state
        if decision.outcome is not None:
            break
        for p in decision.probes:
            raw = test.run(p.sha)
            runs.append(Run(p.sha, p.kind, raw, p.round))
            steps.append(SimpleNamespace(id=len(steps) + 1, sha=p.sha, kind=p.kind.value, round=p.round))
    verdict_of = {s.id: ("bad" if r.raw.exit_code else "good") for s, r in zip(steps, runs)}
    order = order_commits(good, bad, steps, verdict_of)
    assert set(order) == {s.sha for s in steps} | {good, bad}
    assert [int(sha[1:]) for sha in order] == sorted(int(sha[1:]) for sha in order)


def test_chart_svg_is_accessible_and_marks_lines():
    chart = models.ChartData(
        points=[
            models.ChartPoint(position=0, sha="a" * 40, metric=0.1, verdict="good", kind="calibrate", step_id=1),
            models.ChartPoint(position=2, sha="b" * 40, metric=0.9, verdict="bad", kind="search", step_id=2),
            models.ChartPoint(position=2, sha="b" * 40, metric=0.8, verdict="bad", kind="confirm", step_id=3),
        ],
        positions=3,
        threshold=0.5,
        boundary=0.45,
    )
    svg = str(render_svg(chart))
    assert svg.count("<circle") == 3 and svg.count("<title>") >= 4 and 'role="img"' in svg and "aria-label" in svg
    assert 'data-line="threshold"' in svg and 'data-line="boundary"' in svg and "stroke-dasharray" in svg
    assert str(render_svg(models.ChartData(points=[], positions=2))) == ""
    assert 'data-band="bad"' in svg and 'data-band="good"' not in svg  # GOOD read once: no band
    same = models.ChartData(
        points=[models.ChartPoint(position=0, sha="a" * 40, metric=1.0, verdict="odd", kind="x", step_id=1)],
        positions=1,
    )
    assert "v-other" in str(render_svg(same))  # one value, one position: no division by zero


def test_age_and_run_urls():
    now = datetime(2026, 1, 2, tzinfo=UTC)
    assert views.age(datetime(2026, 1, 1), now) == "1 d ago"
    assert views.age(datetime(2026, 1, 1, 23, 59, 30, tzinfo=UTC), now) == "30 s ago"
    assert run_urls("gpu-3 (https://github.com/o/r/actions/runs/5) (http://x/y)") == [
        "https://github.com/o/r/actions/runs/5",
        "http://x/y",
    ]
    assert runner_label("gpu-3 (https://github.com/o/r/actions/runs/5)") == "gpu-3"
    assert run_urls(None) == [] and run_urls("local/wt-0") == []


def test_the_page_leads_with_the_answer(world, client, openapi):
    """The culprit (PR number linked, title, author), the A/B verdict and the chart come before the timeline."""
    bid = world.ids["published"]
    data = check(openapi, client.get(f"/api/bisections/{bid}"), "/api/bisections/{bisection_id}")
    assert data["culprit"] == world.repo.shas[5] and data["culprit_commit"] == {
        "sha": world.repo.shas[5],
        "pr": 1006,
        "title": "Change 6",
        "author": "Ada Dev",
        "url": "https://github.example/octo/gpu-kernels/pull/1006",
    }
    html = client.get(f"/bisections/{bid}").text
    culprit = html[html.index('id="culprit"') : html.index("</div>", html.index('id="culprit"'))]
    assert '<a href="https://github.example/octo/gpu-kernels/pull/1006">#1006</a> Change 6' in culprit
    assert "by Ada Dev" in culprit and world.repo.shas[5][:12] in culprit and "posterior 0.9950" in culprit
    order = [
        html.index(marker)
        for marker in ('id="culprit"', 'id="ab-result"', 'id="chart-h"', 'id="timeline"', 'id="rounds"')
    ]
    assert order == sorted(order), order
    assert "proven" in html[order[1] : order[2]]
    running = client.get(f"/api/bisections/{world.ids['running']}").json()
    assert running["culprit"] is None  # no answer yet: the page shows the engine's guess instead
    assert "Best guess so far" in client.get(f"/bisections/{world.ids['running']}").text


def test_an_answer_short_of_found_shows_its_best_guess_never_a_culprit(own_world, openapi):
    """Issue 33: the API's `culprit` (the summary's, the detail's, the stored outcome's) is null unless the status is
    found, since a script reads it to revert: an inconclusive search's commit is its `best_guess`, on the page too."""
    store, client = own_world.store, own_world.client
    good, parent, guess, bad = "1" * 40, "8" * 40, "9" * 40, "2" * 40
    commits = [[parent, "Bo", "Change 8 (#1008)"], [guess, "Ada Dev", "Change 9 (#1009)"], [bad, "Bo", "Change 10"]]
    config = {"command": ["./t.sh"]}
    new = NewBisection("/r", "v1", "main", good, bad, ["./t.sh"], config, commits=commits, tests=(Entry("./t.sh"),))
    bid = store.create(new, "calibrating")
    steps = store.add_steps(
        bid, [NewStep(bad, "calibrate", 1), NewStep(guess, "search", 2), NewStep(parent, "search", 2)]
    )
    for step_id, (verdict, code) in zip(steps, [("bad", 1), ("bad", 1), ("good", 0)]):
        store.finish_step(step_id, StepReport(code, None, None, verdict, "local/wt-0", 1.0, "log"))
    said = "stopped after 3 runs without reaching confidence 0.99 (best guess P=0.930)"
    told = outcome_model(Outcome(Status.INCONCLUSIVE, said, best_guess=guess, confidence=0.93))
    (test,) = entries(store.get(bid).tests)
    ended = replace(test, state=State(Phase.DONE), guess=guess, guess_probability=0.93, status=Status.INCONCLUSIVE)
    store.save_tests(bid, [replace(ended, outcome=told)])  # as the driver writes it: the bisection derives the rest
    assert store.get(bid).status == "inconclusive" and store.get(bid).phase == "done"
    data = check(openapi, client.get(f"/api/bisections/{bid}"), "/api/bisections/{bisection_id}")
    assert data["summary"]["culprit"] is None and data["summary"]["best_guess"] == guess
    assert data["culprit"] is None and data["culprit_commit"] is None and data["chart"]["culprit"] is None
    assert data["best_guess"] == guess and data["best_guess_subject"] == "Change 9 (#1009)"
    assert data["best_guess_commit"] == {
        "sha": guess,
        "pr": 1009,
        "title": "Change 9",
        "author": "Ada Dev",
        "url": None,
    }
    assert data["outcome"]["culprit"] is None and data["outcome"]["best_guess"] == guess
    assert data["confidence"] == 0.93
    assert [e["role"] for e in data["timeline"]] == ["good", "tested", "best_guess", "bad"]
    html = client.get(f"/bisections/{bid}").text
    assert 'id="culprit"' not in html and 'data-line="culprit"' not in html
    shown = html[html.index('id="best-guess"') : html.index("</div>", html.index('id="best-guess"'))]
    assert "Best guess" in shown and "Change 9" in shown and "P = 0.9300" in shown and "nothing is reverted" in shown
    listed = check(openapi, client.get("/api/bisections"), "/api/bisections")["items"]
    (mine,) = [i for i in listed if i["id"] == bid]
    assert mine["culprit"] is None and mine["best_guess"] == guess
    row = client.get("/").text.split(f'data-id="{bid}"')[1].split("</tr>")[0]
    assert f'best guess <code class="sha">{guess[:7]}</code>' in row
    # an ambiguous answer's last candidate is a best guess too: any of the candidates may be the first bad commit
    ambiguous = client.get(f"/api/bisections/{own_world.ids['ambiguous']}").json()
    assert ambiguous["summary"]["culprit"] is None and ambiguous["culprit"] is None
    assert ambiguous["best_guess"] == ambiguous["candidates"][-1] == ambiguous["summary"]["best_guess"]
    assert ambiguous["best_guess_commit"]["sha"] == ambiguous["best_guess"]


def test_the_page_states_the_runs_and_their_cost_beside_git_bisect_run(world, client, openapi):
    """GPU-hours as the headline: every finished run on the bisect runner (CI's readings are free), the hours they
    held it, and git bisect run's estimate on the same range."""
    bid = world.ids["published"]
    data = check(openapi, client.get(f"/api/bisections/{bid}"), "/api/bisections/{bisection_id}")
    ran = [s for s in data["steps"] if s["state"] in ("done", "lost") and s["kind"] != "ci"]
    assert ran and data["cost"].startswith(f"{len(ran)} runs, ")
    # runs of seconds, on a runner of no stated GPUs: minutes on both sides, to compare at a glance
    assert "runner-minutes; `git bisect run` on the same range: ~" in data["cost"]
    assert data["cost"].endswith(" runner-minutes, verifying nothing"), data["cost"]
    html = client.get(f"/bisections/{bid}").text
    shown = html[html.index('id="cost"') : html.index("</span>", html.index('id="cost"'))]
    assert f"{len(ran)} runs, " in shown and "git bisect run on the same range" in shown


def test_untested_runs_collapse_into_one_row(world, client):
    def entry(i, role):
        return models.TimelineEntry(position=i, sha=f"{i:040x}", role=role, verdicts=[], metrics=[], runs=0, running=0)

    roles = ["good", "untested", "untested", "untested", "tested", "untested", "culprit", "untested", "untested", "bad"]
    timeline = [entry(i, r) for i, r in enumerate(roles)]
    rows = detail.collapse_untested(timeline)
    assert [[e.position for e in r] if isinstance(r, list) else r.position for r in rows] == [
        0,
        [1, 2, 3],
        4,
        5,
        6,
        [7, 8],
        9,
    ]
    assert detail.collapse_untested(timeline, shortest=1)[3] == [timeline[5]]
    # on the page: one row per run of untested commits, every commit still there (in the run's <details>)
    bid = world.ids["running"]
    data = client.get(f"/api/bisections/{bid}").json()
    html = client.get(f"/bisections/{bid}").text
    gaps = re.findall(r"(\d+) commits not tested", html)
    untested = [e for e in data["timeline"] if e["role"] == "untested"]
    assert gaps and sum(map(int, gaps)) == len(untested) and len(gaps) < len(untested)
    assert html.count('<tr class="timeline-gap">') == len(gaps)
    for e in data["timeline"]:
        assert html.count(f'data-sha="{e["sha"]}"') == 1


def test_chart_marks_the_culprit(world, client):
    data = client.get(f"/api/bisections/{world.ids['found']}").json()
    culprit = next(e["position"] for e in data["timeline"] if e["role"] == "culprit")
    assert data["chart"]["culprit"] == culprit
    assert 'data-line="culprit"' in client.get(f"/bisections/{world.ids['found']}").text
    assert 'data-line="culprit"' not in client.get(f"/bisections/{world.ids['running']}").text


def test_a_sampled_metric_is_drawn_as_strips_against_good_and_bad_bands():
    def point(pos: int, metric: float, step: int) -> models.ChartPoint:
        return models.ChartPoint(
            position=pos, sha=f"{pos:040d}", metric=metric, verdict="good", kind="search", step_id=step
        )

    readings = {0: [100.1, 99.8, 100.4], 5: [99.9, 100.2, 100.0], 6: [96.2, 95.9, 96.1], 9: [96.0, 96.3]}
    points = [point(pos, v, i) for i, (pos, values) in enumerate(readings.items()) for v in values]
    svg = str(render_svg(models.ChartData(points=points, positions=10, higher_is_worse=False, culprit=6)))
    assert 'data-band="good"' in svg and "GOOD&#39;s readings: 99.8 to 100.4 (3 runs)" in svg
    assert 'data-band="bad"' in svg and "BAD&#39;s readings: 96 to 96.3 (2 runs)" in svg
    # a median tick for each commit read three times or more, none for BAD's two readings
    assert 'data-median="0"' in svg and 'data-median="5"' in svg and 'data-median="6"' in svg
    assert 'data-median="9"' not in svg and "median 96.1 of 3 runs" in svg
