"""The figure of a measured ladder: each step's rate with its interval, against one baseline.

A chapter gives `plot_measured_ladder` one panel per loop it timed (say, "no mask" and
"causal"); each panel holds its steps in order, every one a label and an Interval (or None where
the step has no record yet), and the baseline timed in that same loop, drawn as a band across
the panel. (`gpubook.book.ladder.plot_ladder` draws the Blackwell GEMM ladder's modelled bounds.)
"""

from __future__ import annotations

from typing import NamedTuple, Sequence

from matplotlib.figure import Figure

from ..facts.stats import Interval
from .plots import PAGE_WIDTH_IN, PALETTE, SIZES, TERA, new_figure

NOT_MEASURED = "not measured yet"


class Panel(NamedTuple):
    """One loop of a ladder: its title, its steps (label, rate) and its baseline (label, rate)."""

    title: str
    steps: Sequence[tuple[str, Interval | None]]
    baseline: tuple[str, Interval | None]


def _row_height(panels: Sequence[Panel]) -> float:
    return 1.0 + sum(0.9 + 0.42 * max(len(p.steps), 1) for p in panels)


def plot_measured_ladder(panels: Sequence[Panel], unit: str = "TFLOP/s", scale: float = TERA,
                peak: float | None = None, note: str | None = None) -> Figure:
    """Horizontal bars, one per step and top to bottom in the ladder's order, each with its 95 %
    interval as an error bar and its median printed; the baseline's median as a dashed line and
    its interval as a shaded band; the hardware's `peak` (same unit as the rates) as the axis
    limit where given. A step with no rate says so in place of its bar."""
    fig = new_figure(PAGE_WIDTH_IN, _row_height(panels))
    heights = [0.9 + 0.42 * max(len(p.steps), 1) for p in panels]
    axes = fig.subplots(len(panels), 1, squeeze=False, sharex=True,
                        gridspec_kw={"height_ratios": heights})[:, 0]
    rates = [r.hi / scale for p in panels for _, r in list(p.steps) + [p.baseline] if r is not None]
    top = peak / scale if peak else max(rates + [1.0]) * 1.15
    for ax, panel in zip(axes, panels):
        ax.set_facecolor("white")
        ax.tick_params(labelsize=SIZES["tick"])
        name, base = panel.baseline
        if base is not None:
            ax.axvspan(base.lo / scale, base.hi / scale, color=PALETTE["orange"], alpha=0.25, lw=0,
                       gid=f"band-{panel.title}")
            ax.axvline(base.median / scale, color=PALETTE["orange"], lw=1.6, ls="--",
                       label=f"{name}: {base.median / scale:.0f} {unit}", gid=f"base-{panel.title}")
        for i, (label, r) in enumerate(panel.steps):
            if r is None:
                ax.text(0.01 * top, i, NOT_MEASURED, va="center", fontsize=SIZES["note"],
                        color=PALETTE["grey"])
                continue
            m = r.median / scale
            ax.barh(i, m, height=0.6, color=PALETTE["blue"], gid=f"bar-{panel.title}-{label}")
            ax.errorbar(m, i, xerr=[[m - r.lo / scale], [r.hi / scale - m]], fmt="none",
                        ecolor=PALETTE["black"], capsize=3, lw=1)
            ax.annotate(f"{m:.0f}", (r.hi / scale, i), xytext=(4, 0), textcoords="offset points",
                        va="center", fontsize=SIZES["note"])
        ax.set_yticks(range(len(panel.steps)))
        ax.set_yticklabels([label for label, _ in panel.steps], fontsize=SIZES["legend"])
        ax.set_ylim(len(panel.steps) - 0.4, -0.6)
        ax.set_xlim(0, top)
        ax.grid(True, axis="x", color="#dddddd", lw=0.6)
        ax.set_axisbelow(True)
        ax.set_title(panel.title, fontsize=SIZES["title"], loc="left")
        if base is not None:
            ax.legend(loc="lower right", fontsize=SIZES["legend"], facecolor="white", framealpha=1.0)
    axes[-1].set_xlabel(f"{unit}, median and 95 % interval" + (" (axis ends at the dense peak)" if peak else ""),
                        fontsize=SIZES["label"])
    if note:
        axes[0].text(0.5, 0.5, note, transform=axes[0].transAxes, ha="center", va="center",
                     fontsize=SIZES["note"] + 1, color=PALETTE["grey"],
                     bbox=dict(boxstyle="round", fc="white", ec=PALETTE["grey"]))
    fig.tight_layout()
    return fig


def describe(panels: Sequence[Panel], unit: str = "TFLOP/s", scale: float = TERA) -> str:
    """The figure in words, for its alt text: every step's median and the baseline's."""
    parts = []
    for p in panels:
        steps = ", ".join(f"{label} {r.median / scale:.0f}" if r is not None else f"{label} {NOT_MEASURED}"
                          for label, r in p.steps)
        name, base = p.baseline
        against = f"{name} {base.median / scale:.0f}" if base is not None else f"{name} {NOT_MEASURED}"
        parts.append(f"{p.title}: {steps}; {against} {unit}.")
    return " ".join(parts)
