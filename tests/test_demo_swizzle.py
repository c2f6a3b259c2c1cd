"""The swizzle demo (chapter 4) in a real browser: its numbers are gpubook.layouts' numbers.

The demo counts the bank conflicts of two accesses under the cursor — a row and a column of
the tile — for two access patterns (8 threads reading 16-byte chunks, as chapter 4 counts a
quarter warp; 32 threads reading 4-byte elements), three row widths and four swizzles. Every
count it shows is compared with the same access computed here with gpubook.layouts.
"""

from __future__ import annotations

import random

import pytest

from browser_support import BROWSER_MARKS, browser, opened_demo, chapter_demo, sideways_overflow  # noqa: F401
from gpubook.models.layouts import bank, conflicts, swizzle

pytestmark = BROWSER_MARKS

# what each access pattern is: threads, bytes each thread reads, rows the demo's tile has
PATTERNS = {"chunk16": (8, 16, 16), "word4": (32, 4, 32)}
MODES = (0, 32, 64, 128)
ROW_BYTES = (32, 64, 128)


def words(addrs: list[int], unit: int) -> list[int]:
    """The 4-byte words that reads of `unit` bytes at these addresses touch."""
    return [a + w for a in addrs for w in range(0, unit, 4)]


def expected(pattern: str, mode: int, row_bytes: int, row: int, col: int) -> tuple[int, int]:
    """(row access, column access) conflicts for a cursor at (row, col), from gpubook.models.layouts.

    Row access: the threads read 128 contiguous bytes, piece i each, from the start of the
    cursor's row (of the aligned group of rows that 128 bytes span). Column access: thread i
    reads piece `col` of row r0 + i, r0 the first row of the cursor's aligned group of
    `threads` rows.
    """
    threads, unit, rows = PATTERNS[pattern]
    span = max(1, threads * unit // row_bytes)
    r_row = min(row - row % span, rows - span)
    r_col = min(row - row % threads, rows - threads)
    row_acc = [swizzle(r_row * row_bytes + i * unit, mode) for i in range(threads)]
    col_acc = [swizzle((r_col + i) * row_bytes + col * unit, mode) for i in range(threads)]
    return conflicts(words(row_acc, unit)), conflicts(words(col_acc, unit))


def choose(page: object, pattern: str, mode: int, row_bytes: int) -> None:
    page.check(f"input[name=pattern][value='{pattern}']")
    page.check(f"input[name=mode][value='{mode}']")
    page.select_option("#row-bytes", str(row_bytes))


def shown(page: object) -> tuple[int, int]:
    return (int(page.get_attribute("#row-conflicts", "data-conflicts")),
            int(page.get_attribute("#col-conflicts", "data-conflicts")))


@pytest.fixture()
def demo(browser: object, served_book: str):
    with opened_demo(browser, served_book, "swizzle") as page:
        yield page


def test_the_model_is_gpubook_layouts(demo: object) -> None:
    """swizzle, bank and conflicts in the page compute what gpubook.layouts computes."""
    addrs = list(range(0, 4096, 2)) + [4096 + 16 * k + 4 for k in range(64)]
    for mode in MODES:
        js = demo.evaluate("([as, m]) => as.map(a => swizzle(a, m))", [addrs, mode])
        assert js == [swizzle(a, mode) for a in addrs], f"swizzle differs for mode {mode}"
    assert demo.evaluate("as => as.map(bank)", addrs) == [bank(a) for a in addrs]
    rng = random.Random(7)
    accesses = [[rng.randrange(0, 8192, 4) for _ in range(32)] for _ in range(40)]
    accesses += [[0] * 32, [4 * i for i in range(32)], [128 * i for i in range(32)], [2 * i for i in range(32)]]
    assert demo.evaluate("accs => accs.map(conflicts)", accesses) == [conflicts(a) for a in accesses]


def test_every_count_the_demo_shows_is_gpubook_layouts_count(demo: object) -> None:
    checked = 0
    for pattern, (threads, unit, rows) in PATTERNS.items():
        for mode in MODES:
            for row_bytes in ROW_BYTES:
                choose(demo, pattern, mode, row_bytes)
                per_row = row_bytes // unit
                for row, col in {(0, 0), (5, per_row - 1), (rows - 1, min(1, per_row - 1)), (9, per_row // 2)}:
                    demo.evaluate("([r, c]) => setCursor(r, c)", [row, col])
                    assert shown(demo) == expected(pattern, mode, row_bytes, row, col), \
                        (pattern, mode, row_bytes, row, col)
                    checked += 1
    assert checked == 2 * 4 * 3 * 4


def test_the_default_is_the_chapters_case(demo: object) -> None:
    """Chapter 4's table: eight threads read chunk 0 of rows 0-7, rows as wide as the swizzle.
    Picking a swizzle sets that row width, and the column count is the chapter's."""
    assert demo.is_checked("input[name=pattern][value='chunk16']")
    assert demo.is_checked("input[name=mode][value='128']") and demo.input_value("#row-bytes") == "128"
    for mode in MODES:
        demo.check(f"input[name=mode][value='{mode}']")
        row_bytes = mode or 128
        assert demo.input_value("#row-bytes") == str(row_bytes)
        demo.evaluate("() => setCursor(0, 0)")
        chunk0 = [swizzle(r * row_bytes, mode) for r in range(8)]          # as the chapter computes it
        quarter = [a + 4 * w for a in chunk0 for w in range(4)]
        assert shown(demo)[1] == conflicts(quarter)
    assert shown(demo)[1] == 0                                             # 128B: one pass
    demo.check("input[name=mode][value='0']")
    assert shown(demo)[1] == 7                                             # none: eight passes


def test_hover_moves_the_cursor(demo: object) -> None:
    demo.hover("#tile rect[data-row='3'][data-col='5']")
    assert "row 3, chunk 5" in demo.inner_text("#readout")
    assert "chunk 5 of row 0 + i" in demo.inner_text("#col-h")
    demo.hover("#tile rect[data-row='12'][data-col='2']")
    assert "row 12, chunk 2" in demo.inner_text("#readout")
    assert shown(demo) == expected("chunk16", 128, 128, 12, 2)
    # the arrow keys still move the cursor while the pointer rests on the redrawn tile
    demo.focus("#tile")
    demo.keyboard.press("ArrowDown")
    demo.keyboard.press("ArrowRight")
    assert "row 13, chunk 3" in demo.inner_text("#readout")


def test_the_keyboard_moves_the_cursor(demo: object) -> None:
    demo.check("input[name=pattern][value='word4']")
    demo.focus("#tile")
    for key in ["ArrowRight"] * 5 + ["ArrowDown"] * 2:
        demo.keyboard.press(key)
    assert "row 2, element 5" in demo.inner_text("#readout")
    assert shown(demo) == expected("word4", 128, 128, 2, 5)


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_cells_are_tappable_on_a_phone(browser: object, served_book: str, theme: str) -> None:
    """At 390 px, inside chapter 4, every cell is at least 24 px square and a tap moves the cursor."""
    with chapter_demo(browser, served_book, "04-layouts-swizzle", "demo-swizzle", theme) as (page, frame):
        for pattern in ("chunk16", "word4"):
            frame.locator(f"input[name=pattern][value='{pattern}']").tap()
            sizes = frame.evaluate("() => [...document.querySelectorAll('#tile rect[data-row]')]"
                                   ".map(r => { const b = r.getBoundingClientRect(); return [b.width, b.height]; })")
            assert sizes and min(w for w, _ in sizes) >= 24 and min(h for _, h in sizes) >= 24, \
                f"{pattern}: cells of {min(sizes)} px are too small to tap"
            cell = frame.locator("#tile rect[data-row='6'][data-col='1']")
            cell.scroll_into_view_if_needed()
            cell.tap()
            unit = "chunk" if pattern == "chunk16" else "element"
            assert f"row 6, {unit} 1" in frame.inner_text("#readout")
        over = sideways_overflow(frame)
        assert over <= 0, f"the demo scrolls sideways by {over} px"
