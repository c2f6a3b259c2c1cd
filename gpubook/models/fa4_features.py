"""What chapter 11B's attention kernel adds for the calls readers make: a ragged last block (any
length of at least 1), the log-sum-exp of each row, a local (sliding-window) mask, and batches
of sequences of different lengths, packed (the rules of the call, shared with chapter 11H).

The log-sum-exp is what the backward pass and the combine step of split-KV decoding read back:
LSE_i = ln sum_j exp(q_i . k_j / sqrt(d)) over the keys row i sees. The kernel forms it from
its running state, (m + log2 l) ln 2, with m the (possibly stale) row max in base-2 units and l
the row sum relative to it; a stale max changes both and not their sum. This module holds the
reference (`reference_lse`, in float64), the tolerance argued from the kernel's arithmetic
(`lse_tolerance`), and the cubic's error it rests on (`CUBIC_REL_ERROR`).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from ..run.outcheck import hidden_keys, lse_allowance
from .fa4 import FA4CallError, exp2_soft


def _cubic_rel_error() -> float:
    """The largest relative error of `exp2_soft` against 2^x over [-40, 0] (every x an exponent
    of the softmax takes, to far below float32's smallest normal weight that matters)."""
    x = np.linspace(-40.0, 0.0, 400_001, dtype=np.float32)
    exact = np.exp2(x.astype(np.float64))
    return float(np.max(np.abs(exp2_soft(x).astype(np.float64) / exact - 1.0)))


CUBIC_REL_ERROR = _cubic_rel_error()


# -- a local window --------------------------------------------------------------------------
# Query i sees keys i - left through i + right (FlashAttention's window_size, equal lengths).
# A kernel walks, for a tile of rows q0 .. q0 + tile - 1, the blocks of keys from the one holding
# q0 - left to the one holding q0 + tile - 1 + right, and masks those where a row's window starts
# or ends inside. The slips below are what a kernel computes with one of those steps wrong.
WINDOW_SLIPS = ("no left bound", "first block skipped", "no right bound")
DIAGONAL_SLIP = "last block only"   # the causal shortcut of a kernel whose diagonal is one block


def validate_window(window: Any, causal: bool = False) -> tuple[int, int]:
    """(left, right) of a window, or FA4CallError naming the rule."""
    if not (isinstance(window, tuple) and len(window) == 2
            and all(isinstance(w, int) and not isinstance(w, bool) for w in window)):
        raise FA4CallError(f"window must be (left, right), two ints, got {window!r}")
    if min(window) < 0:
        raise FA4CallError(f"window sizes must be >= 0, got {window}: query i sees keys i - left through "
                           "i + right; for no limit on one side, give seqlen")
    if causal:
        raise FA4CallError("give a window or causal=True, not both: the window (left, 0) is causal")
    return window


def window_sees(n: int, window: tuple[int, int], slip: str | None = None, tile: int = 128,
                block: int = 128) -> Any:
    """(n, n) booleans, True where query i sees key j under the window; with `slip` (one of
    WINDOW_SLIPS, or DIAGONAL_SLIP), what a kernel of `tile`-row Q tiles and `block`-key blocks
    computes when it masks its edge blocks without the left bound, starts one block late, masks
    without the right bound, or masks the last block it walks and no other."""
    import torch

    inside = ~hidden_keys(n, n, window=window)
    if slip is None:
        return inside
    left, right = window
    i, j = torch.arange(n)[:, None], torch.arange(n)[None, :]
    q0 = i // tile * tile
    first = (q0 - left).clamp(min=0) // block * block
    end = ((q0 + tile - 1 + right) // block + 1) * block
    return {"no left bound": (j >= first) & (j <= i + right),
            "first block skipped": inside & (j >= first + block),
            "no right bound": (j >= i - left) & (j < end),
            DIAGONAL_SLIP: (inside | (j < end - block)) & (j >= first)}[slip]


def reference_window(q: Any, k: Any, v: Any, window: tuple[int, int], slip: str | None = None,
                     block: int = 128) -> Any:
    """SDPA's math backend in float32 with the window (or a slip of it, by `block`-key blocks)
    as a boolean mask."""
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(SDPBackend.MATH):
        return F.scaled_dot_product_attention(q.float(), k.float(), v.float(),
                                              attn_mask=window_sees(q.shape[2], window, slip, block=block),
                                              enable_gqa=q.shape[1] != k.shape[1])


def scores(q: Any, k: Any, causal: bool, window: tuple[int, int] | None = None) -> Any:
    """q k^T / sqrt(d) in float64, GQA by head index, the keys a row does not see at -inf
    (top-left causal mask, as SDPA's is_causal, or a local window)."""
    ratio = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(ratio, dim=1)
    s = q.double() @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    for hidden in (hidden_keys(q.shape[2], k.shape[2], causal=causal), hidden_keys(q.shape[2], k.shape[2], window=window)):
        if hidden is not None:
            s = s.masked_fill(hidden, -math.inf)
    return s


def reference_lse(q: Any, k: Any, causal: bool, window: tuple[int, int] | None = None) -> Any:
    """The log-sum-exp of each row's scaled scores, in float64, returned as float32 (B, H, S)."""
    return scores(q, k, causal, window).logsumexp(dim=-1).float()


def lse_tolerance(q: Any, k: Any, causal: bool, cubic: bool = True,
                  window: tuple[int, int] | None = None) -> float:
    """atol for |LSE - reference| (`outcheck.lse_allowance`): the row's exponentials within
    CUBIC_REL_ERROR of 2^x (the cubic) beyond the MUFU's error, or within the MUFU's alone
    (`cubic=False`, a kernel that takes every exponential on the MUFU)."""
    s = scores(q, k, causal, window)
    x_max = float(s.masked_fill(s == -math.inf, 0).abs().max()) * math.log2(math.e)
    return lse_allowance(x_max, q.shape[2], CUBIC_REL_ERROR if cubic else 0.0)


# -- variable-length batches -------------------------------------------------------------------
# Q, K, V packed as (total, heads, d), sequence b in rows cu[b] .. cu[b + 1] - 1 (FlashAttention's
# cu_seqlens, one set of offsets for queries and keys), no padding anywhere.
def varlen_problem(q: Any, k: Any, v: Any, cu: Any, max_seqlen: int) -> tuple[int, int, int, int, int, int, str]:
    """(batch, heads, kv_heads, total, max_seqlen, head_dim, dtype) of a packed call, or FA4CallError
    naming the rule; each chapter then applies its kernel's own limits."""
    if q.dim() != 3 or k.dim() != 3 or k.shape != v.shape or q.shape[0] != k.shape[0]:
        raise FA4CallError("q, k, v must be packed (total, heads, head_dim), k and v alike, one total")
    if str(cu.dtype) != "torch.int32" or cu.dim() != 1 or cu.numel() < 2:
        raise FA4CallError("cu_seqlens must be int32 offsets (batch + 1,), e.g. torch.tensor([0, 300, 301])")
    bounds = cu.tolist()
    if bounds[0] != 0 or any(b < a for a, b in zip(bounds, bounds[1:])):
        raise FA4CallError(f"cu_seqlens must start at 0 and never decrease (the cumulative sum of the "
                           f"lengths, with 0 in front), got {bounds[:6]}{' ...' if len(bounds) > 6 else ''}")
    if bounds[-1] > q.shape[0]:
        raise FA4CallError(f"cu_seqlens ends at {bounds[-1]}, past the {q.shape[0]} rows of q")
    longest = max(b - a for a, b in zip(bounds, bounds[1:]))
    if longest > max_seqlen:
        raise FA4CallError(f"a sequence of {longest} rows is longer than max_seqlen = {max_seqlen}: "
                           "build the kernel for the longest sequence it will see")
    if q.shape[0] < 2:
        raise FA4CallError("total must be >= 2: TMA has no tensor map for one row")
    return (cu.numel() - 1, q.shape[1], k.shape[1], q.shape[0], max_seqlen, q.shape[2],
            str(q.dtype).removeprefix("torch."))


def pack_varlen(q: Any, k: Any, v: Any, lengths: Any) -> tuple[Any, Any, Any, Any]:
    """Packed (total, heads, d) copies of the first lengths[b] rows of each sequence b of padded
    (batch, heads, seqlen, d) tensors, and their offsets cu (int32, batch + 1)."""
    import itertools

    import torch

    def pack(t: Any) -> Any:
        return torch.cat([t[b, :, :n].transpose(0, 1) for b, n in enumerate(lengths)]).contiguous()

    cu = torch.tensor([0, *itertools.accumulate(lengths)], dtype=torch.int32)
    return pack(q), pack(k), pack(v), cu


def varlen_lse(q: Any, k: Any, cu: Any, causal: bool, cubic: bool = True) -> tuple[Any, float]:
    """The reference log-sum-exp of a packed batch as FlashAttention lays it out, (heads, total)
    float32, each sequence on its own (`reference_lse`), and its allowance: the largest
    `lse_tolerance` of the sequences (`cubic` as there)."""
    import torch

    out, atol = torch.zeros(q.shape[1], q.shape[0]), 0.0
    bounds = [int(x) for x in cu.tolist()]
    for s, e in zip(bounds[:-1], bounds[1:]):
        if e > s:
            qs, ks = (t[s:e].transpose(0, 1).unsqueeze(0) for t in (q, k))
            out[:, s:e] = reference_lse(qs, ks, causal)[0]
            atol = max(atol, lse_tolerance(qs, ks, causal, cubic))
    return out, atol
