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
    wrap: int | None = None,
) -> Any:
    """A grid of a tile's elements, each filled by the colour of its `owner` and written with `label`.

    Drawn by `gpubook.plots.ownership_grid`: at most the page's width, `cell` and `fontsize` are
    upper bounds, labels never get smaller than the book's readable minimum, and `wrap` draws the
    columns in bands of that many.
    """
    from .plots import ownership_grid

    return ownership_grid(owner, label, title=title, xlabel=xlabel, ylabel=ylabel, cell=cell,
                          fontsize=fontsize, wrap=wrap)
