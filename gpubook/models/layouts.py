"""Shared-memory banks, XOR swizzles and ownership pictures, computed on the CPU."""

from __future__ import annotations

from typing import Sequence

from ..facts.hardware import SMEM_BANK_BYTES, SMEM_BANKS

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
