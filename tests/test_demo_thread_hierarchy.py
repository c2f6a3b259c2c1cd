"""The thread-hierarchy demo (chapter 1) in a real browser: the ids it shows, and a frame that
fits its content and keeps its height while the reader clicks and hovers."""

from __future__ import annotations

import pytest

from browser_support import BROWSER_MARKS, Session, browser, session, chapter_demo  # noqa: F401

pytestmark = BROWSER_MARKS


def test_thread_hierarchy_demo_shows_the_ids(session: Session) -> None:
    page = session.open("_static/demos/thread-hierarchy.html")
    page.select_option("#cluster-size", "2")
    page.select_option("#cta-threads", "256")
    page.click("#grid button:has-text('CTA 3')")
    page.click("#cta button:has-text('warp 5')")
    page.click("#warp button >> text='7'")
    page.hover("#warp button >> text='7'")
    ids = dict(zip(page.locator("#idrows th").all_inner_texts(), page.locator("#idrows td").all_inner_texts()))
    tid = 5 * 32 + 7
    assert ids["CTA id (blockIdx.x)"] == "3"
    assert ids["cluster id"] == "1" and ids["CTA rank in cluster"] == "1"
    assert ids["warpgroup id"] == "1" and ids["warp id in warpgroup"] == "1"
    assert ids["lane id"] == "7" and ids["thread id in CTA (threadIdx.x)"] == str(tid)
    assert ids["global thread id"] == str(3 * 256 + tid)
    # keyboard: Tab into the grid level, arrows move, focus shows the ids
    page.focus("#grid button[tabindex='0']")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.textContent") == "CTA 4"
    assert "CTA 4" in page.inner_text("#focusname")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#cta') !== null")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#warp') !== null")
    page.close()
    session.assert_clean()


def frame_fit(page: object) -> dict:
    """The embedding frame's height against the demo's content height (CSS px)."""
    return page.locator("#demo-thread-hierarchy iframe").evaluate("""f => {
        const d = f.contentDocument.documentElement;
        return {frame: f.clientHeight, content: Math.ceil(d.getBoundingClientRect().height),
                scroll: d.scrollHeight, view: f.contentWindow.innerHeight, top: window.scrollY};
    }""")


@pytest.mark.parametrize("width", [1280, 390])
def test_the_frame_fits_the_demo_and_keeps_its_height(browser: object, served_book: str, width: int) -> None:
    with chapter_demo(browser, served_book, "01-execution-model", "demo-thread-hierarchy",
                      width=width, height=900, touch=width < 600) as (page, frame):
        page.wait_for_timeout(200)
        fit = frame_fit(page)
        assert fit["scroll"] <= fit["view"], f"the demo is clipped: content {fit['scroll']} px in a {fit['view']} px frame"
        assert abs(fit["frame"] - fit["content"]) <= 1, f"frame {fit['frame']} px for {fit['content']} px of content"
        heights = set()
        act = (lambda loc: loc.tap()) if width < 600 else (lambda loc: loc.click())
        for sel in ["#grid button >> text='CTA 5'", "#cta button >> text='warp 6'", "#warp button >> text='31'",
                    "#grid button >> text='CTA 0'", "#warp button >> text='0'"]:
            act(frame.locator(sel))
            page.wait_for_timeout(80)
            heights.add(frame_fit(page)["frame"])
            if width >= 600:
                frame.locator("#grid button >> text='CTA 2'").hover()
                page.wait_for_timeout(80)
                heights.add(frame_fit(page)["frame"])
        assert heights == {fit["frame"]}, f"the frame changes height as the reader clicks: {sorted(heights)}"
        after = frame_fit(page)
        assert after["scroll"] <= after["view"]
