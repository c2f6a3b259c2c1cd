"""Figures drawn at build time from the book's own data: one palette, opaque white backgrounds.

Every figure is sized for the page: drawn about `PAGE_WIDTH_IN` inches wide with no text
smaller than `MIN_FONT_PT`, it keeps its smallest label at 9 CSS pixels or more in the
~600-pixel text column of a laptop screen. `png` records the smallest font of the figure in
the PNG itself (tEXt `gpubook:min-font-px`), and the browser tests read it back to check the
size each figure is shown at.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from ..facts.hardware import GPU
from .roofline import Point, peak_flops, ridge

# Okabe-Ito: distinguishable with the common colour-vision deficiencies, legible on white.
PALETTE = {"blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "orange": "#E69F00",
           "purple": "#CC79A7", "sky": "#56B4E9", "grey": "#555555", "black": "#000000"}
GPU_COLORS = {"B200": PALETTE["blue"], "H200": PALETTE["vermillion"], "H100": PALETTE["green"]}
DTYPE_STYLES = {"bf16": "-", "fp16": "-", "fp8": "--"}
X_RANGE = (1e-2, 1e4)  # FLOP per byte
TERA = 1e12

# Page geometry: figures are drawn this wide (inches) and never use a smaller font than this.
PAGE_WIDTH_IN = 6.6
MIN_FONT_PT = 8.0
SIZES = {"tick": 8.5, "label": 9.5, "legend": 8.0, "note": 8.0, "title": 10.5}
PNG_DPI = 144


def new_figure(width: float = PAGE_WIDTH_IN, height: float = 4.2) -> Figure:
    """A bare white Figure (not pyplot's: a notebook shows it only where the chapter glues it)."""
    fig = Figure(figsize=(width, height), dpi=110, facecolor="white")
    fig.patch.set_alpha(1.0)
    return fig


def _new_axes(ax: Axes | None, size: tuple[float, float] = (PAGE_WIDTH_IN, 4.4)) -> tuple[Figure, Axes]:
    if ax is None:
        ax = new_figure(*size).add_subplot()
    fig = ax.get_figure()
    fig.patch.set_facecolor("white")
    fig.patch.set_alpha(1.0)
    ax.set_facecolor("white")
    ax.tick_params(labelsize=SIZES["tick"])
    ax.xaxis.label.set_size(SIZES["label"])
    ax.yaxis.label.set_size(SIZES["label"])
    return fig, ax


def _color(gpu: GPU) -> str:
    return GPU_COLORS.get(gpu.name, PALETTE["grey"])


def plot_roofline(gpus: Sequence[GPU], points: Sequence[Point] = (), ax: Axes | None = None,
                  dtypes: Sequence[str] = ("bf16",), marks: Sequence[tuple[str, float]] = (),
                  note: str | None = None, title: str | None = None) -> Figure:
    """Log-log roofline of each GPU (HBM slope, one flat roof per dtype) with measured points.

    `marks` are (label, FLOP/byte) pairs drawn as vertical guides; `note` is written across the
    plot (e.g. to say that no measurement exists). Runs timed by bytes alone (copies) appear
    as dotted lines at the bandwidth they reached.
    """
    fig, ax = _new_axes(ax)
    x0, x1 = X_RANGE
    for n, gpu in enumerate(gpus):
        c = _color(gpu)
        lw = 1.6 + 0.8 * (len(gpus) - 1 - n)  # later GPUs thinner, so equal roofs stay visible
        for dt in dtypes:
            r, peak = ridge(gpu, dt), peak_flops(gpu, dt)
            ax.plot([x0, r, x1], [x0 * gpu.hbm_bandwidth / TERA, peak / TERA, peak / TERA],
                    DTYPE_STYLES.get(dt, "-"), color=c, lw=lw, gid=f"roof-{gpu.name}-{dt}",
                    label=f"{gpu.name} {dt}: {peak / TERA:.0f} TFLOP/s, "
                          f"{gpu.hbm_bandwidth / TERA:.2f} TB/s, ridge {r:.0f} FLOP/B")
            ax.plot([r], [peak / TERA], "o", color=c, ms=5, gid=f"ridge-{gpu.name}-{dt}")
    roof_colors = {_color(g) for g in gpus}
    cycle = [c for c in PALETTE.values() if c not in roof_colors]
    for n, p in enumerate(points):
        c = cycle[n % len(cycle)]
        tag = f"{p.label} ({p.gpu.replace('NVIDIA ', '')}, {p.date})"
        if p.intensity is None:  # timed by bytes alone: the bandwidth it reached, as its own roof
            bw = p.bandwidth / TERA
            ax.plot([x0, 1.0], [x0 * bw, bw], ":", color=c, lw=1.8, gid=f"copy-{p.label}",
                    label=f"{tag}: {p.bandwidth / TERA:.2f} TB/s, bytes only")
            continue
        marker, size = ("o", 9) if p.source == "book" else ("s", 6)
        ax.plot([p.intensity], [p.flop_rate / TERA], marker, color=c, mec="black", mew=0.6, ms=size,
                gid=f"point-{p.label}", label=tag, zorder=3)
    for label, x in marks:
        ax.axvline(x, color=PALETTE["grey"], lw=0.8, ls=":", zorder=0)
        ax.annotate(label, (x, 1.02), xycoords=("data", "axes fraction"), rotation=90,
                    fontsize=SIZES["note"], color=PALETTE["grey"], ha="center", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    top = max([peak_flops(g, d) for g in gpus for d in dtypes] or [1e15]) / TERA
    ax.set_ylim(x0 * min([g.hbm_bandwidth for g in gpus] or [1e12]) / TERA / 2, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("performance (TFLOP/s)")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    if note:
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=10,
                color=PALETTE["grey"], bbox=dict(boxstyle="round", fc="white", ec=PALETTE["grey"]))
    if title:
        ax.set_title(title, fontsize=SIZES["title"], pad=48 if marks else 6)
    ax.legend(loc="lower right", fontsize=SIZES["legend"], frameon=True, facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def plot_bytes_in_flight(gpus: Sequence[GPU], latency_ns: Sequence[float], ax: Axes | None = None,
                         mark_ns: float | None = None) -> Figure:
    """Bytes each SM must keep in flight to reach HBM peak, against an assumed memory latency."""
    fig, ax = _new_axes(ax, size=(PAGE_WIDTH_IN, 3.8))
    for gpu in gpus:
        kb = [gpu.hbm_bandwidth * t * 1e-9 / gpu.sms / 1024 for t in latency_ns]
        ax.plot(latency_ns, kb, color=_color(gpu), lw=2, label=f"{gpu.name}", gid=f"inflight-{gpu.name}")
    if mark_ns is not None:
        ax.axvline(mark_ns, color=PALETTE["grey"], ls=":", lw=1)
        ax.annotate("assumed latency", (mark_ns, 0.97), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", fontsize=SIZES["note"], color=PALETTE["grey"],
                    va="top")
    ax.set_xlabel("memory latency (ns, assumed)")
    ax.set_ylabel("bytes in flight per SM (KiB)")
    ax.set_xlim(min(latency_ns), max(latency_ns))
    ax.set_ylim(0, None)
    ax.grid(True, color="#dddddd", lw=0.6)
    ax.legend(loc="upper left", fontsize=SIZES["legend"], facecolor="white")
    fig.tight_layout()
    return fig


def drawn_font_sizes(fig: Figure, dpi: int = PNG_DPI) -> list[float]:
    """The font size (points) of every non-empty text the figure draws, in drawing order."""
    import io

    from matplotlib.backends.backend_agg import RendererAgg

    sizes: list[float] = []
    original = RendererAgg.draw_text

    def record(self, gc, x, y, s, prop, angle, ismath=False, mtext=None):  # noqa: ANN001
        if str(s).strip():
            sizes.append(float(prop.get_size_in_points()))
        return original(self, gc, x, y, s, prop, angle, ismath=ismath, mtext=mtext)

    RendererAgg.draw_text = record
    try:
        fig.savefig(io.BytesIO(), format="png", dpi=dpi, facecolor="white", bbox_inches="tight")
    finally:
        RendererAgg.draw_text = original
    return sizes


def png_bytes(fig: Figure, dpi: int = PNG_DPI) -> bytes:
    """The figure as PNG bytes on an opaque white background, with its smallest font recorded.

    The PNG carries tEXt chunks `gpubook:min-font-pt`, `gpubook:dpi` and `gpubook:min-font-px`
    (the smallest text in pixels of the image itself), so a reader of the page can tell how
    large that text appears once the image is scaled to the page.
    """
    import io

    sizes = drawn_font_sizes(fig, dpi)
    meta = {"Software": "gpubook.plots", "gpubook:dpi": str(dpi)}
    if sizes:
        meta["gpubook:min-font-pt"] = f"{min(sizes):.2f}"
        meta["gpubook:min-font-px"] = f"{min(sizes) * dpi / 72:.2f}"
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white", transparent=False, bbox_inches="tight",
                metadata=meta)
    return buf.getvalue()


def show_figures_as_book_pngs() -> bool:
    """In a notebook, display every matplotlib Figure through `png_bytes`, so a figure drawn with
    pyplot in a chapter records its smallest font like the book's own plots. Returns whether a
    notebook was there to set up."""
    try:
        from IPython import get_ipython
    except ImportError:
        return False
    ip = get_ipython()
    if ip is None or not hasattr(ip, "display_formatter"):
        return False
    try:
        # the inline backend registers its own PNG writer when first imported: import it first,
        # so that ours, registered after it, is the one that stays
        import matplotlib_inline.backend_inline  # noqa: F401
    except ImportError:
        pass
    ip.display_formatter.formatters["image/png"].for_type(Figure, png_bytes)
    return True


def png(fig: Figure, dpi: int = PNG_DPI):
    """The figure as an IPython PNG image (see `png_bytes`), ready for myst-nb glue or display."""
    from IPython.display import Image

    return Image(data=png_bytes(fig, dpi), format="png")


def plot_bandwidth(points: Sequence[Point], gpus: Sequence[GPU] = (), ax: Axes | None = None,
                   note: str | None = None) -> Figure:
    """Horizontal bars of the HBM bandwidth each run reached, against its GPU's peak."""
    runs = [p for p in points if p.bandwidth]
    fig, ax = _new_axes(ax, size=(PAGE_WIDTH_IN, 1.6 + 0.55 * max(len(runs), 3)))
    for g in gpus:
        ax.axvline(g.hbm_bandwidth / TERA, color=_color(g), lw=1, ls="--", zorder=0,
                   label=f"{g.name} HBM peak, {g.hbm_bandwidth / TERA:.2f} TB/s", gid=f"hbm-{g.name}")
    for i, p in enumerate(runs):
        c = PALETTE["blue"] if p.source == "book" else PALETTE["grey"]
        ax.barh(i, p.bandwidth / TERA, color=c, height=0.6, gid=f"bar-{p.label}")
        hw = p.hardware
        if hw is not None:
            ax.plot([hw.hbm_bandwidth / TERA] * 2, [i - 0.4, i + 0.4], color=_color(hw), lw=2.5,
                    gid=f"peak-{p.label}")
            ax.annotate(f"{100 * p.bandwidth / hw.hbm_bandwidth:.0f}%", (p.bandwidth / TERA, i),
                        xytext=(-4, 0), textcoords="offset points", ha="right", va="center",
                        fontsize=SIZES["note"], color="white")
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"{p.label}\n{p.gpu.replace('NVIDIA ', '')}, {p.date}" for p in runs],
                       fontsize=SIZES["legend"])
    ax.set_ylim(len(runs) - 0.4, -1.5 if gpus else -0.6)  # top to bottom, a free band on top for the legend
    peaks = [p.hardware.hbm_bandwidth / TERA for p in runs if p.hardware is not None]
    peaks += [g.hbm_bandwidth / TERA for g in gpus]
    ax.set_xlim(0, max(peaks + [p.bandwidth / TERA for p in runs] + [1.0]) * 1.08)
    ax.set_xlabel("HBM bandwidth reached (TB/s)")
    ax.grid(True, axis="x", color="#dddddd", lw=0.6)
    if note or not runs:
        ax.set_yticks([])
        ax.text(0.5, 0.5, note or "no measurement yet", transform=ax.transAxes, ha="center",
                va="center", fontsize=10, color=PALETTE["grey"],
                bbox=dict(boxstyle="round", fc="white", ec=PALETTE["grey"]))
    if gpus:
        ax.legend(loc="upper right", ncol=max(1, len(gpus)), fontsize=SIZES["legend"],
                  facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def plot_measured(points: Sequence[Point], gpus: Sequence[GPU], note: str | None = None) -> Figure:
    """Measured runs, one panel above the other so each keeps the page's width: runs with FLOPs
    on the roofline (top), every run's bandwidth (bottom)."""
    runs = [p for p in points if p.bandwidth]
    bars_h = 1.6 + 0.55 * max(len(runs), 3)
    fig = new_figure(PAGE_WIDTH_IN, 4.6 + bars_h)
    top, bottom = fig.subplots(2, 1, gridspec_kw={"height_ratios": [4.6, bars_h]})
    with_flops = [p for p in points if p.intensity is not None]
    plot_roofline(gpus, points=with_flops, ax=top,
                  note=note or (None if with_flops else "no measured run counts FLOPs yet"))
    top.set_title("runs that count FLOPs, on the roofline", fontsize=SIZES["title"])
    plot_bandwidth(points, gpus=gpus, ax=bottom, note=note)
    bottom.set_title("bandwidth reached, every run that counts bytes", fontsize=SIZES["title"])
    fig.tight_layout(h_pad=1.5)
    return fig


def plot_capacity(names: Sequence[str], values: dict[str, Sequence[float]], xlabel: str = "bytes",
                  missing: str = "{gpu}: none") -> Figure:
    """Grouped horizontal bars on a log axis: one group per name, one bar per GPU in `values`.

    A zero value has no bar on a log axis; `missing` is written where it would be.
    """
    fig, ax = _new_axes(None, size=(PAGE_WIDTH_IN, 0.8 + 0.62 * len(names)))
    gpus = list(values)
    h = 0.8 / max(len(gpus), 1)
    positive = [v for vs in values.values() for v in vs if v]
    for n, gpu in enumerate(gpus):
        offset = (n - (len(gpus) - 1) / 2) * h
        color = GPU_COLORS.get(gpu, list(PALETTE.values())[n % len(PALETTE)])
        ys = [i + offset for i in range(len(names))]
        vals = [v if v else math.nan for v in values[gpu]]
        ax.barh(ys, vals, height=h, color=color, label=gpu, gid=f"capacity-{gpu}")
        for y, v in zip(ys, values[gpu]):
            if not v:
                ax.text(min(positive) * 1.3, y, missing.format(gpu=gpu), va="center",
                        fontsize=SIZES["note"], color=PALETTE["black"])
    # the top groups (per-SM stores) are short bars: the legend sits in the empty space right of them
    return finish_log_rows(fig, ax, names, (min(positive) / 2, max(positive) * 4), xlabel, "upper right")


def finish_log_rows(fig: Figure, ax: Axes, names: Sequence[str], xlim: tuple[float, float],
                    xlabel: str, legend: str) -> Figure:
    """The common ending of a chart of horizontal bars on a log axis: one row per name, the
    first on top, a light vertical grid behind the bars, the legend at `legend` (a `loc`, or
    "above" the axes)."""
    ax.set_yticks(list(range(len(names))), list(names))
    ax.set_xscale("log")
    ax.set_xlim(*xlim)
    ax.set_xlabel(xlabel)
    ax.invert_yaxis()
    ax.grid(True, axis="x", color="#dddddd", lw=0.6)
    ax.set_axisbelow(True)
    above = legend == "above"  # in one row over the axes, where it covers no bar and no label
    ax.legend(loc="lower center" if above else legend, bbox_to_anchor=(0.5, 1.0) if above else None,
              ncol=len(ax.get_legend_handles_labels()[1]) if above else 1, fontsize=SIZES["legend"],
              facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def ownership_grid(owner: Sequence[Sequence[int]], label: Sequence[Sequence[str]] | None = None,
                   title: str = "", xlabel: str = "column", ylabel: str = "row", cell: float = 0.5,
                   fontsize: float | None = None, width: float = PAGE_WIDTH_IN,
                   wrap: int | None = None) -> Figure:
    """A grid of a tile's elements, each filled by the colour of its `owner` and written with `label`.

    Cells are at most `cell` inches and the figure at most `width` inches wide; labels take the
    largest size (up to `fontsize`, 9 pt by default) that fits their cell, never less than
    `MIN_FONT_PT`: a grid too wide for that is cut into bands of columns drawn one above the
    other (columns 0-15, then 16-31, ...), each with its own column numbers. `wrap` asks for
    bands of that many columns (figures meant to be compared can then share one shape).
    """
    from matplotlib.colors import BoundaryNorm, ListedColormap

    from .layouts import PALETTE as FILLS

    rows, cols = len(owner), len(owner[0])
    texts = [str(s) for row in label for s in row] if label is not None else []
    longest = max((len(line) for s in texts for line in s.split("\n")), default=1) or 1
    lines = max((s.count("\n") + 1 for s in texts), default=1)
    cap = max(fontsize or 9.0, MIN_FONT_PT)
    margin = 0.9  # inches: row numbers and the row label

    def fit(n: int) -> tuple[float, float]:
        c = min(cell, (width - margin) / n)
        pt = c * 72
        return c, min(cap, 0.85 * pt / (0.64 * longest), 0.8 * pt / (1.25 * lines))

    bands = cols // wrap if wrap and cols % wrap == 0 and cols > wrap else 1
    c, font = fit(cols // bands)
    while texts and font < MIN_FONT_PT and cols % (2 * bands) == 0 and cols // (2 * bands) >= 4:
        bands *= 2
        c, font = fit(cols // bands)
    per = cols // bands
    band_h = rows * c
    fig = new_figure(per * c + margin, bands * (band_h + 0.45) + (0.45 if title else 0.1) + 0.2)
    axes = fig.subplots(bands, 1, squeeze=False)[:, 0]
    n = len(FILLS)
    cmap, norm = ListedColormap(FILLS), BoundaryNorm([i - 0.5 for i in range(n + 1)], n)
    step_c = 1 if per <= 16 else 8
    step_r = 1 if rows <= 16 else 8
    for b, ax in enumerate(axes):
        c0 = b * per
        colours = [[int(owner[r][c0 + k]) % n for k in range(per)] for r in range(rows)]
        ax.set_facecolor("white")
        ax.pcolormesh(range(per + 1), range(rows + 1), colours, cmap=cmap, norm=norm,
                      edgecolors="#555555", linewidth=0.4)
        if label is not None:
            for r in range(rows):
                for k in range(per):
                    ax.text(k + 0.5, r + 0.5, str(label[r][c0 + k]), ha="center", va="center",
                            fontsize=font, color="black", linespacing=1.05)
        ax.set_xlim(0, per)
        ax.set_ylim(rows, 0)
        ax.set_aspect("equal")
        ax.set_xticks([k + 0.5 for k in range(0, per, step_c)], [str(c0 + k) for k in range(0, per, step_c)])
        ax.set_yticks([r + 0.5 for r in range(0, rows, step_r)], [str(r) for r in range(0, rows, step_r)])
        ax.tick_params(length=0, labelsize=SIZES["tick"], colors="black")
        ax.xaxis.tick_top()
        ax.xaxis.set_label_position("top")
        ax.set_xlabel(xlabel if b == 0 else f"{xlabel}, continued", fontsize=SIZES["label"], color="black")
        ax.set_ylabel(ylabel, fontsize=SIZES["label"], color="black")
        for side in ax.spines.values():
            side.set_visible(False)
    if title:
        axes[0].set_title(title, fontsize=SIZES["title"], color="black", pad=10)
    fig.tight_layout(h_pad=0.8)
    return fig


show_figures_as_book_pngs()


def draw_ownership_grid(
    owner: Sequence[Sequence[int]],
    label: Sequence[Sequence[str]] | None = None,
    title: str = "",
    xlabel: str = "column",
    ylabel: str = "row",
    cell: float = 0.42,
    fontsize: float = 6.0,
    wrap: int | None = None,
) -> Any:
    """A grid of a tile's elements, each filled by the colour of its `owner` and written with `label`.

    Drawn by `ownership_grid` with the defaults of the book's small grids: at most the page's width, `cell` and `fontsize` are
    upper bounds, labels never get smaller than the book's readable minimum, and `wrap` draws the
    columns in bands of that many.
    """
    return ownership_grid(owner, label, title=title, xlabel=xlabel, ylabel=ylabel, cell=cell,
                          fontsize=fontsize, wrap=wrap)

