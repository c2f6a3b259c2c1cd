"""The 2-CTA MMA demo (appendix C) in a real browser: the split it shows is the kernel's, a click
or a tap on a CTA or an operand changes what is highlighted, the phases draw their arrows."""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401
    BROWSER_MARKS, THEMES, browser, opened_demo, chapter_demo, sideways_overflow, smallest_svg_text_px,
)

pytestmark = BROWSER_MARKS


@pytest.fixture()
def demo(browser: object, served_book: str):
    with opened_demo(browser, served_book, "two-cta") as page:
        yield page


def lit(page: object) -> set[tuple[str, str]]:
    """(who, what) of every part of the picture drawn at full strength (arrows aside)."""
    return {tuple(x) for x in page.evaluate(
        "() => [...document.querySelectorAll('#pair [data-who]:not(.arrow)')]"
        ".filter(e => e.dataset.on === 'true').map(e => [e.dataset.who, e.dataset.what])")}


def arrows(page: object) -> set[str]:
    return set(page.evaluate("() => [...document.querySelectorAll('#arrows [data-on=true]')].map(e => e.dataset.step)"))


def test_the_split_is_the_one_ref_2cta_uses(demo: object) -> None:
    r0, r1 = demo.evaluate("() => [roleOf(0), roleOf(1)]")
    assert (r0["aRows"], r1["aRows"]) == ([0, 127], [128, 255])
    assert (r0["bRows"], r1["bRows"]) == ([0, 127], [128, 255])
    assert (r0["dRows"], r1["dRows"]) == ([0, 127], [128, 255])
    assert r0["leader"] and not r1["leader"]
    # appendix C's ref_2cta posts expect_tx for 2 * (128 + 128) rows * 64 * 2 bytes on the leader
    assert demo.evaluate("() => leaderExpectTx()") == 2 * (128 + 128) * 64 * 2


def test_picking_a_cta_or_an_operand_changes_what_is_shown(demo: object) -> None:
    everything = lit(demo)
    demo.click("button[data-pick='cta1']")
    shown = lit(demo)
    assert shown < everything and all(who in ("cta1", "mma") for who, _ in shown)
    assert ("cta1", "D") in shown and ("cta0", "D") not in shown
    assert "rows 128–255" in demo.inner_text("#readout") and "peer" in demo.inner_text("#readout")
    demo.click("button[data-pick='B']")
    shown = lit(demo)
    assert {("cta0", "B"), ("cta1", "B")} <= shown and ("cta0", "A") not in shown
    demo.click("button[data-pick='none']")
    demo.click("#pair rect[data-who='cta0'][data-what='cta']", position={"x": 150, "y": 270})
    assert demo.get_attribute("button[data-pick='cta0']", "aria-pressed") == "true"
    assert "leader" in demo.inner_text("#readout")


def test_each_phase_draws_its_arrows(demo: object) -> None:
    assert arrows(demo) == set()
    demo.click("#next")
    assert arrows(demo) == {"1"} and "64 KiB" in demo.inner_text("#readout")
    demo.click("#next")
    assert arrows(demo) == {"2"}
    demo.focus("#pair")
    demo.keyboard.press("ArrowRight")
    assert arrows(demo) == {"3"} and "multicast" in demo.inner_text("#readout")


@pytest.mark.parametrize("theme", THEMES)
def test_works_by_touch_on_a_phone_in_appendix_c(browser: object, served_book: str, theme: str) -> None:
    with chapter_demo(browser, served_book, "C-tirx-reference", "demo-two-cta", theme) as (page, frame):
        frame.locator("button[data-pick='cta0']").scroll_into_view_if_needed()
        frame.locator("button[data-pick='cta0']").tap()
        assert frame.get_attribute("button[data-pick='cta0']", "aria-pressed") == "true"
        frame.locator("#next").tap()
        assert "TMA" in frame.inner_text("#step-name")
        size = smallest_svg_text_px(frame, "#pair")
        assert size >= 9, f"picture text of {size:.1f} px on a phone"
        assert sideways_overflow(frame) <= 0
