"""Shared-memory banks, XOR swizzles and ownership pictures, computed on the CPU."""

from __future__ import annotations

from typing import Any, Sequence

from .hardware import SMEM_BANK_BYTES, SMEM_BANKS

SWIZZLE_MODES = (0, 32, 64, 128)
# One palette for every ownership picture of the book: light fills that keep black labels legible.
PALETTE = (
    "#a6cee3", "#b2df8a", "#fb9a99", "#fdbf6f", "#cab2d6", "#ffff99", "#8dd3c7", "#d9d9d9",
    "#80b1d3", "#fdb462", "#b3de69", "#fccde5", "#bc80bd", "#ccebc5", "#ffed6f", "#bebada",
)


def swizzle(byte_addr: int, mode: int) -> int:
    """The byte address a `mode`-byte XOR swizzle (0, 32, 64 or 128) moves `byte_addr` to."""
    if mode not in SWIZZLE_MODES:
        raise ValueError(f"swizzle mode must be one of {SWIZZLE_MODES} bytes, got {mode}")
    if mode == 0:
        return byte_addr
    return byte_addr ^ (((byte_addr >> 7) & (mode // 16 - 1)) << 4)


def bank(byte_addr: int) -> int:
    """The shared-memory bank (4-byte banks, 32 of them) that holds `byte_addr`."""
    return (byte_addr // SMEM_BANK_BYTES) % SMEM_BANKS


def wavefronts(byte_addrs: Sequence[int]) -> int:
    """Passes one warp-wide 4-byte shared access needs: most distinct words in any one bank."""
    words_in_bank: dict[int, set[int]] = {}
    for a in byte_addrs:
        words_in_bank.setdefault(bank(a), set()).add(a // SMEM_BANK_BYTES)
    return max((len(w) for w in words_in_bank.values()), default=0)


def conflicts(byte_addrs: Sequence[int]) -> int:
    """Extra passes (bank conflicts) of one warp's 4-byte accesses; threads reading one word share it."""
    return max(wavefronts(byte_addrs) - 1, 0)


def draw_ownership_grid(
    owner: Sequence[Sequence[int]],
    label: Sequence[Sequence[str]] | None = None,
    title: str = "",
    xlabel: str = "column",
    ylabel: str = "row",
    cell: float = 0.42,
    fontsize: float = 6.0,
) -> Any:
    """A grid of a tile's elements, each filled by the colour of its `owner` and written with `label`."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from matplotlib.colors import BoundaryNorm, ListedColormap

    rows, cols = len(owner), len(owner[0])
    fig, ax = plt.subplots(figsize=(max(cols * cell, 2.5) + 0.6, max(rows * cell, 1.5) + 0.7))
    fig.patch.set_facecolor("white")
    fig.patch.set_alpha(1.0)
    ax.set_facecolor("white")
    n = len(PALETTE)
    colours = [[int(owner[r][c]) % n for c in range(cols)] for r in range(rows)]
    ax.pcolormesh(range(cols + 1), range(rows + 1), colours, cmap=ListedColormap(PALETTE),
                  norm=BoundaryNorm([i - 0.5 for i in range(n + 1)], n), edgecolors="#555555",
                  linewidth=0.4)
    if label is not None:
        for r in range(rows):
            for c in range(cols):
                ax.text(c + 0.5, r + 0.5, label[r][c], ha="center", va="center",
                        fontsize=fontsize, color="black")
    ax.set_xlim(0, cols)
    ax.set_ylim(rows, 0)
    ax.set_aspect("equal")
    step_c = 1 if cols <= 16 else 8
    step_r = 1 if rows <= 16 else 8
    ax.set_xticks([c + 0.5 for c in range(0, cols, step_c)], [str(c) for c in range(0, cols, step_c)])
    ax.set_yticks([r + 0.5 for r in range(0, rows, step_r)], [str(r) for r in range(0, rows, step_r)])
    ax.tick_params(length=0, labelsize=7, colors="black")
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(xlabel, fontsize=8, color="black")
    ax.set_ylabel(ylabel, fontsize=8, color="black")
    for side in ax.spines.values():
        side.set_visible(False)
    if title:
        ax.set_title(title, fontsize=9, color="black", pad=18)
    fig.tight_layout()
    return fig
