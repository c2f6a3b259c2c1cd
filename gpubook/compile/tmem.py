"""Tensor memory (sm_100a): its geometry, the rules of allocation and access, and the base check.

TIRx's `T.TMEMPool` hands out *static* column offsets and compiles them into every
`tcgen05.mma`, `tcgen05.ld` and `tcgen05.st` of the kernel. They are right only if the
allocation that `tcgen05.alloc` made starts at the column the kernel assumes (column 0 unless
the kernel says otherwise). `check_base` emits the check that the pool leaves out.
"""

from __future__ import annotations

from typing import Any

LANES = 128          # TMEM lanes per SM: one per row of a 128-row accumulator
COLUMNS = 512        # 32-bit columns per lane
CELL_BITS = 32
MIN_ALLOC = 32       # tcgen05.alloc takes a power of two of at least 32 columns
LANES_PER_WARP = 32

# tcgen05.ld / tcgen05.st shapes: (TMEM lanes, bits per lane) that one repetition of one warp covers.
SHAPES: dict[str, tuple[int, int]] = {
    "32x32b": (32, 32), "16x64b": (16, 64), "16x128b": (16, 128), "16x256b": (16, 256),
}
NUMS = (1, 2, 4, 8, 16, 32, 64, 128)
MAX_LD_REGISTERS = 128  # the PTX ISA caps one tcgen05.ld/st at 128 registers per thread


def bytes_per_sm() -> int:
    """TMEM capacity of one SM: 128 lanes x 512 columns x 32 bits."""
    return LANES * COLUMNS * CELL_BITS // 8


def columns_for(cols: int, dtype_bits: int = 32) -> int:
    """TMEM columns that one row of `cols` values of `dtype_bits` bits occupies."""
    bits = cols * dtype_bits
    if bits % CELL_BITS:
        raise ValueError(f"{cols} values of {dtype_bits} bits do not fill whole 32-bit columns")
    return bits // CELL_BITS


def alloc_columns(cols: int) -> int:
    """The column count a kernel passes to tcgen05.alloc for `cols` columns: a power of two in [32, 512]."""
    if cols < 1 or cols > COLUMNS:
        raise ValueError(f"a CTA can allocate 1..{COLUMNS} columns, not {cols}")
    n = MIN_ALLOC
    while n < cols:
        n *= 2
    return n


def lane_quarter(warp: int) -> range:
    """The TMEM lanes that warp `warp` (its index in the CTA) may read and write: 32 (warp % 4) + [0, 32)."""
    if warp < 0:
        raise ValueError(f"warp index must be non-negative, got {warp}")
    first = LANES_PER_WARP * (warp % 4)
    return range(first, first + LANES_PER_WARP)


def address(lane: int, column: int) -> int:
    """A 32-bit TMEM address: lane in bits 31..16, column in bits 15..0."""
    if not (0 <= lane < LANES and 0 <= column < COLUMNS):
        raise ValueError(f"lane {lane}, column {column} is outside {LANES} x {COLUMNS}")
    return (lane << 16) | column


def split_address(addr: int) -> tuple[int, int]:
    """(lane, column) of a 32-bit TMEM address."""
    return (addr >> 16) & 0xFFFF, addr & 0xFFFF


def ld_footprint(shape: str, num: int) -> dict[str, int]:
    """What one warp's tcgen05.ld/st of `shape` and `.num` covers: lanes, columns, registers per thread."""
    if shape not in SHAPES:
        raise ValueError(f"shape must be one of {', '.join(SHAPES)}, not {shape!r}")
    if num not in NUMS:
        raise ValueError(f".num must be one of {NUMS}, not {num}")
    lanes, bits = SHAPES[shape]
    registers = lanes * bits * num // (LANES_PER_WARP * CELL_BITS)
    if registers > MAX_LD_REGISTERS:
        raise ValueError(f"{shape}.x{num} would need {registers} registers per thread (at most "
                         f"{MAX_LD_REGISTERS})")
    return {"lanes": lanes, "columns": bits * num // CELL_BITS, "registers": registers}


def check_base(addr: Any, base: int = 0) -> None:
    """Inside a TIRx kernel: trap unless the address tcgen05.alloc wrote equals `base`.

    `addr` is a `T.TMEMPool`, the shared-memory buffer that received the address, or an
    element of it. Call it after the allocating warp's alloc, the thread sync that publishes
    the address, and `tcgen05.fence::after_thread_sync`, before the first tcgen05 operation.
    """
    from tvm.script import tirx as T
    from tvm.tirx.script.builder import ir

    if hasattr(addr, "addr"):            # a TMEMPool: the slot its commit() filled
        addr = addr.addr
    elif hasattr(addr, "shape") and hasattr(addr, "data"):   # a one-element buffer
        addr = addr[0]
    ir.add_to_parent(ir.evaluate(T.cuda.trap_when_assert_failed(addr == T.uint32(base))))
