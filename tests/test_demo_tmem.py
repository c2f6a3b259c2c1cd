"""The tensor-memory demo in a real browser: its rules match gpubook.tmem, and interacting changes it.

The demo is self-contained, so these tests serve the repository's `_static/` folder directly
(no book build needed) and fail on any request that leaves 127.0.0.1.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlparse

import pytest

from gpubook import tmem

ROOT = Path(__file__).resolve().parents[1]
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DEMO = "demos/tmem.html"

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium"),
]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript"}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="module")
def static_url() -> Iterator[str]:
    handler = functools.partial(_Quiet, directory=str(ROOT / "_static"))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture()
def page(static_url: str) -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    errors: list[str] = []
    external: list[str] = []
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        context = browser.new_context(viewport={"width": 1100, "height": 900})

        def route(r: object) -> None:
            host = urlparse(r.request.url).hostname
            if host not in ("127.0.0.1", "localhost"):
                external.append(r.request.url)
                r.abort()
            else:
                r.continue_()

        context.route("**/*", route)
        p = context.new_page()
        p.on("pageerror", lambda e: errors.append(str(e)))
        p.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
        assert p.goto(static_url + DEMO).status == 200
        yield p
        browser.close()
    assert not errors, f"JavaScript errors: {errors}"
    assert not external, f"requests left localhost: {external}"


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


def test_follows_the_theme_and_fits_a_phone(page: object, static_url: str) -> None:
    page.goto(static_url + DEMO + "?theme=dark")
    assert page.evaluate("() => document.documentElement.dataset.theme") == "dark"
    bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    page.goto(static_url + DEMO + "?theme=light")
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") != bg
    page.set_viewport_size({"width": 360, "height": 740})
    page.wait_for_timeout(100)
    over = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
    assert over <= 0, f"the demo scrolls sideways by {over}px on a 360px screen"
    # touch: a tap on a select still changes what the demo shows
    page.select_option("#warp", "9")
    assert int(page.get_attribute("#quarter", "data-first")) == 32
