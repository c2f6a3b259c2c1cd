"""The attention references of the output checks: which keys a query may not see, attention in
fp32 and as a 16-bit program computes it (per batch of one, per packed sequence, per decoding
call), and each row's log-sum-exp in float64 with the allowance a kernel's LSE is held to.
`outcheck` names them in its tables of references and bounds."""

from __future__ import annotations

import math
from typing import Any, Callable, Iterator, Sequence

from ..facts.numbers import UNIT_ROUNDOFF as _HALF_ULP

UNIT_ROUNDOFF = {"float32": 2.0**-24, **_HALF_ULP}


def _t():
    import torch

    return torch


def hidden_keys(n: int, m: int, causal: bool = False, window: Sequence[int] | None = None,
                device: Any = None) -> Any:
    """The (n, m) boolean mask of the keys each query may not see, or None when it sees all: the
    causal mask (top-left aligned, SDPA's), or a local window (left, right) under which query i
    sees keys i - left through i + right (FlashAttention's window_size, equal lengths)."""
    torch = _t()
    if window is not None:
        left, right = window
        i = torch.arange(n, device=device)[:, None]
        j = torch.arange(m, device=device)[None, :]
        return (j < i - left) | (j > i + right)
    if causal:
        return torch.ones(n, m, dtype=torch.bool, device=device).triu(m - n + 1)
    return None


def _sdpa_fp32(q: Any, k: Any, v: Any, causal: bool, window: Sequence[int] | None = None) -> Any:
    """Attention in fp32 on the GPU, from the 16-bit inputs (grouped-query heads repeated)."""
    torch = _t()
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    out = torch.empty(q.shape, dtype=torch.float32, device=q.device)
    mask = hidden_keys(q.shape[-2], k.shape[-2], causal, window, q.device)
    for b in range(q.shape[0]):  # one batch at a time: S x S scores in fp32 per head
        s = q[b].float() @ k[b].float().transpose(-1, -2) * q.shape[-1] ** -0.5
        if mask is not None:
            s.masked_fill_(mask, float("-inf"))
        out[b] = torch.softmax(s, dim=-1) @ v[b].float()
    return out


MUFU_REL_ERROR = 2.0**-22   # ex2.approx.ftz.f32 and lg2.approx.ftz.f32 (PTX ISA), relative


def lse_allowance(x_max: float, keys: int, exp_rel_error: float = 0.0) -> float:
    """atol for |LSE - reference| of a row over `keys` keys whose largest exponent (scaled score,
    base 2) is `x_max`. The row sum l is a sum of float32 exponentials, each within
    `exp_rel_error` + MUFU_REL_ERROR of 2^x after x = s * scale - m is rounded to float32 (an
    error of up to 2 |x| units of 2^-24 in the exponent, ln 2 times that in the weight); l
    accumulates up to `keys` of them in float32, lg2 adds its own relative error, and
    ln(l (1 + e)) = ln l + e. The check allows twice the sum."""
    u = UNIT_ROUNDOFF["float32"]
    per_row = (exp_rel_error + MUFU_REL_ERROR + math.log(2) * 2 * (2 * x_max) * u
               + keys * u + MUFU_REL_ERROR)
    return 2 * per_row


def _scores_by_head(q: Any, k: Any, causal: bool, dtype: Any) -> Iterator[tuple[int, int, Any]]:
    """Each (batch, head)'s scaled scores q kᵀ / sqrt(d) in `dtype`, masked keys at -inf, in turn."""
    torch = _t()
    mask = hidden_keys(q.shape[-2], k.shape[-2], causal, device=q.device)
    rep = q.shape[1] // k.shape[1]
    for b in range(q.shape[0]):
        for h in range(q.shape[1]):
            s = q[b, h].to(dtype) @ k[b, h // rep].to(dtype).t() * q.shape[-1] ** -0.5
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            yield b, h, s


def _lse_fp64(q: Any, k: Any, causal: bool) -> Any:
    """Each row's log-sum-exp of the scaled scores, float64, (B, H, S)."""
    torch = _t()
    out = torch.empty(q.shape[:3], dtype=torch.float64, device=q.device)
    for b, h, s in _scores_by_head(q, k, causal, torch.float64):
        out[b, h] = s.logsumexp(dim=-1)
    return out


def _lse_limit(inputs: Sequence[Any], spec: dict[str, Any]) -> float:
    """The "lse" bound's atol on these inputs: the largest |scaled score| a row sees, in base 2."""
    torch = _t()
    x_max = 0.0
    for _, _, s in _scores_by_head(inputs[0], inputs[1], bool(spec.get("causal")), torch.float32):
        x_max = max(x_max, float(s.masked_fill(s == float("-inf"), 0).abs().max()))
    return lse_allowance(x_max * math.log2(math.e), inputs[1].shape[2], float(spec.get("exp_rel_error", 0.0)))


def heads_view(q: Any, k: Any, heads: int, seqlen_q: int) -> Any:
    """A decoding call's queries, stored (batch · heads · seqlen_q, d), as (batch, heads, seqlen_q, d)
    (the batch is K's, (batch, kv_heads, seqlen_k, d)): a view, no copy."""
    return q.view(k.shape[0], heads, seqlen_q, q.shape[-1])


def _per_sequence(f: Callable[..., Any], q: Any, k: Any, v: Any, cu: Any, out_dtype: Any, **kw: Any) -> Any:
    """`f` of a variable-length batch: q (total, H, d) and k, v (total, H_kv, d) packed, sequence
    b in rows cu[b] to cu[b + 1]; f runs on each sequence as a batch of one (1, H, L, d)."""
    torch = _t()
    out = torch.zeros(q.shape, dtype=out_dtype, device=q.device)
    bounds = [int(x) for x in cu.tolist()]
    for s, e in zip(bounds[:-1], bounds[1:]):
        if e > s:
            view = [t[s:e].transpose(0, 1).unsqueeze(0) for t in (q, k, v)]
            out[s:e] = f(*view, **kw)[0].transpose(0, 1)
    return out


def _sdpa_low(q: Any, k: Any, v: Any, causal: bool, window: Sequence[int] | None = None) -> Any:
    """Attention as a plain PyTorch program in the inputs' 16-bit dtype computes it: S = Q Kᵀ and
    O = P V as 16-bit matmuls (fp32 accumulation, each product rounded to the dtype), the
    softmax in fp32 on the 16-bit scores times the scale, P rounded to the dtype. The softmax is
    in fp32 because that is what torch.softmax does with a 16-bit tensor (it computes in fp32 and
    rounds only its result); a softmax summed in 16 bits would be a straw man no one runs. The
    matmuls are computed as fp32 products rounded to the dtype, so that the result is the same
    on every device (a 16-bit cuBLAS call may also reduce split-K partial sums in 16 bits)."""
    torch = _t()
    dt = q.dtype
    if k.shape[1] != q.shape[1]:
        rep = q.shape[1] // k.shape[1]
        k, v = k.repeat_interleave(rep, dim=1), v.repeat_interleave(rep, dim=1)
    out = torch.empty(q.shape, dtype=dt, device=q.device)
    mask = hidden_keys(q.shape[-2], k.shape[-2], causal, window, q.device)
    for b in range(q.shape[0]):
        for h in range(0, q.shape[1], 8):  # 8 heads at a time: S x S scores in fp32 per head
            s = (q[b, h:h + 8].float() @ k[b, h:h + 8].float().transpose(-1, -2)).to(dt).float()
            s.mul_(q.shape[-1] ** -0.5)
            if mask is not None:
                s.masked_fill_(mask, float("-inf"))
            p = torch.softmax(s, dim=-1).to(dt)
            del s
            out[b, h:h + 8] = (p.float() @ v[b, h:h + 8].float()).to(dt)
    return out
