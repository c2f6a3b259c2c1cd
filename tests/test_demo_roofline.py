"""The roofline explorer (chapter 2) in a real browser: its numbers are the hardware table's.

Every rate, ridge and bound the demo shows is recomputed here from gpubook.facts.hardware and
gpubook.roofline; dragging across the chart, the slider, the GPU and the roof all change
what it shows; it works at phone width by touch, in both themes, embedded in chapter 2.
"""

from __future__ import annotations

import pytest

from browser_support import (  # noqa: F401
    BROWSER_MARKS, THEMES, browser, opened_demo, chapter_demo, sideways_overflow,
)
from gpubook import hardware as hw
from gpubook import roofline as rl

pytestmark = BROWSER_MARKS


def rates(gpu: hw.GPU) -> dict[str, float]:
    """Peak rate of each roof the demo offers, from the hardware table."""
    return {"tensor": rl.peak_flops(gpu, "bf16"),
            "fp32": gpu.sms * gpu.fp32_lanes_per_sm * 2 * gpu.tensor_clock_hz,   # an FMA is 2 FLOP
            "sfu": gpu.sms * gpu.sfu_per_sm * gpu.tensor_clock_hz}


def shown(page: object) -> dict[str, str]:
    return page.locator("#readout").evaluate("e => Object.assign({}, e.dataset)")


@pytest.fixture()
def demo(browser: object, served_book: str):
    with opened_demo(browser, served_book, "roofline") as page:
        yield page


def test_every_number_is_the_hardware_tables(demo: object) -> None:
    checked = 0
    for name in ("B200", "H200"):
        gpu = hw.GPUS[name]
        demo.check(f"input[name=gpu][value='{name}']")
        for roof, peak in rates(gpu).items():
            demo.check(f"input[name=roof][value='{roof}']")
            ridge = peak / gpu.hbm_bandwidth
            if roof == "tensor":
                assert ridge == pytest.approx(rl.ridge(gpu))
            for intensity in (0.05, ridge / 2, ridge, ridge * 3, 5000.0):
                demo.evaluate("i => setIntensity(i)", intensity)
                got = shown(demo)
                i = float(got["intensity"])
                assert i == pytest.approx(intensity, rel=1e-9)
                assert got["gpu"] == name and got["roof"] == roof
                assert float(got["peak"]) == pytest.approx(peak, rel=1e-12)
                assert float(got["ridge"]) == pytest.approx(ridge, rel=1e-12)
                assert float(got["attainable"]) == pytest.approx(min(peak, i * gpu.hbm_bandwidth), rel=1e-12)
                assert float(got["pctRidge"]) == pytest.approx(100 * i / ridge, rel=1e-9)
                assert got["bound"] == ("memory-bound" if i < ridge else "compute-bound")
                assert demo.inner_text("#r-bound") == got["bound"]
                checked += 1
    assert checked == 2 * 3 * 5
    # what the text says for the tensor-core ridge of a B200
    demo.check("input[name=gpu][value='B200']")
    demo.check("input[name=roof][value='tensor']")
    assert demo.inner_text("#r-ridge") == f"{rl.ridge(hw.B200):.0f} FLOP/B"
    assert demo.inner_text("#r-bw") == f"{hw.B200.hbm_bandwidth / 1e12:.2f} TB/s"


def test_the_lower_roofs_are_drawn_below_the_tensor_roof(demo: object) -> None:
    for roof in ("fp32", "sfu"):
        assert demo.locator(f"polyline[data-roof='{roof}']").count() == 1
        demo.uncheck(f"#show-{roof}")
        assert demo.locator(f"polyline[data-roof='{roof}']").count() == 0
        demo.check(f"#show-{roof}")
    ys = {r: demo.locator(f"polyline[data-roof='{r}']").evaluate(
        "p => Math.min(...p.getAttribute('points').split(' ').map(q => Number(q.split(',')[1])))")
        for r in ("tensor", "fp32", "sfu")}
    assert ys["tensor"] < ys["fp32"] < ys["sfu"]   # screen y grows downwards: the tensor roof is highest


def test_dragging_and_the_slider_move_the_kernel(demo: object) -> None:
    box = demo.locator("#chart").bounding_box()
    before = shown(demo)
    demo.mouse.move(box["x"] + box["width"] * 0.25, box["y"] + box["height"] / 2)
    demo.mouse.down()
    demo.mouse.move(box["x"] + box["width"] * 0.85, box["y"] + box["height"] / 2, steps=5)
    demo.mouse.up()
    after = shown(demo)
    assert float(after["intensity"]) > 100 * float(before["intensity"])
    assert after["bound"] == "compute-bound" and before["bound"] == "memory-bound"
    demo.fill("#intensity", "-1")
    demo.dispatch_event("#intensity", "input")
    assert float(shown(demo)["intensity"]) == pytest.approx(0.1)
    demo.focus("#chart")
    demo.keyboard.press("Shift+ArrowRight")
    assert float(shown(demo)["intensity"]) == pytest.approx(10 ** -0.5)
    ridge_b200 = float(shown(demo)["ridge"])
    demo.check("input[name=gpu][value='H200']")
    assert float(shown(demo)["ridge"]) != ridge_b200


@pytest.mark.parametrize("theme", THEMES)
def test_works_by_touch_on_a_phone_in_chapter_2(browser: object, served_book: str, theme: str) -> None:
    with chapter_demo(browser, served_book, "02-roofline", "demo-roofline", theme) as (page, frame):
        chart = frame.locator("#chart")
        chart.scroll_into_view_if_needed()
        box = chart.bounding_box()
        before = float(frame.locator("#readout").get_attribute("data-intensity"))
        page.touchscreen.tap(box["x"] + box["width"] * 0.9, box["y"] + box["height"] / 2)
        after = float(frame.locator("#readout").get_attribute("data-intensity"))
        assert after > 100 * before
        frame.locator("input[name=roof][value='sfu']").tap()
        assert frame.locator("#readout").get_attribute("data-roof") == "sfu"
        size = frame.evaluate("() => parseFloat(getComputedStyle(document.querySelector('#chart text')).fontSize)")
        scale = frame.evaluate("() => { const c = document.querySelector('#chart'); return c.getBoundingClientRect().width / c.viewBox.baseVal.width; }")
        assert size * scale >= 11, f"chart text of {size * scale:.1f} px on a phone"
        assert sideways_overflow(frame) <= 0
