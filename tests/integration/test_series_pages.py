"""The benchmarks' series on the dashboard (/series, /series/<owner>/<name>/<test>/<metric>) and their JSON twins
(/api/series...), validated against the app's own OpenAPI description: a series with a planted slowdown shows its
change point with the effect and each side's mean and interval, drawn as bands on the chart, the runs without a
reading as gaps, the bisection its change point led to once one exists; a flat series shows none."""

from __future__ import annotations

import random
import re
import shutil
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace

import pytest
from openapi_core import OpenAPI
from starlette.testclient import TestClient

from bot.adapters.store.db import connect
from bot.adapters.store.series import SeriesPoints
from bot.adapters.store.store import NewBisection, Store
from bot.app import create_app
from bot.ports.store import SeriesPoint
from bot.settings import BotSettings
from tests.integration.test_dashboard import LOCAL, check
from tests.support import ROOT

REPO = "sgl-project/sglang"
TEST = "text-models-perf"
SLOW = "llama-3.1-8b_bs64_output_throughput"  # 6% slower from run SHIFT on
FLAT = "qwen2-57b-a14b_bs64_output_throughput"
UNDECLARED = "decode/bs64"  # a series no loaded policy declares (with a `/`: written `~` in its address)
RUNS, SHIFT, GAP = 30, 20, 7
T0 = datetime(2026, 6, 1, 14, tzinfo=UTC)
RUN0 = 17_000_000_000


def run_id(k: int) -> int:
    return RUN0 + 1000 * k


def sha(k: int) -> str:
    return f"{k:02x}" * 20


@pytest.fixture(scope="module")
def dashboard(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("series-pages")
    policies = tmp / "policies"
    policies.mkdir()
    shutil.copy(ROOT / "policies" / "sglang-perf.yaml", policies)
    db = f"sqlite:///{tmp / 'store.db'}"
    engine = connect(db)
    rng = random.Random(7)
    points = []
    for k in range(RUNS):
        base = {SLOW: 4281.0 * (0.94 if k >= SHIFT else 1.0), FLAT: 2617.0, UNDECLARED: 15.0}
        for metric, level in base.items():
            value = None if k == GAP and metric != UNDECLARED else level * (1 + rng.gauss(0, 0.01))
            started = T0 + timedelta(days=2 * k)
            url = f"https://github.com/{REPO}/actions/runs/{run_id(k)}"
            points.append(SeriesPoint(REPO, TEST, metric, run_id(k), 1, sha(k), started, value, url))
    SeriesPoints(engine).record(points)
    origin = {
        "repo": REPO,
        "series": {"test": TEST, "metric": SLOW, "run_before": run_id(SHIFT - 1), "run_after": run_id(SHIFT)},
    }
    bisection = Store(engine).create(
        NewBisection("/clones/sglang", "g", "b", sha(SHIFT - 1), sha(SHIFT), ["true"], {}, origin=origin), "searching"
    )
    app = create_app(BotSettings(webhook_secret="whsec-series", db=db, policies=policies), handlers={})
    return SimpleNamespace(
        client=TestClient(app, client=LOCAL),
        openapi=OpenAPI.from_dict(app.openapi()),
        bisection=bisection,
        db=db,
        policies=policies,
    )


def page_of(metric: str, test: str = TEST) -> str:
    return f"/series/{REPO}/{test.replace('/', '~')}/{metric.replace('/', '~')}"


def test_the_index_lists_every_watched_metric_and_the_nav_links_it(dashboard):
    data = check(dashboard.openapi, dashboard.client.get("/api/series"), "/api/series")
    by_metric = {i["metric"]: i for i in data["items"]}
    assert set(by_metric) == {SLOW, FLAT, UNDECLARED}
    slow = by_metric[SLOW]
    assert (slow["runs"], slow["readings"], slow["direction"], slow["last_run"]) == (
        RUNS,
        RUNS - 1,
        "lower_is_worse",
        run_id(RUNS - 1),
    )
    assert slow["page"] == page_of(SLOW) and slow["api"] == "/api" + page_of(SLOW)
    assert by_metric[UNDECLARED]["direction"] is None and by_metric[UNDECLARED]["page"].endswith("/decode~bs64")
    html = dashboard.client.get("/series").text
    assert html.count('class="series-row"') == 3 and f'href="{page_of(SLOW)}"' in html
    assert '<a href="/series">Series</a>' in dashboard.client.get("/").text  # the dashboard's nav links the index


def test_a_planted_slowdown_is_a_change_point_with_its_bands_and_its_bisection(dashboard):
    data = check(
        dashboard.openapi,
        dashboard.client.get("/api" + page_of(SLOW)),
        "/api/series/{owner}/{name}/{test}/{metric}",
    )
    assert (data["repository"], data["test"], data["metric"], data["direction"]) == (REPO, TEST, SLOW, "lower_is_worse")
    assert len(data["points"]) == RUNS and data["points"][GAP]["value"] is None  # a crash kept as a gap
    assert [p["run_id"] for p in data["points"]] == [run_id(k) for k in range(RUNS)]
    [change] = data["changes"]
    assert (change["run_before"], change["run_after"], change["index"]) == (run_id(SHIFT - 1), run_id(SHIFT), SHIFT)
    assert (change["sha_before"], change["sha_after"]) == (sha(SHIFT - 1), sha(SHIFT))
    assert change["low"] < -0.06 < change["high"] < -0.04 and change["regression"] is True
    assert change["effect_text"].startswith(f"{change['effect'] * 100:+.1f}% (")
    before, after = change["before"], change["after"]
    assert (before["first"], before["last"], before["runs"]) == (0, SHIFT - 1, SHIFT - 1)  # the gap has no reading
    assert (after["first"], after["last"], after["runs"]) == (SHIFT, RUNS - 1, RUNS - SHIFT)
    for side, level in ((before, 4281.0), (after, 4281.0 * 0.94)):
        assert side["low"] < side["mean"] < side["high"] and side["low"] < level < side["high"]
    assert abs(after["mean"] / before["mean"] - 1 - change["effect"]) < 1e-12
    assert change["bisections"] == [
        {"id": dashboard.bisection, "status": None, "phase": "searching", "page": f"/bisections/{dashboard.bisection}"}
    ]
    assert data["metrics_tested"] == 3 and data["false_alarm_rate"] == 0.01

    html = dashboard.client.get(page_of(SLOW)).text
    svg = html[html.index("<svg") : html.index("</svg>")]
    assert svg.count('class="point series-point"') == RUNS - 1 and f'data-gap="{run_id(GAP)}"' in svg
    assert f'data-band="0-{SHIFT - 1}"' in svg and f'data-band="{SHIFT}-{RUNS - 1}"' in svg
    assert 'class="change regression"' in svg and 'role="img"' in svg and "<desc" in svg
    assert re.search(rf'data-run-before="{run_id(SHIFT - 1)}" data-run-after="{run_id(SHIFT)}"', html)
    assert f'href="/bisections/{dashboard.bisection}"' in html
    assert html.count('class="point-row"') == RUNS and "no reading" in html


def test_a_flat_series_and_an_undeclared_one_show_no_change_point(dashboard):
    for metric in (FLAT, UNDECLARED):
        data = check(
            dashboard.openapi,
            dashboard.client.get("/api" + page_of(metric)),
            "/api/series/{owner}/{name}/{test}/{metric}",
        )
        assert data["changes"] == [] and len(data["points"]) == RUNS
        html = dashboard.client.get(page_of(metric)).text
        assert "No change point in this series." in html and "data-change" not in html
    assert (
        check(
            dashboard.openapi,
            dashboard.client.get("/api" + page_of(UNDECLARED)),
            "/api/series/{owner}/{name}/{test}/{metric}",
        )["direction"]
        is None
    )


def test_an_unknown_series_is_a_404_saying_so(dashboard):
    r = dashboard.client.get(f"/api/series/{REPO}/{TEST}/nope")
    assert (
        r.status_code == 404
        and "no series nope" in check(dashboard.openapi, r, "/api/series/{owner}/{name}/{test}/{metric}")["detail"]
    )
    page = dashboard.client.get(f"/series/other/repo/{TEST}/{SLOW}")
    assert page.status_code == 404 and "keeps no series of other/repo" in page.text


def test_openapi_describes_the_series_api(dashboard):
    spec = dashboard.client.app.openapi()
    ok = spec["paths"]["/api/series/{owner}/{name}/{test}/{metric}"]["get"]["responses"]["200"]["content"][
        "application/json"
    ]["schema"]
    assert ok["$ref"].endswith("/SeriesDetail") and "/api/series" in spec["paths"]
    assert "/series" not in spec["paths"]  # pages stay out of the API description
