"""The warp-specialized pipeline demo (appendix D) in a real browser: its timing model, what the
sliders change in the picture, and a phone-width, touch-driven run inside the appendix."""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401
    BROWSER_MARKS, THEMES, browser, opened_demo, chapter_demo, sideways_overflow, smallest_svg_text_px,
)

pytestmark = BROWSER_MARKS
BASE = dict(stages=4, ktiles=6, load=1.0, epi=0, accs=2, tiles=3)


@pytest.fixture()
def demo(browser: object, served_book: str):
    with opened_demo(browser, served_book, "ws-pipeline") as page:
        yield page


def _set(page: object, slider: str, value: float) -> None:
    page.eval_on_selector(f"#{slider}", "(e, v) => { e.value = v; e.dispatchEvent(new Event('input')); }", value)


def test_the_model_is_the_pipeline_arithmetic(demo: object) -> None:
    run = lambda **p: demo.evaluate("p => simulate(p)", dict(BASE, **p))
    # one stage: every K-tile pays its load and its MMA back to back
    assert run(stages=1, load=1.5)["total"] == pytest.approx(3 * 6 * (1.5 + 1))
    # a deep ring with memory slower than the MMA: the loads set the pace
    assert run(stages=6, load=2.0)["total"] == pytest.approx(3 * 6 * 2.0 + 1)
    # a deep ring with memory faster than the MMA: the MMA warp waits once, for the first load
    r = run(stages=4, load=0.5)
    assert r["total"] == pytest.approx(0.5 + 3 * 6) and r["mmaWaits"] == 1
    # one accumulator: each tile's MMAs wait for the previous tile's epilogue
    one, two = run(accs=1, epi=4), run(accs=2, epi=4)
    assert one["total"] > two["total"]


def test_depth_one_leaves_bubbles_that_a_deeper_ring_removes(demo: object) -> None:
    _set(demo, "stages", 1)
    _set(demo, "load", 1.5)
    waits = lambda: demo.locator("#timeline rect[data-role='mma'][data-kind='wait']").count()
    shallow_total, shallow_waits, shallow_bars = float(demo.inner_text("#total")), int(demo.inner_text("#waits")), waits()
    _set(demo, "stages", 4)
    assert float(demo.inner_text("#total")) < shallow_total
    assert int(demo.inner_text("#waits")) < shallow_waits and waits() < shallow_bars
    k = int(demo.input_value("#ktiles"))
    assert demo.locator("#timeline rect[data-role='mma'][data-kind='work']").count() == 3 * k


def test_double_buffered_accumulators_overlap_the_epilogue(demo: object) -> None:
    _set(demo, "stages", 4)
    _set(demo, "epi", 4)
    demo.check("input[name=acc][value='1']")
    single = float(demo.inner_text("#total"))
    assert demo.inner_text("#overlap") == "no"
    demo.check("input[name=acc][value='2']")
    assert demo.inner_text("#overlap") == "yes" and float(demo.inner_text("#total")) < single


@pytest.mark.parametrize("theme", THEMES)
def test_works_by_touch_on_a_phone_in_appendix_d(browser: object, served_book: str, theme: str) -> None:
    with chapter_demo(browser, served_book, "D-debugging-async", "demo-ws-pipeline", theme) as (page, frame):
        frame.locator("#timeline").scroll_into_view_if_needed()
        before = frame.inner_text("#total")
        frame.locator("input[name=acc][value='2']").tap()
        frame.eval_on_selector("#stages", "e => { e.value = 3; e.dispatchEvent(new Event('input')); }")
        assert frame.inner_text("#total") != before
        size = smallest_svg_text_px(frame, "#timeline")
        assert size >= 9, f"timeline text of {size:.1f} px on a phone"
        assert sideways_overflow(frame) <= 0
