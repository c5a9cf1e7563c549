"""The series' pages in a real headless Chromium (as tests/integration/test_dashboard_browser.py drives the others):
the chart with its change point and bands drawn, the nav's link to the index, no horizontal overflow on a phone, and
the page's regions reachable from the keyboard."""

from __future__ import annotations

from types import SimpleNamespace

import pytest

from bot.app import create_app
from bot.settings import BotSettings
from tests.integration.test_dashboard_browser import assert_not_blank, browser, chromium_installed  # noqa: F401
from tests.integration.test_series_pages import SLOW, dashboard, page_of  # noqa: F401
from tests.support.net import serving


@pytest.fixture(scope="module")
def served(dashboard):  # noqa: F811 -- the pages' store, served by uvicorn on loopback
    app = create_app(
        BotSettings(webhook_secret="whsec-series-browser", db=dashboard.db, policies=dashboard.policies), handlers={}
    )
    with serving(app, timeout_graceful_shutdown=1) as server:
        yield SimpleNamespace(base=server.url)


def test_the_series_page_draws_the_change_and_its_bands(served, browser, tmp_path):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    try:
        page.goto(served.base + "/")
        page.get_by_role("link", name="Series").click()
        page.wait_for_url("**/series")
        page.get_by_role("link", name=SLOW).click()
        assert page.locator("h1").inner_text() == SLOW
        chart = page.locator("svg.series-chart")
        box = chart.bounding_box()
        assert box is not None and box["width"] > 600
        bands = page.locator("svg.series-chart rect.side-band")
        assert bands.count() == 2
        before, after = (bands.nth(k).bounding_box() for k in range(2))
        assert before and after and before["x"] + before["width"] <= after["x"]  # before the shift, then after
        assert after["y"] > before["y"]  # slower: the band after sits lower on the chart
        change = page.locator("svg.series-chart line.change").bounding_box()
        assert change and before["x"] + before["width"] <= change["x"] <= after["x"]
        shot = tmp_path / "series.png"
        page.screenshot(path=str(shot))
        assert_not_blank(shot)
    finally:
        context.close()
    assert not errors, errors


def test_phone_viewport_has_no_horizontal_overflow(served, browser, tmp_path):  # noqa: F811
    context = browser.new_context(
        viewport={"width": 390, "height": 844}, device_scale_factor=1, is_mobile=True, has_touch=True
    )
    page = context.new_page()
    try:
        for path in ("/series", page_of(SLOW)):
            page.goto(served.base + path)
            widths = page.evaluate(
                "() => [document.documentElement.scrollWidth, document.body.scrollWidth, window.innerWidth]"
            )
            assert max(widths[:2]) <= widths[2], (path, widths)
            wraps = page.locator(".table-wrap")
            assert all(
                wraps.nth(k).evaluate("e => getComputedStyle(e).overflowX") == "auto" for k in range(wraps.count())
            )
        shot = tmp_path / "phone.png"
        page.screenshot(path=str(shot), full_page=False)
        assert_not_blank(shot)
    finally:
        context.close()


def test_the_tables_are_reachable_from_the_keyboard(served, browser):  # noqa: F811
    context = browser.new_context()
    page = context.new_page()
    try:
        page.goto(served.base + page_of(SLOW))
        page.keyboard.press("Tab")
        assert page.evaluate("() => document.activeElement.className") == "skip-link"
        focused = []
        for _ in range(40):
            page.keyboard.press("Tab")
            focused.append(page.evaluate("() => document.activeElement.getAttribute('aria-labelledby')"))
        assert {"changes-caption", "runs-caption"} <= set(focused)  # each scrollable table takes the focus
    finally:
        context.close()
