"""The dashboard in a real headless Chromium (Debian's `chromium` package, driven by Playwright for Python):
rows, the timeline and chart, the live update over server-sent events, screenshots, a phone viewport, dark mode.

Playwright's own browser downloads are never used (`playwright install` is not run): the browser is
/usr/bin/chromium, which .ci/run installs with apt-get."""

from __future__ import annotations

import hashlib
import shutil
import struct
import zlib
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace

import httpx
import pytest
import sqlalchemy

from bot.adapters.git.repo import GitRepo
from bot.adapters.store.db import connect
from bot.adapters.store.store import NewBisection, NewStep, StepReport, Store
from bot.app import create_app
from bot.domain.bisect.ledger import Entry
from bot.service import setup
from bot.service.config import BisectConfig
from bot.settings import BotSettings
from runners.spec import Needs
from scenarios.synthetic import build
from tests.support.hand_rows import progress
from tests.support.net import serving
from tests.support.sandbox import wait_for
from tests.support.world import deliver_comment, open_reverts

CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"


@pytest.fixture(scope="module", autouse=True)
def chromium_installed():
    """No browser fails these tests, naming what to install: a skip would let a bare `pytest` pass without them."""
    if not Path(CHROMIUM).exists():
        pytest.fail(
            f"the dashboard's browser tests need Debian's chromium ({CHROMIUM} is missing): "
            "apt-get install -y chromium (.ci/run installs it; never `playwright install`)",
            pytrace=False,
        )


def _report(
    verdict: str,
    exit_code: int | None,
    metric: float | None = None,
    runner: str = "local/wt-0",
    infra: str | None = None,
    duration_s: float = 2.5,
) -> StepReport:
    return StepReport(exit_code, metric, infra, verdict, runner, duration_s, "log", "e" * 64, True)


@contextmanager
def _serving(db: str):
    """The bot's app on `db`, served by uvicorn on a loopback port bound before it starts: yields its base URL."""
    app = create_app(BotSettings(webhook_secret="whsec-browser-tests", db=db), handlers={})
    with serving(app, timeout_graceful_shutdown=1) as served:
        yield served.url


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """A store with a finished bisection (metric test) and a running one, served by uvicorn on loopback."""
    with _served_store(tmp_path_factory.mktemp("browser")) as world:
        yield world


@contextmanager
def _served_store(home: Path):
    home.mkdir(parents=True, exist_ok=True)
    db = f"sqlite:///{home / 'store.db'}"
    store = Store(connect(db))
    repo = build(home / "repo", 12, 6)
    git = GitRepo(repo.path)
    config = BisectConfig(command=tuple(repo.command()), metric_file=True, threshold=0.002, workers=2)
    origin = {"repo": "octo/gpu-kernels", "test": "test_kl_divergence"}

    done = setup.create(store, git, repo.good, repo.bad, config, origin=origin).id
    plan = [
        (repo.good, "calibrate", 1, "good", 0.0003),
        (repo.bad, "calibrate", 1, "bad", 0.0065),
        (repo.good, "calibrate", 2, "good", 0.0004),
        (repo.bad, "calibrate", 2, "bad", 0.0066),
        (repo.shas[3], "search", 3, "good", 0.0003),
        (repo.shas[7], "search", 3, "bad", 0.0064),
        (repo.shas[5], "search", 4, "bad", 0.0063),
        (repo.shas[4], "search", 5, "good", 0.0005),
        (repo.shas[5], "confirm", 6, "bad", 0.0062),
        (repo.shas[4], "confirm", 6, "good", 0.0004),
    ]
    ids = store.add_steps(done, [NewStep(sha, kind, rnd) for sha, kind, rnd, _, _ in plan])
    for step_id, (_, _, _, verdict, metric) in zip(ids, plan):
        store.finish_step(
            step_id, _report(verdict, 0, metric, "gpu-1 (https://github.example/octo/gpu-kernels/actions/runs/9)")
        )
    progress(
        store,
        done,
        status="found",
        boundary=0.0034,
        flake_rate=0.0,
        guess=repo.shas[5],
        guess_probability=0.995,
        outcome={
            "message": f"the first bad commit is {repo.shas[5][:12]}",
            "culprit": repo.shas[5],
            "confidence": 0.995,
            "candidates": [],
        },
    )

    running = setup.create(store, git, repo.good, repo.bad, config, origin=origin).id
    cal = store.add_steps(running, [NewStep(repo.good, "calibrate", 1), NewStep(repo.bad, "calibrate", 1)])
    store.finish_step(cal[0], _report("good", 0, 0.0003))
    store.finish_step(cal[1], _report("bad", 0, 0.0065))
    probe = store.add_steps(running, [NewStep(repo.shas[5], "search", 2)])[0]
    progress(store, running, "searching", boundary=0.0034, guess=repo.shas[5], guess_probability=0.3)

    with _serving(db) as base:
        yield SimpleNamespace(base=base, store=store, done=done, running=running, probe=probe, plan=plan, repo=repo)


@pytest.fixture(scope="module")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        yield b
        b.close()


@pytest.fixture
def page(browser):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    errors: list[str] = []
    pg.on("pageerror", lambda exc: errors.append(str(exc)))
    yield pg
    context.close()
    assert not errors, errors


def decode_png(data: bytes) -> tuple[int, int, int, bytes]:
    """(width, height, bytes per pixel, raw pixels) of an 8-bit, non-interlaced RGB(A) PNG: enough for screenshots."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    pos, idat, width = 8, [], 0
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        chunk = data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            width, height, depth, colour, _, _, interlace = struct.unpack(">IIBBBBB", chunk)
            assert depth == 8 and colour in (2, 6) and interlace == 0, (depth, colour, interlace)
            bpp = 3 if colour == 2 else 4
        elif kind == b"IDAT":
            idat.append(chunk)
        pos += 12 + length
    raw = zlib.decompress(b"".join(idat))
    stride = width * bpp
    out = bytearray(stride * height)
    prev = bytearray(stride)
    for y in range(height):
        ftype = raw[y * (stride + 1)]
        line = bytearray(raw[y * (stride + 1) + 1 : (y + 1) * (stride + 1)])
        if ftype == 1:
            for i in range(bpp, stride):
                line[i] = (line[i] + line[i - bpp]) & 255
        elif ftype == 2:
            line = bytearray((a + b) & 255 for a, b in zip(line, prev))
        elif ftype == 3:
            for i in range(stride):
                left = line[i - bpp] if i >= bpp else 0
                line[i] = (line[i] + ((left + prev[i]) >> 1)) & 255
        elif ftype == 4:
            for i in range(stride):
                a = line[i - bpp] if i >= bpp else 0
                b = prev[i]
                c = prev[i - bpp] if i >= bpp else 0
                p = a + b - c
                pa, pb, pc = abs(p - a), abs(p - b), abs(p - c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 255
        out[y * stride : (y + 1) * stride] = line
        prev = line
    return width, height, bpp, bytes(out)


def assert_not_blank(path: Path, min_colours: int = 8) -> None:
    data = path.read_bytes()
    assert len(data) > 5000, f"{path.name}: {len(data)} bytes"
    width, height, bpp, pixels = decode_png(data)
    colours = {pixels[i : i + 3] for i in range(0, len(pixels), bpp * 7)}
    assert len(colours) >= min_colours, f"{path.name}: {len(colours)} colours in {width}x{height}"


def test_list_page_shows_the_rows(served, page, tmp_path):
    page.goto(served.base + "/")
    rows = page.locator("tr.bisection-row")
    assert rows.count() == 2
    assert page.locator("h1").inner_text() == "Bisections"
    assert "test_kl_divergence" in rows.first.inner_text() and "octo/gpu-kernels" in rows.first.inner_text()
    page.get_by_label("State").select_option("found")
    page.get_by_role("button", name="Filter").click()
    page.wait_for_url("**state=found**")
    assert page.locator("tr.bisection-row").count() == 1
    shot = tmp_path / "list.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)


def test_bisection_page_timeline_chart_and_threshold(served, page, tmp_path):
    page.goto(f"{served.base}/bisections/{served.done}")
    repo = served.repo
    assert page.locator("#timeline .timeline-row").count() == 1 + len(repo.shas)  # GOOD and every commit of the range
    assert page.locator("svg.chart circle").count() == len(served.plan)  # every run had a metric
    threshold = page.locator('svg.chart line[data-line="threshold"]')
    assert threshold.count() == 1 and threshold.get_attribute("stroke-dasharray")
    assert page.locator('svg.chart line[data-line="boundary"]').count() == 1
    assert page.locator("svg.chart circle title").first.text_content()  # tooltips
    # the timeline is in range order, the tested ones: GOOD, shas[3], shas[4] (good), culprit shas[5], shas[7], BAD
    order = page.locator("#timeline .timeline-row").evaluate_all("rows => rows.map(r => r.dataset.sha)")
    assert order == [repo.good, *repo.shas]
    tested = page.locator("#timeline tr.timeline-row:not(.role-untested)").evaluate_all(
        "rows => rows.map(r => r.dataset.sha)"
    )
    assert tested == [repo.good, repo.shas[3], repo.shas[4], repo.shas[5], repo.shas[7], repo.bad]
    # the untested runs (positions 1-3 and 9-11) are one row each, their commits hidden until asked for; a lone one
    # keeps its row
    gaps = page.locator("#timeline tr.timeline-gap")
    assert [" ".join(t.split()) for t in gaps.all_inner_texts()] == [
        "1–3 3 commits not tested",
        "9–11 3 commits not tested",
    ]
    assert "not tested" in page.locator(f'#timeline tr.timeline-row[data-sha="{repo.shas[6]}"]').inner_text()
    hidden = page.locator(f'#timeline [data-sha="{repo.shas[1]}"]')
    assert not hidden.is_visible()
    gaps.first.locator("summary").click()
    assert hidden.is_visible() and "not tested" in hidden.inner_text()
    assert "culprit" in page.locator(f'#timeline tr[data-sha="{repo.shas[5]}"]').inner_text()
    assert not page.locator("#rounds").is_visible()  # a finished bisection's rounds are folded away, one click off
    page.locator("#rounds-section > summary").click()
    assert page.locator("#rounds").is_visible() and page.locator("#rounds tbody.round").count() == 6
    assert page.locator('#rounds a[href="https://github.example/octo/gpu-kernels/actions/runs/9"]').count() == len(
        served.plan
    )
    shot = tmp_path / "detail.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
    assert "found" in page.locator("#state").inner_text()


def test_live_update_without_navigation(page, tmp_path):
    with _served_store(tmp_path / "own") as served:  # its writes are its own: the module's store stays as built
        _live_update_without_navigation(served, page, tmp_path)


def _live_update_without_navigation(served, page, tmp_path):
    with page.expect_response(lambda r: r.url.endswith(f"/bisections/{served.running}/events"), timeout=30_000):
        page.goto(f"{served.base}/bisections/{served.running}")  # ... and the page's event stream is open
    assert page.locator("main").get_attribute("data-live") == "true"
    row = page.locator(f'#rounds tr[data-step="{served.probe}"]')
    assert row.is_visible() and "running" in row.inner_text()  # while it runs, the rounds are open
    gap = page.locator("#timeline details.gap").first
    gap_id = gap.get_attribute("id")
    gap.locator("summary").click()  # the reader opens a run of untested commits: the live update keeps it open
    page.evaluate("window.__same_document = true")
    served.store.finish_step(
        served.probe, _report("bad", 0, 0.0063, "gpu-7 (https://github.example/octo/gpu-kernels/actions/runs/77)")
    )
    page.wait_for_function(
        f"""() => {{ const r = document.querySelector('#rounds tr[data-step="{served.probe}"]');
                    return r && r.querySelector('.verdict.bad') !== null; }}""",
        timeout=8000,
    )
    assert page.evaluate("window.__same_document") is True  # swapped in place, not reloaded
    assert page.locator(f"#{gap_id}").evaluate("el => el.open") is True
    assert page.locator('a[href="https://github.example/octo/gpu-kernels/actions/runs/77"]').count() == 1
    assert page.locator("svg.chart circle").count() == 3
    # the bisection finishes: the page says so and stops listening
    progress(
        served.store,
        served.running,
        status="found",
        outcome={"message": "found it", "culprit": served.repo.shas[5], "confidence": 0.99},
    )
    page.wait_for_function("() => document.getElementById('main').dataset.live === 'false'", timeout=8000)
    assert "found it" in page.locator("#message").inner_text()
    shot = tmp_path / "live.png"
    page.screenshot(path=str(shot))
    assert_not_blank(shot)


def test_phone_viewport_has_no_horizontal_overflow(served, browser, tmp_path):
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True, has_touch=True
    )
    pg = context.new_page()
    try:
        for path in ("/", f"/bisections/{served.done}"):
            pg.goto(served.base + path)
            widths = pg.evaluate(
                "() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]"
            )
            assert max(widths[:2]) <= widths[2], (path, widths)
        assert pg.locator(".table-wrap").first.evaluate("e => getComputedStyle(e).overflowX") == "auto"
        shot = tmp_path / "phone.png"
        pg.screenshot(path=str(shot), full_page=False)
        assert_not_blank(shot)
    finally:
        context.close()


def test_dark_mode_changes_the_background(served, browser):
    colours = {}
    for scheme in ("light", "dark"):
        context = browser.new_context(color_scheme=scheme)
        pg = context.new_page()
        pg.goto(f"{served.base}/bisections/{served.done}")
        colours[scheme] = pg.evaluate("() => getComputedStyle(document.body).backgroundColor")
        context.close()
    assert colours["light"] != colours["dark"]
    assert colours["light"] == "rgb(255, 255, 255)"


def test_keyboard_skip_link_and_focus(served, page):
    page.goto(served.base + "/")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.className") == "skip-link"
    assert page.evaluate("() => getComputedStyle(document.activeElement).left") != "-999px"  # visible when focused
    page.keyboard.press("Enter")
    assert page.evaluate("() => document.activeElement.id") == "main"


@pytest.mark.e2e  # a whole story: the miniature incident bisected through the sandbox, watched in the browser
def test_a_real_sandbox_bisection_in_the_browser(world, page, tmp_path):
    """The bot's own dashboard while it bisects the miniature incident through the sandbox: the page goes
    live, follows the bisection to its end without navigation, and then shows the whole range."""
    scenario = world["scenario"]
    deliver_comment(
        world,
        "sandbox-maintainer",
        f"/revert-bisect decode-cache-hit good={scenario.good[:12]}",
        scenario.followup["number"],
    )
    bisection = wait_for(lambda: httpx.get(world["bot"] + "/api/bisections", timeout=10).json()["items"], timeout=60)[
        0
    ]["id"]
    page.goto(f"{world['bot']}/bisections/{bisection}")
    assert page.locator("main").get_attribute("data-live") == "true"
    wait_for(lambda: open_reverts(world), timeout=300)
    page.wait_for_function("document.querySelector('main').dataset.live === 'false'", timeout=30_000)  # followed live
    page.wait_for_selector(
        "#pr-section", state="attached", timeout=30_000
    )  # and the publication recorded after the end
    assert "found" in page.locator("#state").inner_text()
    assert page.locator("#timeline .timeline-row").count() == len(scenario.shas)  # GOOD and every commit of the range
    culprit = page.locator(f'#timeline tr[data-sha="{scenario.culprit}"]')
    assert "culprit" in culprit.inner_text() and f"#{scenario.culprit_pr}" in culprit.inner_text()
    with sqlalchemy.create_engine(f"sqlite:///{world['tmp'] / 'bot.db'}").connect() as conn:
        runs = conn.execute(
            sqlalchemy.text(
                "SELECT count(*) FROM steps WHERE metric IS NOT NULL AND kind NOT IN ('ab_head', 'ab_revert')"
            )
        ).scalar()
    assert runs and page.locator("svg.chart circle").count() == runs
    assert page.locator('svg.chart line[data-line="threshold"]').count() == 1
    assert page.locator('#rounds a[href*="/actions/runs/"]').count() >= runs  # each run links to its Actions run
    assert f"Reverts mini-sglang/mini-sglang#{scenario.culprit_pr}" in page.content()  # the PR body as published
    shot = tmp_path / "sandbox-bisection.png"
    page.screenshot(path=str(shot), full_page=True)
    assert_not_blank(shot)
    page.goto(world["bot"] + "/")
    assert "mini-sglang/mini-sglang" in page.locator("tr.bisection-row").first.inner_text()


def _long_range(store: Store, n: int = 240, culprit: int = 170, workers: int = 3) -> tuple[int, int]:
    """A finished bisection shaped like SGLang's incident: n first-parent commits with PR titles and authors,
    2 calibration rounds, a k=3 search, 4 confirmations and the A/B: (its id, how many commits were run).
    (The dashboard never runs git, so the shas need no repository.)"""
    shas = [hashlib.sha1(f"commit {i}".encode()).hexdigest() for i in range(n + 1)]
    titles = [
        "[Deps] Require torch>=2.5",
        "Refactor the radix cache's eviction",
        "Speed up FlashInfer decode for small batches",
    ]
    commits = [
        [shas[i], "alice" if i == culprit else "bob", f"{titles[i % 3]} (#{31000 + i})"] for i in range(1, n + 1)
    ]
    commits[culprit - 1][2] = "[Mamba] Fix track boundary seqlen under overlap scheduler (#31369)"
    bid = store.create(
        NewBisection(
            "/srv/sglang",
            "v0.5.5",
            "main",
            shas[0],
            shas[n],
            ["pytest", "test/srt/test_mamba.py"],
            BisectConfig(
                command=("pytest", "test/srt/test_mamba.py"),
                metric_regex=r"kl=(?P<value>\S+)",
                threshold=0.002,
                workers=workers,
                needs=Needs(gpus=4).to_json(),
            ).to_json(),
            origin={"repo": "sgl-project/sglang", "test": "test_decode_cache_hit"},
            commits=commits,
            tests=(Entry("test_decode_cache_hit"),),
        ),
        "calibrating",
    )
    plan = [(0, "calibrate", 1), (n, "calibrate", 1), (0, "calibrate", 2), (n, "calibrate", 2)]
    lo, hi, rnd = 0, n, 3
    while hi - lo > 1:
        probes = sorted({lo + (hi - lo) * j // (workers + 1) for j in range(1, workers + 1)} - {lo, hi})
        plan += [(p, "search", rnd) for p in probes]
        lo = max([lo] + [p for p in probes if p < culprit])
        hi = min([hi] + [p for p in probes if p >= culprit])
        rnd += 1
    plan += [
        (culprit, "confirm", rnd),
        (culprit - 1, "confirm", rnd),
        (culprit, "confirm", rnd + 1),
        (culprit - 1, "confirm", rnd + 1),
    ]
    plan += [(n, "ab_head", rnd + 2), (None, "ab_revert", rnd + 2)]
    ids = store.add_steps(bid, [NewStep(shas[i] if i is not None else "f" * 40, kind, r) for i, kind, r in plan])
    for step_id, (i, _kind, _) in zip(ids, plan):
        bad = i is not None and i >= culprit
        store.finish_step(  # 15 minutes a run, as SGLang's KL test takes on its 4-GPU runner
            step_id, _report("bad" if bad else "good", int(bad), 0.0065 if bad else 0.0003, duration_s=900.0)
        )
    progress(
        store,
        bid,
        status="found",
        boundary=0.0034,
        flake_rate=0.0,
        guess=shas[culprit],
        guess_probability=0.999,
        outcome={
            "message": f"{shas[culprit][:12]} is the first bad commit",
            "culprit": shas[culprit],
            "confidence": 0.999,
            "candidates": [],
            "culprit_pr": 31369,
            "revert_pr": 31622,
            "revert_pr_url": "https://github.com/sgl-project/sglang/pull/31622",
            "ab": {
                "head": shas[n],
                "revert": "f" * 40,
                "passed": True,
                "head_verdicts": ["bad"],
                "revert_verdicts": ["good"],
            },
        },
    )
    return bid, len({i for i, kind, _ in plan if not kind.startswith("ab_")})


def test_a_240_commit_bisection_leads_with_the_answer(browser, tmp_path):
    """SGLang's range: the culprit (PR, title, author), the A/B verdict and the chart are on the first screen,
    untested runs are one row each, and the whole page is under two screens."""
    db = f"sqlite:///{tmp_path / 'long.db'}"
    bid, tested = _long_range(Store(connect(db)))
    viewport = {"width": 1280, "height": 900}
    context = browser.new_context(viewport=viewport)
    page = context.new_page()
    try:
        with _serving(db) as base:
            page.goto(f"{base}/bisections/{bid}")
            culprit = page.locator("#culprit")
            assert " ".join(culprit.inner_text().split()).startswith(
                "Culprit #31369 [Mamba] Fix track boundary seqlen under overlap scheduler by alice"
            )
            assert culprit.locator('a[href="https://github.com/sgl-project/sglang/pull/31622"]').count() == 0
            assert culprit.locator('a[href="https://github.com/sgl-project/sglang/pull/31369"]').count() == 1
            assert "proven" in page.locator("#ab-result").inner_text()
            cost = " ".join(page.locator("#cost").inner_text().split())
            # 22 runs of 15 minutes on 4 GPUs; git bisect run: ceil(log2 240) = 8 runs of the median's 15 minutes
            assert cost == (
                "22 runs, 22.0 GPU-hours on 4-GPU runners; git bisect run on the same range: ~8 runs, 8.0 GPU-hours, "
                "verifying nothing"
            ), cost
            for element in (culprit, page.locator("#ab-result"), page.locator("svg.chart")):
                box = element.bounding_box()
                assert box and box["y"] + box["height"] <= viewport["height"], box  # above the fold, whole
            height = page.evaluate("document.documentElement.scrollHeight")
            assert height <= 2 * viewport["height"], height
            assert page.locator("#timeline .timeline-row").count() == 241  # every commit is still there
            assert page.locator("#timeline tr.timeline-row:not(.role-untested)").count() == tested
            assert (
                f"{tested - 1} of the range's 240 commits tested" in page.locator("#timeline-h").inner_text()
            )  # GOOD is not in it
            gaps = page.locator("#timeline tr.timeline-gap")
            assert page.locator("#timeline tbody > tr").count() < 2 * tested  # one row per run of untested commits
            assert "59 commits not tested" in gaps.first.inner_text()
            shot = tmp_path / "long-range.png"
            page.screenshot(path=str(shot), full_page=True)
            assert_not_blank(shot)
    finally:
        context.close()
