"""The 2-CTA MMA demo in a real browser: the split it computes, what a click highlights, phone width, themes."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from demo_server import CHROMIUM, CHROMIUM_ARGS, DemoPage, serious_axe_violations, serve_demos

pytestmark = [pytest.mark.browser,
              pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium")]
DEMO = "two-cta.html"


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


def _lit(page: object) -> set[tuple[str, str]]:
    """(who, what) of every non-arrow element drawn at full strength."""
    return {tuple(x) for x in page.evaluate(
        "() => [...document.querySelectorAll('#pair [data-who]:not(.arrow)')]"
        ".filter(e => e.dataset.on === 'true').map(e => [e.dataset.who, e.dataset.what])")}


def test_the_split_is_the_one_the_kernel_uses(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    r0, r1 = d.page.evaluate("() => [roleOf(0), roleOf(1)]")
    assert r0["aRows"] == [0, 127] and r1["aRows"] == [128, 255]
    assert r0["bRows"] == [0, 127] and r1["bRows"] == [128, 255]
    assert r0["dRows"] == [0, 127] and r1["dRows"] == [128, 255]
    assert r0["leader"] and not r1["leader"]
    # ref_2cta in appendix C posts expect_tx for 2 * (128 + 128) rows * 64 * 2 bytes
    assert d.page.evaluate("() => leaderExpectTx()") == 2 * (128 + 128) * 64 * 2
    d.close()


def test_clicking_a_cta_or_an_operand_changes_what_is_shown(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    page = d.page
    everything = _lit(page)
    page.click("button[data-pick='cta1']")
    lit = _lit(page)
    assert lit < everything
    assert all(who in ("cta1", "mma") for who, _ in lit)
    assert ("cta1", "D") in lit and ("cta0", "D") not in lit
    assert "rows 128–255" in page.inner_text("#readout") and "peer" in page.inner_text("#readout")
    page.click("button[data-pick='B']")
    lit = _lit(page)
    assert ("cta0", "B") in lit and ("cta1", "B") in lit and ("cta0", "A") not in lit
    # a tap on CTA 0's part of the picture picks CTA 0
    page.click("button[data-pick='none']")
    page.click("#pair rect[data-who='cta0'][data-what='cta']", position={"x": 150, "y": 270})
    assert page.get_attribute("button[data-pick='cta0']", "aria-pressed") == "true"
    assert "leader" in page.inner_text("#readout")
    d.close()


def test_phases_draw_their_arrows(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO)
    page = d.page
    shown = lambda: page.evaluate("() => [...document.querySelectorAll('#arrows [data-on=true]')].map(e => e.dataset.step)")
    assert shown() == []
    page.click("#next")
    assert set(shown()) == {"1"} and "64 KiB" in page.inner_text("#readout")
    page.click("#next")
    assert set(shown()) == {"2"}
    page.focus("#pair")
    page.keyboard.press("ArrowRight")
    assert set(shown()) == {"3"} and "multicast" in page.inner_text("#readout")
    d.close()


def test_fits_a_phone_and_takes_touch(browser: object, base: str) -> None:
    d = DemoPage(browser, base + DEMO, width=390, touch=True)
    page = d.page
    over = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert over <= 0, f"scrolls sideways by {over}px at 390px"
    page.tap("button[data-pick='cta0']")
    assert page.get_attribute("button[data-pick='cta0']", "aria-pressed") == "true"
    page.tap("#next")
    assert "TMA" in page.inner_text("#step-name")
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
