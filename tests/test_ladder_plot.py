"""The figure of a measured ladder: one bar per measured step with its interval, the baseline as
a band, a step without a record said in words, and no text below the page's smallest font."""

from __future__ import annotations

from gpubook import plots
from gpubook.facts.stats import Interval
from gpubook.models.ladder_plot import NOT_MEASURED, Panel, describe, plot_measured_ladder

T = 1e12


def iv(m: float, lo: float, hi: float) -> Interval:
    return Interval(m * T, lo * T, hi * T)


PANELS = [Panel("no mask", [("step 1", iv(300, 295, 305)), ("step 2", None), ("step 3", iv(500, 490, 510))],
                ("cuDNN", iv(550, 545, 556))),
          Panel("causal", [("step 4", iv(400, 390, 410))], ("cuDNN", None))]


def _gids(fig, prefix: str) -> list:
    return [a for ax in fig.axes for a in ax.get_children() if (a.get_gid() or "").startswith(prefix)]


def test_one_bar_per_measured_step_with_its_median_and_interval():
    fig = plot_measured_ladder(PANELS, peak=990 * T)
    bars = _gids(fig, "bar-")
    assert sorted(b.get_gid() for b in bars) == ["bar-causal-step 4", "bar-no mask-step 1", "bar-no mask-step 3"]
    widths = {b.get_gid(): b.get_width() for b in bars}
    assert widths["bar-no mask-step 3"] == 500 and widths["bar-causal-step 4"] == 400
    texts = [t.get_text() for ax in fig.axes for t in ax.texts]
    assert NOT_MEASURED in texts and "300" in texts and "510" not in texts
    assert fig.axes[0].get_xlim() == (0, 990)            # the peak ends the axis


def test_the_baseline_is_a_band_of_its_interval_only_where_it_was_measured():
    fig = plot_measured_ladder(PANELS)
    assert [b.get_gid() for b in _gids(fig, "band-")] == ["band-no mask"]
    band = _gids(fig, "band-")[0]
    box = band.get_bbox() if hasattr(band, "get_bbox") else None
    assert box is not None and (round(box.x0), round(box.x1)) == (545, 556)
    assert fig.axes[0].get_xlim()[1] > 556                # every interval fits without a peak


def test_the_figure_keeps_the_page_font_and_says_what_it_shows():
    fig = plot_measured_ladder(PANELS)
    assert min(plots.drawn_font_sizes(fig)) >= plots.MIN_FONT_PT
    words = describe(PANELS)
    assert "step 1 300" in words and f"step 2 {NOT_MEASURED}" in words and "cuDNN 550" in words
    assert f"cuDNN {NOT_MEASURED}" in words


def test_a_ladder_with_nothing_measured_still_draws():
    empty = [Panel("no mask", [("step 1", None)], ("cuDNN", None))]
    fig = plot_measured_ladder(empty, note="not measured yet: the timings come from a replay")
    assert not _gids(fig, "bar-") and plots.png_bytes(fig)
