"""The TMA box and swizzle explorer (chapter 4) in a real browser: its mapping is gpubook.layouts'.

For every box the demo offers (rows, inner bytes within the swizzle's span, element size,
swizzle), each 16-byte chunk's shared-memory byte, line and slot are recomputed here with
gpubook.layouts.swizzle, the shared-memory grid is checked to be the inverse of that map,
and the wavefronts of the two groups of eight chunks are counted with gpubook.layouts.conflicts.
"""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401
    BROWSER_MARKS, THEMES, browser, opened_demo, chapter_demo, sideways_overflow,
)
from gpubook.models.layouts import conflicts, swizzle

pytestmark = BROWSER_MARKS
MODES = (0, 32, 64, 128)


def place(row: int, chunk: int, inner: int, mode: int) -> tuple[int, int, int]:
    """(shared byte, 128-byte line, slot) of a chunk: rows packed densely, then swizzled."""
    phys = swizzle(row * inner + 16 * chunk, mode)
    return phys, phys // 128, (phys % 128) // 16


def wavefront_conflicts(chunks: list[tuple[int, int]], inner: int, mode: int) -> int:
    return conflicts([place(r, c, inner, mode)[0] + w for r, c in chunks for w in (0, 4, 8, 12)])


@pytest.fixture()
def demo(browser: object, served_book: str):
    with opened_demo(browser, served_book, "tma-box") as page:
        yield page


def configure(page: object, rows: int, inner: int, esize: int, mode: int) -> None:
    page.check(f"input[name=mode][value='{mode}']")
    page.check(f"input[name=esize][value='{esize}']")
    page.select_option("#rows", str(rows))
    page.select_option("#inner", str(inner))


def test_every_chunk_lands_where_gpubook_layouts_puts_it(demo: object) -> None:
    checked = 0
    for mode in MODES:
        for inner in (16, 32, 64, 128, 256):
            if mode and inner > mode:
                assert demo.locator(f"#inner option[value='{inner}']").is_disabled() or \
                    demo.evaluate("() => Number(document.querySelector('input[name=mode]:checked').value)") != mode
                continue
            for rows in (8, 16):
                configure(demo, rows, inner, 2, mode)
                cells = demo.evaluate("() => [...document.querySelectorAll('#box button.cell')].map(b => b.dataset)")
                assert len(cells) == rows * inner // 16
                for d in cells:
                    r, c = int(d["row"]), int(d["chunk"])
                    assert (int(d["phys"]), int(d["line"]), int(d["slot"])) == place(r, c, inner, mode), (mode, inner, r, c)
                    checked += 1
                # the shared-memory grid is the inverse map: slot -> the chunk stored there
                slots = demo.evaluate("() => [...document.querySelectorAll('#smem .cell')].map(e => ({...e.dataset}))")
                held = {(int(s["line"]), int(s["slot"])): (int(s["row"]), int(s["chunk"])) for s in slots if "row" in s}
                want = {place(r, c, inner, mode)[1:]: (r, c) for r in range(rows) for c in range(inner // 16)}
                assert held == want, (mode, inner, rows)
    assert checked > 1000


def test_the_bank_groups_of_eight_chunks_and_their_wavefronts(demo: object) -> None:
    for mode in MODES:
        for inner in [v for v in (32, 64, 128) if not mode or v <= mode]:
            configure(demo, 16, inner, 2, mode)
            for row, chunk in ((0, 0), (5, inner // 16 - 1), (11, 1)):
                demo.evaluate("([r, c]) => select(r, c, false)", [row, chunk])
                r0 = row - row % 8
                col = [(r0 + k, chunk) for k in range(8)]
                line = demo.locator("#col-line")
                assert line.get_attribute("data-groups") == ",".join(str(place(r, c, inner, mode)[2]) for r, c in col)
                assert int(line.get_attribute("data-conflicts")) == wavefront_conflicts(col, inner, mode)
                per = inner // 16
                first = row * per + chunk - (row * per + chunk) % 8
                run = [((first + k) // per, (first + k) % per) for k in range(8)]
                assert int(demo.locator("#row-line").get_attribute("data-conflicts")) == wavefront_conflicts(run, inner, mode)
    # the chapter's case: a 128-byte fp16 row, chunk 0 of rows 0-7: seven conflicts unswizzled, none under 128B
    configure(demo, 16, 128, 2, 0)
    demo.evaluate("() => select(0, 0, false)")
    assert demo.locator("#col-line").get_attribute("data-conflicts") == "7"
    configure(demo, 16, 128, 2, 128)
    assert demo.locator("#col-line").get_attribute("data-conflicts") == "0"


def test_a_swizzle_limits_the_inner_size_and_the_element_size_relabels(demo: object) -> None:
    configure(demo, 16, 128, 2, 128)
    demo.check("input[name=mode][value='32']")
    assert demo.input_value("#inner") == "32" and "reduced" in demo.inner_text("#box-note")
    assert demo.locator("#inner option[value='64']").is_disabled()
    demo.check("input[name=esize][value='4']")
    demo.evaluate("() => select(2, 1, false)")
    assert "(elements 4–7)" in demo.inner_text("#readout")
    demo.check("input[name=esize][value='1']")
    assert "(elements 16–31)" in demo.inner_text("#readout")


def test_hover_and_keys_select_a_chunk(demo: object) -> None:
    before = demo.inner_text("#readout")
    demo.hover("#box button[data-row='4'][data-chunk='3']")
    assert demo.locator("#readout").get_attribute("data-row") == "4" and demo.inner_text("#readout") != before
    phys = int(demo.locator("#readout").get_attribute("data-phys"))
    assert phys == place(4, 3, 128, 128)[0]
    demo.focus("#box button[data-row='4'][data-chunk='3']")
    demo.keyboard.press("ArrowDown")
    demo.keyboard.press("ArrowRight")
    assert (demo.locator("#readout").get_attribute("data-row"), demo.locator("#readout").get_attribute("data-chunk")) == ("5", "4")
    assert demo.evaluate("() => document.activeElement.dataset.row") == "5"


@pytest.mark.parametrize("theme", THEMES)
def test_tappable_on_a_phone_in_chapter_4(browser: object, served_book: str, theme: str) -> None:
    with chapter_demo(browser, served_book, "04-layouts-swizzle", "demo-tma-box", theme) as (page, frame):
        sizes = frame.evaluate("() => [...document.querySelectorAll('#box button.cell')]"
                               ".map(b => { const r = b.getBoundingClientRect(); return Math.min(r.width, r.height); })")
        assert min(sizes) >= 24, f"chunks of {min(sizes)} px are too small to tap"
        cell = frame.locator("#box button[data-row='6'][data-chunk='2']")
        cell.scroll_into_view_if_needed()
        cell.tap()
        assert frame.locator("#readout").get_attribute("data-row") == "6"
        over = sideways_overflow(frame)
        assert over <= 0, f"the demo scrolls sideways by {over} px"
