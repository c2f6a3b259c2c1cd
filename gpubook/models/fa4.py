"""Flash Attention 4 on Blackwell (chapter 11B): what the kernel refuses, its budgets, its pieces.

The kernel computes O = softmax(Q K^T / sqrt(d)) V for (batch, heads, seqlen, 128) tensors in
fp16 or bf16, with S and O in tensor memory. This module holds what can be stated and tested
without a GPU: the calls it refuses (`validate`, `problem`), the software exp2 it sends part of
the exponentials through (`exp2soft`, whose names this module re-exports), the tensor- and
shared-memory budgets (`tmem_plan`, `smem_plan`), a CPU model of the kernel's block loop
(`simulate`), the reference and tolerance of a check, the performance bound, and the figure of
the barrier protocol.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..facts.hardware import B200, GPU
from ..facts.numbers import UNIT_ROUNDOFF
from ..compile.signature import KernelCallError
from .exp2soft import COEFFS, EXP2_OPS, ROUND_CONST, exp2_listing, exp2_soft, fit_exp2_cubic, fma32, hexf  # noqa: F401

BLK = 128                 # query rows per tile = keys per KV block = TMEM lanes
HEAD_DIM = 128
DTYPES = ("float16", "bfloat16")
TAU = 8.0                 # rescale O only when the running max grows by more than 2^8
SOFT_EVERY = 4            # column c goes through the software exp2 when c % 4 == 3
TMEM_COLUMNS = 512
TMA_ALIGN = 16


class FA4CallError(KernelCallError):
    """An attention call the chapter's kernel cannot serve, refused before anything is built."""


# -- refusals -------------------------------------------------------------------------------------
def validate(batch: int, heads: int, kv_heads: int, seqlen: int, head_dim: int, dtype: str,
             causal: bool, q_tiles: int = 1, ragged: bool = False, head_dims: tuple[int, ...] = (HEAD_DIM,)) -> None:
    """Refuse, naming the constraint, a problem the kernel is not built for; `q_tiles` is the
    number of 128-row Q tiles a CTA works on at once (1, or 2 for the two-Q-tile kernel);
    `ragged`: the kernel masks a ragged last block, so any length of at least 1 will do;
    `head_dims`: the head dims the kernel was generated for."""
    if head_dim not in head_dims:
        raise FA4CallError(f"head_dim must be {' or '.join(map(str, head_dims))}, got {head_dim}: the "
                           "MMAs, the TMEM columns of O and the shared-memory tiles are generated for it")
    if dtype not in DTYPES:
        raise FA4CallError(f"dtype must be one of {', '.join(DTYPES)}, got {dtype}: tcgen05.mma "
                           ".kind::f16 multiplies 16-bit operands, and P is stored in the same dtype")
    if min(batch, heads, kv_heads) < 1:
        raise FA4CallError(f"batch, heads and kv_heads must be >= 1, got {batch}, {heads}, {kv_heads}")
    if heads % kv_heads:
        raise FA4CallError(f"GQA ratio: heads ({heads}) must be a multiple of kv_heads ({kv_heads}); "
                           "query head h reads KV head h // (heads / kv_heads)")
    if q_tiles not in (1, 2):
        raise ValueError(f"q_tiles must be 1 or 2, got {q_tiles}")
    rows = q_tiles * BLK
    if ragged and (not isinstance(seqlen, int) or seqlen < 2):
        raise FA4CallError(f"seqlen must be an int of at least 2, got {seqlen!r}: TIRx's planner of tensor "
                           "maps (tma_auto) folds a length-1 dimension into the heads and finds no legal box")
    if not ragged and (seqlen < rows or seqlen % rows):
        what = (f"every Q tile and KV block is {BLK} rows" if q_tiles == 1 else
                f"a CTA's work tile is two Q tiles of {BLK} rows, and every KV block is {BLK} rows")
        raise FA4CallError(f"seqlen must be a positive multiple of {rows}, got {seqlen}: {what} and the "
                           "kernel has no tail masking (pad the sequence, or use chapter 11's portable kernel)")
    if not isinstance(causal, bool):
        raise FA4CallError(f"causal must be a bool, got {causal!r}")


def problem(q: Any, k: Any, v: Any, causal: bool, q_tiles: int = 1, ragged: bool = False,
            head_dims: tuple[int, ...] = (HEAD_DIM,), v_dim: int | None = None) -> tuple[int, int, int, int, str]:
    """(batch, heads, kv_heads, seqlen, dtype) of a call on (B, H, S, d) tensors, or FA4CallError;
    `v_dim`: the head dim of V (and O) where it differs from Q's and K's."""
    for name, t in (("q", q), ("k", k), ("v", v)):
        if getattr(t, "dim", lambda: -1)() != 4:
            raise FA4CallError(f"layout: {name} must be (batch, heads, seqlen, head_dim), got shape "
                               f"{tuple(getattr(t, 'shape', ()))}")
    for name, t in (("q", q), ("k", k), ("v", v)):
        if not t.is_contiguous():
            raise FA4CallError(f"layout: {name} has strides {tuple(t.stride())}; the tensor maps "
                               "assume dense (batch, heads, seqlen, head_dim) rows: pass .contiguous()")
        if t.data_ptr() % TMA_ALIGN:
            raise FA4CallError(f"layout: {name} does not start on a {TMA_ALIGN}-byte boundary, "
                               "which a tensor map's base must")
    want = tuple(k.shape) if v_dim is None else (*k.shape[:-1], v_dim)
    if tuple(v.shape) != want:
        raise FA4CallError(f"k is {tuple(k.shape)} but v is {tuple(v.shape)}: v must be {want}")
    dts = {str(t.dtype).removeprefix("torch.") for t in (q, k, v)}
    if len(dts) != 1:
        raise FA4CallError(f"dtype: q, k, v must share one dtype, got {sorted(dts)}")
    B, H, Sq, d = q.shape
    Bk, Hk, Sk, dk = k.shape
    if Bk != B or dk != d:
        raise FA4CallError(f"q is {tuple(q.shape)} and k is {tuple(k.shape)}: batch and head_dim must match")
    if Sq != Sk:
        raise FA4CallError(f"seqlen: query length {Sq} and key length {Sk} differ; the kernel takes "
                           "one length, and its causal mask is top-left aligned like SDPA's is_causal")
    dtype = dts.pop()
    validate(B, H, Hk, Sq, d, dtype, causal, q_tiles, ragged, head_dims)
    return B, H, Hk, Sq, dtype


def soft_columns(blk: int = BLK, every: int = SOFT_EVERY) -> list[int]:
    """The score columns of a KV block that go through the software exp2 (off the diagonal)."""
    return [c for c in range(blk) if c % every == every - 1]


# -- budgets --------------------------------------------------------------------------------------
def tmem_plan(two_q_tiles: bool = False, head_dim: int = HEAD_DIM) -> dict[str, tuple[int, int]]:
    """{region: (first column, columns)} of the kernel's TMEM (one Q tile: S0, S1, O), or of the
    two-Q-tile layout (S0, S1, O0, O1). P overlays the upper half of its S as 16-bit values.
    Each region starts on a multiple of 128 columns; O uses `head_dim` columns of its 128."""
    plan, first = {}, 0
    for r in ["S0", "S1", "O0", "O1"] if two_q_tiles else ["S0", "S1", "O"]:
        plan[r] = (first, head_dim if r.startswith("O") else BLK)
        first += max(plan[r][1], BLK)
    end = max(a + n for a, n in plan.values())
    if end > TMEM_COLUMNS:
        raise ValueError(f"TMEM plan needs {end} columns of {TMEM_COLUMNS}")
    return plan


def p_columns(sb: int) -> tuple[int, int]:
    """(first fp32 column, columns) that P of buffer sb occupies: 128 16-bit values = 64 columns,
    the upper half of S_sb."""
    first, n = tmem_plan()[f"S{sb}"]
    return first + n // 2, BLK * 16 // 32


def smem_plan(stages: int, q_tiles: int = 1, head_dim: int = HEAD_DIM) -> dict[str, int]:
    """Bytes of shared memory per region: barriers and the TMEM address (padded to 1 KiB), with
    two Q tiles the softmax-to-correction slots (one fp32 per row and tile, 1 KiB), Q, the K/V
    ring, the O staging tile (each tile 128 rows of `head_dim` 16-bit values)."""
    tile = BLK * head_dim * 2
    plan = {"barriers": 1024}
    if q_tiles == 2:
        plan["α and ℓ slots"] = q_tiles * BLK * 4
    return plan | {"Q": q_tiles * tile, "K/V ring": stages * tile, "O staging": tile}


# -- a CPU model of the kernel ----------------------------------------------------------------------
def simulate(q: Any, k: Any, v: Any, causal: bool, q_tiles: int = 1) -> tuple[Any, dict[str, Any]]:
    """The kernel's arithmetic on the CPU: per row, blocks of 128 keys in order, the first block's
    max taken, later maxima only when they grow by more than TAU, exponentials in float32 (every
    fourth column of a block that needs no mask through `exp2_soft`), P rounded to the input
    dtype, O and the row sums in float64, O rounded at the end. With `q_tiles=2` and a causal
    mask, both tiles of a work tile walk the same blocks, so the first tile also processes one
    block that is wholly masked for it (its P is 0). A length that is not a multiple of 128
    leaves a ragged last block, whose missing keys are masked like the diagonal's. Returns O and
    {"rescales", "rows_blocks", "lse"}: the log-sum-exp per row, as the ragged kernel forms it,
    (m + log2 l) ln 2 with its stale max m and row sum l, in float32 (batch, heads, seqlen)."""
    import torch

    dtype = str(q.dtype).removeprefix("torch.")
    B, H, S, d = q.shape
    NQ = -(-S // BLK)
    ratio = H // k.shape[1]
    scale = math.log2(math.e) / math.sqrt(d)
    soft = np.zeros(BLK, bool)
    soft[soft_columns()] = True
    out = torch.empty_like(q)
    lse = torch.empty(B, H, S)
    stats: dict[str, Any] = {"rescales": 0, "rows_blocks": 0}
    tdt = q.dtype
    pad = lambda t: np.pad(t, ((0, NQ * BLK - S), (0, 0)))  # noqa: E731 - TMA's zero fill past the end
    for b in range(B):
        for h in range(H):
            qq = pad(q[b, h].float().numpy())
            kk = pad(k[b, h // ratio].float().numpy())
            vv = pad(v[b, h // ratio].double().numpy())
            for qt in range(NQ):
                rows = slice(qt * BLK, qt * BLK + BLK)
                n_kv = (qt + 1 if causal else NQ) if q_tiles == 1 else kv_blocks(qt // 2, S, causal)
                m = np.zeros(BLK, np.float32)
                l = np.zeros(BLK)
                acc = np.zeros((BLK, d))
                for j in range(n_kv):
                    s = (qq[rows] @ kk[j * BLK:(j + 1) * BLK].T).astype(np.float32)
                    diag = causal and j >= qt                     # the diagonal block, or one past it
                    keep = np.arange(BLK)[None, :] + j * BLK < S  # a ragged last block's missing keys
                    if diag:
                        keep = keep & (np.arange(BLK)[None, :] + j * BLK <= np.arange(BLK)[:, None] + qt * BLK)
                    masked = diag or not keep.all()
                    if masked:
                        s = np.where(keep, s, np.float32(-np.inf))
                    mx = s.max(axis=1) * np.float32(scale)
                    alpha = np.ones(BLK)
                    if j == 0:
                        m = mx
                    else:
                        grow = mx - m > TAU
                        alpha = np.where(grow, np.exp2(m.astype(np.float64) - mx), 1.0)
                        m = np.where(grow, mx, m).astype(np.float32)
                        stats["rescales"] += int(grow.sum())
                    with np.errstate(invalid="ignore"):               # -inf - m on a wholly masked row
                        x = (s * np.float32(scale) - m[:, None]).astype(np.float32)
                    p = np.exp2(x.astype(np.float64)).astype(np.float32)
                    if not masked:
                        p[:, soft] = exp2_soft(x[:, soft])
                    l = l * alpha + p.astype(np.float64).sum(axis=1)
                    p16 = torch.from_numpy(p).to(tdt).double().numpy()
                    acc = acc * alpha[:, None] + p16 @ vv[j * BLK:(j + 1) * BLK]
                    stats["rows_blocks"] += BLK
                n = min(BLK, S - qt * BLK)
                out[b, h, qt * BLK:qt * BLK + n] = torch.from_numpy(acc[:n] / l[:n, None]).to(tdt)
                lse[b, h, qt * BLK:qt * BLK + n] = torch.from_numpy((m[:n] + np.log2(l[:n])) * math.log(2))
    stats["lse"] = lse
    return out, stats


def reference(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """SDPA's math backend on the CPU in float32, GQA by head index, top-left causal mask."""
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(), is_causal=causal,
                                              enable_gqa=q.shape[1] != k.shape[1])


def tolerance(v: Any, dtype: str) -> float:
    """atol for |O - SDPA|: P rounded to 16 bits (u), O rounded (u), the cubic's error (< u/4,
    chapter 11) and fp32 accumulation: below 2.25 u max|V|; the check allows 4 u max|V|."""
    return 4 * UNIT_ROUNDOFF[dtype] * float(v.float().abs().max())


# -- the persistent schedule of the two-Q-tile kernel -------------------------------------------------
def work_tile(t: int, batch: int, heads: int, seqlen: int, causal: bool,
              order: str | None = None) -> tuple[int, int, int]:
    """(b, h, m) of work tile t: query rows 256 m .. 256 m + 255 of head h of batch b. `order` is
    "linear" (m fastest) or "longest-first" (all heads' last m first, then the one before, ...);
    the kernel's own choice, the default, is linear without a mask and longest-first with one."""
    nm = seqlen // (2 * BLK)
    bh_count = batch * heads
    order = order or ("longest-first" if causal else "linear")
    if not 0 <= t < bh_count * nm:
        raise ValueError(f"work tile {t} is outside 0 .. {bh_count * nm - 1}")
    if order == "linear":
        m, bh = t % nm, t // nm
    elif order == "longest-first":
        m, bh = nm - 1 - t // bh_count, t % bh_count
    else:
        raise ValueError(f"order must be 'linear' or 'longest-first', not {order!r}")
    return bh // heads, bh % heads, m


def kv_blocks(m: int, seqlen: int, causal: bool) -> int:
    """KV blocks the two Q tiles of work tile row m walk: all of them, or under the causal mask
    the blocks up to the second tile's diagonal."""
    return 2 * m + 2 if causal else seqlen // BLK


def _static_slots(batch: int, heads: int, seqlen: int, causal: bool, ctas: int,
                  order: str | None) -> list[Any]:
    """Chapter 7's static persistent schedule of the work tiles, each costing its KV blocks:
    CTA c takes tiles c, c + G, c + 2 G, ... with G = min(ctas, tiles), as the kernel does."""
    from .schedule import static

    tiles = batch * heads * (seqlen // (2 * BLK))
    costs = [kv_blocks(work_tile(t, batch, heads, seqlen, causal, order)[2], seqlen, causal)
             for t in range(tiles)]
    return static(costs, min(ctas, tiles))


def schedule(batch: int, heads: int, seqlen: int, causal: bool, ctas: int,
             order: str | None = None) -> list[list[tuple[int, int, int]]]:
    """The work tiles (b, h, m) of each persistent CTA, in the order it serves them."""
    per_cta: dict[int, list[tuple[int, int, int]]] = {}
    for slot in _static_slots(batch, heads, seqlen, causal, ctas, order):
        per_cta.setdefault(slot.worker, []).append(work_tile(slot.tile, batch, heads, seqlen, causal, order))
    return [per_cta[c] for c in sorted(per_cta)]


def cta_blocks(batch: int, heads: int, seqlen: int, causal: bool, ctas: int,
               order: str | None = None) -> list[int]:
    """KV blocks each CTA walks over the whole launch: its share of the work (when its last
    work tile ends, in units of one KV block)."""
    last: dict[int, float] = {}
    for slot in _static_slots(batch, heads, seqlen, causal, ctas, order):
        last[slot.worker] = max(last.get(slot.worker, 0.0), slot.end)
    return [int(last[c]) for c in sorted(last)]


# -- performance -------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Bound:
    flops: float
    tensor_s: float
    mufu_s: float
    memory_s: float

    @property
    def seconds(self) -> float:
        return max(self.tensor_s, self.mufu_s, self.memory_s)

    @property
    def limit(self) -> str:
        return max((self.tensor_s, "tensor cores"), (self.mufu_s, "MUFU exponentials"),
                   (self.memory_s, "HBM"))[1]

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12


def bound(batch: int, heads: int, seqlen: int, causal: bool, gpu: GPU = B200,
          soft_share: float | None = None, head_dim: int = HEAD_DIM) -> Bound:
    """Chapter 2's roofline with a third roof: the exponentials the MUFU computes (one per score,
    less the share computed in software) at the SFU rate, which does not depend on `head_dim`."""
    from .roofline import attention_bytes, attention_flops

    share = len(soft_columns()) / BLK if soft_share is None else soft_share
    flops = attention_flops(batch, heads, seqlen, seqlen, head_dim, causal)
    scores = batch * heads * seqlen * seqlen / (2 if causal else 1)
    return Bound(flops, flops / gpu.peak_flops("bfloat16"), scores * (1 - share) / gpu.sfu_rate,
                 attention_bytes(batch, heads, seqlen, seqlen, head_dim, 2) / gpu.hbm_bandwidth)


from .fa4_protocol import ROLES, plot_protocol, protocol_events  # noqa: E402,F401 - the chapter's figure
