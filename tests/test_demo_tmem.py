"""The tensor-memory demo (chapter 6) in a real browser: its rules match gpubook.tmem, and
interacting changes what it shows.

The demo is self-contained, so these tests need no book build: they open it from
browser_support's ``demo_site`` (a copy of `_static/` with the `book-data.js` that the build
writes from gpubook.facts.hardware), and fail on any request that leaves 127.0.0.1, any failed
request and any JavaScript error.
"""

from __future__ import annotations

import pytest

from browser_support import BROWSER_MARKS, browser, opened_demo, serious_axe_violations, sideways_overflow  # noqa: F401
from gpubook import hardware, tmem

pytestmark = BROWSER_MARKS
DEMO = "tmem"


@pytest.fixture()
def page(browser: object, demo_site: str):
    with opened_demo(browser, demo_site, DEMO, theme=None, width=1100) as page:
        yield page


def test_geometry_comes_from_the_hardware_table(page: object) -> None:
    lanes, columns = page.evaluate("() => [LANES, COLUMNS]")
    assert (lanes, columns) == (tmem.LANES, tmem.COLUMNS)
    assert lanes * columns * 4 == hardware.B200.tmem_per_sm
    assert f"{tmem.LANES} lanes × {tmem.COLUMNS} columns" in page.inner_text("h2")


def test_rules_match_the_python_model(page: object) -> None:
    warps = list(range(16))
    js = page.evaluate("ws => ws.map(laneQuarter)", warps)
    assert js == [[tmem.lane_quarter(w)[0], tmem.lane_quarter(w)[-1]] for w in warps]
    cases = [(lane, col) for lane in (0, 31, 32, 96, 127) for col in (0, 1, 128, 511)]
    assert page.evaluate("cs => cs.map(([l, c]) => tmemAddress(l, c))", cases) == \
        [tmem.address(lane, col) for lane, col in cases]
    for shape in tmem.SHAPES:
        for num in tmem.NUMS:
            fp = page.evaluate("([s, n]) => ldFootprint(s, n)", [shape, num])
            try:
                py = tmem.ld_footprint(shape, num)
            except ValueError:
                assert not fp["valid"], f"{shape}.x{num} is invalid in Python but not in the demo"
                continue
            assert fp["valid"] and {k: fp[k] for k in py} == py, f"{shape}.x{num}: {fp} != {py}"
    # the placement model: aligned to its size, clear of the held columns, blocking when full
    for held in (0, 32, 64, 128, 256, 512):
        for n in (32, 64, 128, 256, 512):
            col = page.evaluate("([h, n]) => allocPlacement(h, n)", [held, n])
            if col is None:
                assert all(c < held for c in range(0, tmem.COLUMNS - n + 1, n)), (held, n)
            else:
                assert col % n == 0 and col >= held and col + n <= tmem.COLUMNS


def test_choosing_a_warp_moves_the_lane_quarter(page: object) -> None:
    for w in (0, 5, 7, 14):
        page.select_option("#warp", str(w))
        first = int(page.get_attribute("#quarter", "data-first"))
        assert first == tmem.lane_quarter(w)[0]
        assert f"lanes {first}–{first + 31}" in page.inner_text("#quarter")
        mine = page.locator("rect[data-mine='1']")
        assert mine.count() == 1 and int(mine.get_attribute("data-quarter")) == w % 4
        ld = page.locator("#ld-rect")
        assert int(ld.get_attribute("data-lane")) == first


def test_allocation_address_and_the_base_check(page: object) -> None:
    page.select_option("#alloc", "128")
    page.select_option("#held", "0")
    assert int(page.get_attribute("#address", "data-address")) == 0
    assert page.get_attribute("#assume", "data-trap") == "0"
    page.select_option("#held", "128")
    assert int(page.get_attribute("#address", "data-address")) == tmem.address(0, 128)
    assert "0x00000080" in page.inner_text("#address")
    assert page.get_attribute("#assume", "data-trap") == "1"
    assert int(page.get_attribute("#alloc-rect", "data-col")) == 128
    page.select_option("#alloc", "512")
    assert "blocks" in page.inner_text("#address")
    assert page.locator("#alloc-rect").count() == 0


def test_load_shape_changes_the_footprint(page: object) -> None:
    page.select_option("#warp", "2")
    page.select_option("#shape", "16x128b")
    page.select_option("#num", "8")
    page.select_option("#half", "16")
    ld = page.locator("#ld-rect")
    py = tmem.ld_footprint("16x128b", 8)
    assert int(ld.get_attribute("data-lanes")) == py["lanes"] == 16
    assert int(ld.get_attribute("data-columns")) == py["columns"]
    assert int(ld.get_attribute("data-lane")) == tmem.lane_quarter(2)[0] + 16
    assert f"{py['registers']} registers per thread" in page.inner_text("#load")
    page.select_option("#shape", "16x256b")
    page.select_option("#num", "64")
    assert page.get_attribute("#load", "data-valid") == "0"
    assert "not a valid instruction" in page.inner_text("#load")
    assert page.locator("#ld-rect").count() == 0


def test_the_first_lane_choice_applies_only_to_the_16_lane_shapes(page: object) -> None:
    """.32x32b covers the warp's whole lane quarter: its first lane is the quarter's, and the
    choice is disabled with the reason shown. A .16x... shape covers half the quarter: the choice
    is enabled and moves the load's footprint (and its address) 16 lanes down."""
    page.select_option("#warp", "1")
    first = tmem.lane_quarter(1)[0]
    page.select_option("#num", "8")
    page.select_option("#shape", "32x32b")
    assert page.is_disabled("#half")
    assert page.input_value("#half") == "0"
    assert "Not for .32x32b" in page.inner_text("#half-note")
    assert page.get_attribute("#half", "aria-describedby") == "half-note"
    ld = page.locator("#ld-rect")
    assert int(ld.get_attribute("data-lane")) == first and int(ld.get_attribute("data-lanes")) == 32
    for shape in ("16x64b", "16x128b", "16x256b"):
        page.select_option("#shape", shape)
        assert page.is_enabled("#half"), shape
        assert "Not for" not in page.inner_text("#half-note")
        page.select_option("#half", "0")
        low = (int(ld.get_attribute("data-lane")), page.inner_text("#load"))
        page.select_option("#half", "16")
        high = (int(ld.get_attribute("data-lane")), page.inner_text("#load"))
        assert (low[0], high[0]) == (first, first + 16), shape
        assert f"{tmem.address(first + 16, 0):#010x}" in high[1] and high[1] != low[1], shape
    # back to the 32-lane shape: the choice is disabled again and the footprint is the whole quarter
    page.select_option("#shape", "32x32b")
    assert page.is_disabled("#half") and int(ld.get_attribute("data-lane")) == first


def test_follows_the_theme_and_fits_a_phone(browser: object, demo_site: str) -> None:
    colours = {}
    for theme in ("dark", "light"):
        with opened_demo(browser, demo_site, DEMO, theme=theme, width=1100) as page:
            assert page.evaluate("() => document.documentElement.dataset.theme") == theme
            colours[theme] = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    assert colours["dark"] != colours["light"]
    with opened_demo(browser, demo_site, DEMO, theme=None, width=360, touch=True) as page:
        over = sideways_overflow(page)
        assert over <= 0, f"the demo scrolls sideways by {over}px on a 360px screen"
        page.locator("#warp").tap()
        page.select_option("#warp", "9")
        assert int(page.get_attribute("#quarter", "data-first")) == tmem.lane_quarter(9)[0]


@pytest.mark.parametrize("theme", ["light", "dark"])
def test_no_serious_accessibility_violations(browser: object, demo_site: str, theme: str) -> None:
    with opened_demo(browser, demo_site, DEMO, theme=theme, width=1100) as page:
        assert serious_axe_violations(page) == []
