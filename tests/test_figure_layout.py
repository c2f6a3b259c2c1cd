"""Where the book's bar charts put their legend and their log axis: the legend covers no bar and
no label, and a log axis starts less than a decade and a half below the data it shows."""

from __future__ import annotations

import io
import math

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.transforms import Bbox
from PIL import Image

from gpubook import plots
from gpubook.book import blockscaled as bs
from gpubook.book import gemm as gg

# chapter 12's errors, as the book's build drew them (format x kind of data)
FORMATS = ["bf16 (reference)", "E4M3, one scale per tensor", "MXFP8 (E4M3, 32-blocks)",
           "MXFP8 (E4M3), scale rounded up", "MXFP8 (E5M2, 32-blocks)", "E2M1, one scale per tensor",
           "MXFP4 (E2M1, 32-blocks)", "NVFP4 (E2M1, 16-blocks)"]
ERRORS = {"Gaussian": [1.7e-3, 2.6e-2, 2.9e-2, 2.7e-2, 5.4e-2, 1.4e-1, 1.2e-1, 9.5e-2],
          "with outliers": [1.6e-3, 2.5e-2, 3.5e-2, 2.5e-2, 5.6e-2, 4.1e-1, 1.3e-1, 5.7e-2],
          "rows 2^±12 apart": [1.7e-3, 4.0e-1, 2.9e-2, 2.7e-2, 5.4e-2, 9.0e-1, 1.2e-1, 4.0e-1]}


def ladder_rows(published: dict[int, float | None]):
    plan = gg.Plan(128, 128, 64)
    return [gg.Row(s, f"gemm_v{s}", "", (4096,) * 3, gg.bound(4096, 4096, 4096, plan), pub, None)
            for s, pub in published.items()]


def covered(fig):
    """The legend's box and the boxes of every bar and every text inside the axes, in pixels."""
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    legend = ax.get_legend().get_window_extent(renderer)
    # a bar as drawn: clipped to the axes (a log axis cuts off a bar's foot below its limit)
    bars = [Bbox.intersection(p.get_window_extent(renderer), ax.bbox) for p in ax.patches]
    bars = [b for b in bars if b is not None]
    texts = [t.get_window_extent(renderer) for t in ax.texts if t.get_text()]
    return legend, bars, texts


def overlaps(a, b) -> bool:
    return a.x0 < b.x1 and b.x0 < a.x1 and a.y0 < b.y1 and b.y0 < a.y1


def assert_legend_clear(fig) -> None:
    legend, bars, texts = covered(fig)
    assert bars
    hit = [b for b in bars + texts if overlaps(legend, b)]
    assert not hit, f"the legend {legend} covers {len(hit)} bars or labels, e.g. {hit[0]}"
    page = fig.bbox
    assert page.x0 <= legend.x0 and legend.x1 <= page.x1 and page.y0 <= legend.y0 and legend.y1 <= page.y1


def smallest_font_px(fig) -> float:
    with Image.open(io.BytesIO(plots.png_bytes(fig))) as im:
        shown = min(1.0, 608 / im.size[0])
        return float(im.text["gpubook:min-font-px"]) * shown


def test_the_format_errors_legend_covers_no_bar_and_no_value():
    fig = bs.plot_errors(FORMATS, ERRORS, "relative RMS error of a decoded row, mean over the rows")
    assert_legend_clear(fig)
    assert [t.get_text() for t in fig.axes[0].get_legend().get_texts()] == list(ERRORS)
    assert smallest_font_px(fig) >= 9.0


@pytest.mark.parametrize("published", [
    {3: None, 4: None, 5: None, 6: None, 7: None},
    {s: gg.published_tflops(s) for s in (3, 4, 5, 6, 7)},
    {7: 600.0, 8: 1300.0, 9: None, 10: None, 11: 1400.0},
])
def test_the_ladder_legend_covers_no_bar(published):
    fig = gg.plot_ladder(ladder_rows(published))
    assert_legend_clear(fig)
    assert smallest_font_px(fig) >= 9.0


@pytest.mark.parametrize("published", [
    {3: None, 4: None, 5: None},
    {s: gg.published_tflops(s) for s in (3, 4, 5, 6, 7)},
    {7: 600.0, 8: 1300.0, 9: None, 10: None, 11: 1400.0},
    {3: 3.0, 4: None},
])
def test_the_ladder_log_axis_starts_near_its_smallest_value(published):
    rows = ladder_rows(published)
    fig = gg.plot_ladder(rows)
    ax = fig.axes[0]
    shown = [r.bound.tflops for r in rows] + [v for v in published.values() if v]
    low, _ = ax.get_ylim()
    base = min(shown)
    # a power of ten, at most half the smallest value (the shortest bar shows) and less than
    # twenty times below it (no empty decade under the data)
    assert low == pytest.approx(10 ** round(math.log10(low)))
    assert base / 20 < low <= base / 2, (low, base)
    # every bar stands on the axis' lower edge and reaches its value
    for bar, r in zip(ax.patches, rows):
        assert bar.get_y() == pytest.approx(low)
        assert bar.get_y() + bar.get_height() == pytest.approx(r.bound.tflops)


def test_log_base_is_the_power_of_ten_under_half_the_smallest():
    assert gg.log_base([600.0, 2000.0]) == 100.0
    assert gg.log_base([150.0]) == 10.0
    assert gg.log_base([2.5]) == 1.0
    assert gg.log_base([0.03]) == pytest.approx(0.01)
