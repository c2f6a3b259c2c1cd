"""What chapter 11B's attention kernel adds for the calls readers make: a ragged last block (any
length of at least 1) and the log-sum-exp of each row.

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

from .fa4 import exp2_soft

MUFU_REL_ERROR = 2.0**-22        # ex2.approx.ftz.f32 and lg2.approx.ftz.f32 (PTX ISA), relative
FP32_UNIT = 2.0**-24             # unit roundoff of float32


def _cubic_rel_error() -> float:
    """The largest relative error of `exp2_soft` against 2^x over [-40, 0] (every x an exponent
    of the softmax takes, to far below float32's smallest normal weight that matters)."""
    x = np.linspace(-40.0, 0.0, 400_001, dtype=np.float32)
    exact = np.exp2(x.astype(np.float64))
    return float(np.max(np.abs(exp2_soft(x).astype(np.float64) / exact - 1.0)))


CUBIC_REL_ERROR = _cubic_rel_error()


def scores(q: Any, k: Any, causal: bool) -> Any:
    """q k^T / sqrt(d) in float64, GQA by head index, the keys a row does not see at -inf
    (top-left causal mask, as SDPA's is_causal)."""
    import torch

    ratio = q.shape[1] // k.shape[1]
    kk = k.double().repeat_interleave(ratio, dim=1)
    s = q.double() @ kk.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        S = q.shape[2]
        s = s.masked_fill(torch.ones(S, S, dtype=torch.bool).triu(1), -math.inf)
    return s


def reference_lse(q: Any, k: Any, causal: bool) -> Any:
    """The log-sum-exp of each row's scaled scores, in float64, returned as float32 (B, H, S)."""
    return scores(q, k, causal).logsumexp(dim=-1).float()


def lse_tolerance(q: Any, k: Any, causal: bool, cubic: bool = True) -> float:
    """atol for |LSE - reference|. The row sum l is a sum of float32 exponentials, each within
    CUBIC_REL_ERROR of 2^x (the cubic; the MUFU's ex2 is far closer; `cubic=False` for a kernel
    that takes every exponential on the MUFU), after x = s * scale - m is rounded to float32
    (an error of up to 2 |x| units of 2^-24 in the exponent, ln 2 times that in the weight);
    l accumulates up to S of them in float32, lg2 adds its own relative error, and
    ln(l (1 + e)) = ln l + e. The check allows twice the sum."""
    s = scores(q, k, causal)
    x_max = float(s.masked_fill(s == -math.inf, 0).abs().max()) * math.log2(math.e)
    S = q.shape[2]
    per_row = ((CUBIC_REL_ERROR if cubic else 0.0) + MUFU_REL_ERROR + math.log(2) * 2 * (2 * x_max) * FP32_UNIT
               + S * FP32_UNIT + MUFU_REL_ERROR)
    return 2 * per_row
