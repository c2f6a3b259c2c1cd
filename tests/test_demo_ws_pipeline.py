"""The warp-specialized pipeline demo in a real browser: its model, its picture, phone width, themes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from demo_server import CHROMIUM, CHROMIUM_ARGS, DemoPage, serious_axe_violations, serve_demos

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")]
DEMO = "ws-pipeline.html"


@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


@pytest.fixture(scope="module")
def base() -> Iterator[str]:
    with serve_demos() as url:
        yield url


def _set(page: object, slider: str, value: float) -> None:
    page.eval_on_selector(f"#{slider}", "(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); }", value)


def test_depth_one_leaves_bubbles_that_a_deeper_ring_removes(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    page = d.page
    _set(page, "stages", 1)
    _set(page, "load", 1.5)
    shallow_total = float(page.inner_text("#total"))
    shallow_waits = int(page.inner_text("#waits"))
    shallow_bars = page.locator("#timeline rect[data-role='mma'][data-kind='wait']").count()
    _set(page, "stages", 4)
    deep_total = float(page.inner_text("#total"))
    assert deep_total < shallow_total, (shallow_total, deep_total)
    assert int(page.inner_text("#waits")) < shallow_waits
    assert page.locator("#timeline rect[data-role='mma'][data-kind='wait']").count() < shallow_bars
    # the picture follows the model: one MMA bar per K-tile of every output tile
    k = int(page.input_value("#ktiles"))
    assert page.locator("#timeline rect[data-role='mma'][data-kind='work']").count() == 3 * k
    d.close()


def test_model_matches_the_pipeline_arithmetic(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    run = lambda **p: d.page.evaluate("p => simulate(p)", dict(dict(stages=4, ktiles=6, load=1.0, epi=0, accs=2, tiles=3), **p))
    # depth 1: every K-tile pays load + MMA back to back
    r = run(stages=1, load=1.5)
    assert r["total"] == pytest.approx(3 * 6 * (1.5 + 1))
    # deep ring, memory slower than the MMA: the loads set the pace
    r = run(stages=6, load=2.0)
    assert r["total"] == pytest.approx(3 * 6 * 2.0 + 1)
    # deep ring, memory faster: the MMA warp is never starved after the first load
    r = run(stages=4, load=0.5)
    assert r["total"] == pytest.approx(0.5 + 3 * 6)
    assert r["mmaWaits"] == 1
    d.close()


def test_double_buffered_accumulators_overlap_the_epilogue(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    page = d.page
    _set(page, "stages", 4)
    _set(page, "epi", 4)
    page.check("input[name=acc][value='1']")
    single = float(page.inner_text("#total"))
    assert page.inner_text("#overlap") == "no"
    page.check("input[name=acc][value='2']")
    assert page.inner_text("#overlap") == "yes"
    assert float(page.inner_text("#total")) < single
    d.close()


def test_fits_a_phone_and_takes_touch(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO, width=390, touch=True)
    page = d.page
    over = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert over <= 0, f"scrolls sideways by {over}px at 390px"
    before = page.inner_text("#total")
    page.tap("input[name=acc][value='2']")
    _set(page, "stages", 3)
    assert page.inner_text("#total") != before
    box = page.locator("#timeline").bounding_box()
    assert box and box["width"] <= 390
    d.close()


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_follows_the_theme_and_has_no_serious_accessibility_violations(browser: object, base: str, theme: str) -> None:
    d = DemoPage(browser, f"{base}{DEMO}?theme={theme}")
    page = d.page
    assert page.evaluate("() => document.documentElement.dataset.theme") == theme
    bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    dark = sum(int(x) for x in bg[bg.index("(") + 1 : bg.index(")")].split(",")[:3]) < 200
    assert dark == (theme == "dark"), bg
    assert serious_axe_violations(page) == []
    d.close()
