"""Figures drawn at build time from the book's own data: one palette, opaque white backgrounds."""

from __future__ import annotations

from typing import Sequence

from matplotlib.axes import Axes
from matplotlib.figure import Figure

from .hardware import GPU
from .roofline import Point, peak_flops, ridge

# Okabe-Ito: distinguishable with the common colour-vision deficiencies, legible on white.
PALETTE = {"blue": "#0072B2", "vermillion": "#D55E00", "green": "#009E73", "orange": "#E69F00",
           "purple": "#CC79A7", "sky": "#56B4E9", "grey": "#555555", "black": "#000000"}
GPU_COLORS = {"B200": PALETTE["blue"], "H200": PALETTE["vermillion"], "H100": PALETTE["green"]}
DTYPE_STYLES = {"bf16": "-", "fp16": "-", "fp8": "--"}
X_RANGE = (1e-2, 1e4)  # FLOP per byte
TERA = 1e12


def _new_axes(ax: Axes | None, size: tuple[float, float] = (7.5, 4.8)) -> tuple[Figure, Axes]:
    if ax is None:
        # a bare Figure, not pyplot's: the notebook shows it only where the chapter glues it
        fig = Figure(figsize=size, dpi=110, facecolor="white")
        ax = fig.add_subplot()
    fig = ax.get_figure()
    fig.patch.set_facecolor("white")
    fig.patch.set_alpha(1.0)
    ax.set_facecolor("white")
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
                    fontsize=7.5, color=PALETTE["grey"], ha="center", va="bottom")
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlim(x0, x1)
    top = max([peak_flops(g, d) for g in gpus for d in dtypes] or [1e15]) / TERA
    ax.set_ylim(x0 * min([g.hbm_bandwidth for g in gpus] or [1e12]) / TERA / 2, top * 3)
    ax.set_xlabel("arithmetic intensity (FLOP per byte of HBM traffic)")
    ax.set_ylabel("performance (TFLOP/s)")
    ax.grid(True, which="major", color="#dddddd", lw=0.6)
    if note:
        ax.text(0.5, 0.5, note, transform=ax.transAxes, ha="center", va="center", fontsize=11,
                color=PALETTE["grey"], bbox=dict(boxstyle="round", fc="white", ec=PALETTE["grey"]))
    if title:
        ax.set_title(title, fontsize=10, pad=40 if marks else 6)
    ax.legend(loc="lower right", fontsize=7.5, frameon=True, facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def plot_bytes_in_flight(gpus: Sequence[GPU], latency_ns: Sequence[float], ax: Axes | None = None,
                         mark_ns: float | None = None) -> Figure:
    """Bytes each SM must keep in flight to reach HBM peak, against an assumed memory latency."""
    fig, ax = _new_axes(ax, size=(6.5, 3.8))
    for gpu in gpus:
        kb = [gpu.hbm_bandwidth * t * 1e-9 / gpu.sms / 1024 for t in latency_ns]
        ax.plot(latency_ns, kb, color=_color(gpu), lw=2, label=f"{gpu.name}", gid=f"inflight-{gpu.name}")
    if mark_ns is not None:
        ax.axvline(mark_ns, color=PALETTE["grey"], ls=":", lw=1)
        ax.annotate("assumed latency", (mark_ns, 0.97), xycoords=("data", "axes fraction"),
                    xytext=(4, 0), textcoords="offset points", fontsize=8, color=PALETTE["grey"],
                    va="top")
    ax.set_xlabel("memory latency (ns, assumed)")
    ax.set_ylabel("bytes in flight per SM (KiB)")
    ax.set_xlim(min(latency_ns), max(latency_ns))
    ax.set_ylim(0, None)
    ax.grid(True, color="#dddddd", lw=0.6)
    ax.legend(loc="upper left", fontsize=8, facecolor="white")
    fig.tight_layout()
    return fig


def png(fig: Figure, dpi: int = 144):
    """The figure as an IPython PNG image on an opaque white background, ready for myst-nb glue."""
    import io

    from IPython.display import Image

    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, facecolor="white", transparent=False, bbox_inches="tight")
    return Image(data=buf.getvalue(), format="png")


def plot_bandwidth(points: Sequence[Point], gpus: Sequence[GPU] = (), ax: Axes | None = None,
                   note: str | None = None) -> Figure:
    """Horizontal bars of the HBM bandwidth each run reached, against its GPU's peak."""
    fig, ax = _new_axes(ax, size=(6.5, 3.8))
    runs = [p for p in points if p.bandwidth]
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
                        fontsize=7.5, color="white")
    ax.set_yticks(range(len(runs)))
    ax.set_yticklabels([f"{p.label}\n{p.gpu.replace('NVIDIA ', '')}, {p.date}" for p in runs], fontsize=7)
    ax.set_ylim(len(runs) + 0.5, -0.7)  # top to bottom, with room for the legend below
    peaks = [p.hardware.hbm_bandwidth / TERA for p in runs if p.hardware is not None]
    peaks += [g.hbm_bandwidth / TERA for g in gpus]
    ax.set_xlim(0, max(peaks + [p.bandwidth / TERA for p in runs] + [1.0]) * 1.08)
    ax.set_xlabel("HBM bandwidth reached (TB/s)")
    ax.grid(True, axis="x", color="#dddddd", lw=0.6)
    if note or not runs:
        ax.set_yticks([])
        ax.text(0.5, 0.5, note or "no measurement yet", transform=ax.transAxes, ha="center",
                va="center", fontsize=11, color=PALETTE["grey"],
                bbox=dict(boxstyle="round", fc="white", ec=PALETTE["grey"]))
    if gpus:
        ax.legend(loc="lower left", fontsize=7.5, facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig


def plot_measured(points: Sequence[Point], gpus: Sequence[GPU], note: str | None = None) -> Figure:
    """Measured runs: runs with FLOPs on the roofline (left), every run's bandwidth (right)."""
    fig = Figure(figsize=(12, 4.8), dpi=110, facecolor="white")
    left, right = fig.subplots(1, 2, gridspec_kw={"width_ratios": [1.25, 1]})
    with_flops = [p for p in points if p.intensity is not None]
    plot_roofline(gpus, points=with_flops, ax=left,
                  note=note or (None if with_flops else "no measured run counts FLOPs yet"))
    left.set_title("runs that count FLOPs, on the roofline", fontsize=10)
    plot_bandwidth(points, gpus=gpus, ax=right, note=note)
    right.set_title("bandwidth reached, every run that counts bytes", fontsize=10)
    fig.tight_layout()
    return fig
