"""The warp-specialized pipeline demo (chapter 9 and appendix D) in a real browser: its timing model,
the MMA warp's waits timed apart (for an accumulator, for data), what the sliders change in the
picture, and a phone-width, touch-driven run inside the appendix."""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401
    BROWSER_MARKS, CHROMIUM, CHROMIUM_ARGS, ROOT, THEMES, browser, opened_demo, chapter_demo, sideways_overflow,
    smallest_svg_text_px,
)

pytestmark = BROWSER_MARKS
BASE = dict(stages=4, ktiles=6, load=1.0, epi=0, accs=2, tiles=3)


@pytest.fixture()
def demo(browser: object, demo_site: str):
    with opened_demo(browser, demo_site, "ws-pipeline") as page:
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
    assert r["total"] == pytest.approx(0.5 + 3 * 6)
    assert r["waitData"] == pytest.approx(0.5) and r["waitAcc"] == 0
    # one accumulator: each tile's MMAs wait for the previous tile's epilogue
    one, two = run(accs=1, epi=4), run(accs=2, epi=4)
    assert one["total"] > two["total"]


def test_depth_one_leaves_bubbles_that_a_deeper_ring_removes(demo: object) -> None:
    _set(demo, "stages", 1)
    _set(demo, "load", 1.5)
    waits = lambda: demo.locator("#timeline rect[data-role='mma'][data-kind='wait']").count()
    shallow_total, shallow_waits, shallow_bars = float(demo.inner_text("#total")), float(demo.inner_text("#wait-data")), waits()
    _set(demo, "stages", 4)
    assert float(demo.inner_text("#total")) < shallow_total
    assert float(demo.inner_text("#wait-data")) < shallow_waits and waits() < shallow_bars
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


def test_two_accumulators_remove_the_accumulator_wait_at_the_chapters_settings(demo: object) -> None:
    """Chapter 9: at a depth of 4 (the demo's other settings as they open, loads slower than the
    MMAs), one accumulator makes the first MMA of each tile wait for the previous epilogue; with
    two that wait is zero and the total does not rise."""
    assert demo.input_value("#load") == "1.5" and demo.input_value("#epi") == "4"
    _set(demo, "stages", 4)
    shown = lambda: {k: float(demo.inner_text(f"#{k}")) for k in ("total", "wait-acc", "wait-data")}
    acc_bars = lambda: demo.locator("#timeline rect[data-role='mma'][data-kind='wait'][data-on='acc']").count()
    demo.check("input[name=acc][value='1']")
    one, one_bars = shown(), acc_bars()
    assert one["wait-acc"] > 0 and one_bars == 2           # tiles 1 and 2 wait for tile 0's and 1's epilogue
    demo.check("input[name=acc][value='2']")
    two = shown()
    assert two["wait-acc"] == 0 and acc_bars() == 0
    assert two["total"] <= one["total"]
    # what the counters add up to: the MMA warp's idle time before its last MMA
    r = demo.evaluate("p => simulate(p)", dict(BASE, stages=4, load=1.5, epi=4, accs=1))
    last_mma = max(e["end"] for e in r["events"] if e["role"] == "mma")
    assert r["waitAcc"] + r["waitData"] == pytest.approx(last_mma - 3 * 6)


def test_two_accumulators_never_slow_the_pipeline_nor_add_accumulator_waits(demo: object) -> None:
    grid = demo.evaluate("""() => {
        const out = [];
        for (let stages = 1; stages <= 6; stages++) for (let ktiles = 2; ktiles <= 12; ktiles += 2)
            for (let load = 0.5; load <= 3; load += 0.5) for (let epi = 0; epi <= 8; epi += 2) {
                const p = { stages, ktiles, load, epi, tiles: 3 };
                const one = simulate({ ...p, accs: 1 }), two = simulate({ ...p, accs: 2 });
                out.push([p, one.total, two.total, one.waitAcc, two.waitAcc]);
            }
        return out;
    }""")
    for p, t1, t2, a1, a2 in grid:
        assert t2 <= t1 + 1e-9 and a2 <= a1 + 1e-9, p


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


DEMOS = sorted(p.stem for p in (ROOT / "_static" / "demos").glob("*.html"))


@pytest.mark.parametrize("name", DEMOS)
def test_every_demo_page_opens_on_its_own_cleanly(browser: object, demo_site: str, name: str) -> None:
    """Each demo opened on its own page, first in a fresh browser (a browser asks for a page's icon
    once per site): no console error, no failed request, its icon the book's."""
    fresh = browser.browser_type.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
    try:
        with opened_demo(fresh, demo_site, name) as page:
            icon = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
            assert icon == [f"{demo_site}_static/favicon.svg"], icon
            assert page.evaluate("u => fetch(u).then(r => r.status)", icon[0]) == 200
            page.wait_for_timeout(300)                    # the icon is asked for after the load
    finally:
        fresh.close()
