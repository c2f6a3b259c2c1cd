"""The book's figure writer: page-sized figures, their smallest font recorded in the PNG, grids
that wrap instead of shrinking their labels below the readable minimum."""

from __future__ import annotations

import io

import pytest
from PIL import Image

from gpubook import plots
from gpubook.facts.hardware import B200, H200
from gpubook.models.plots import draw_ownership_grid


def meta(fig) -> tuple[dict, int]:
    with Image.open(io.BytesIO(plots.png_bytes(fig))) as im:
        return dict(im.text), im.size[0]


def test_the_png_records_the_smallest_font_it_draws():
    fig = plots.new_figure(4, 2)
    ax = fig.add_subplot()
    ax.set_title("big", fontsize=14)
    ax.text(0.5, 0.5, "small", fontsize=6.5)
    ax.text(0.5, 0.2, "", fontsize=2)            # empty text draws nothing
    ax.tick_params(labelsize=9)
    info, _ = meta(fig)
    assert info["gpubook:min-font-pt"] == "6.50" and info["gpubook:dpi"] == str(plots.PNG_DPI)
    assert float(info["gpubook:min-font-px"]) == pytest.approx(6.5 * plots.PNG_DPI / 72)


@pytest.mark.parametrize("make", [
    lambda: plots.plot_roofline([B200, H200], marks=[("a", 1.0)]),
    lambda: plots.plot_bytes_in_flight([B200, H200], [100, 800, 2000], mark_ns=800),
    lambda: plots.plot_measured([], [B200], note="no measurement yet"),
    lambda: plots.plot_capacity(["a / SM", "b / GPU"], {"B200": [1e5, 1e11], "H200": [1e5, 0]}),
    lambda: draw_ownership_grid([[w] * 32 for w in range(4)], [[str(32 * w + i) for i in range(32)] for w in range(4)],
                                fontsize=4),
    lambda: draw_ownership_grid([[0] * 32] * 8, [[str(c) for c in range(32)]] * 8, cell=0.26, fontsize=4),
])
def test_book_figures_keep_9px_text_in_a_608px_column(make):
    """Shown 608 px wide (the text column at 1280 px), no text of a book figure is under 9 px."""
    info, natural = meta(make())
    shown = float(info["gpubook:min-font-px"]) * min(1.0, 608 / natural)
    assert shown >= 9.0, f"smallest text {shown:.1f} px"


def test_a_grid_wraps_its_columns_rather_than_shrink_its_labels():
    three = [[str(100 + c) for c in range(32)] for _ in range(4)]
    fig = draw_ownership_grid([[0] * 32] * 4, three)
    assert len(fig.axes) == 2                                  # 3-digit labels: two bands of 16
    assert [t.get_text() for t in fig.axes[1].get_xticklabels()][0] == "16"
    two = [[str(c) for c in range(32)] for _ in range(4)]
    assert len(draw_ownership_grid([[0] * 32] * 4, two).axes) == 1
    assert len(draw_ownership_grid([[0] * 32] * 4, two, wrap=16).axes) == 2
    sizes = plots.drawn_font_sizes(fig)
    assert min(sizes) >= plots.MIN_FONT_PT
