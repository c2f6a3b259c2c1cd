"""The PyTorch operations a timed kernel is compared with, by name, over the kernel's own
arguments (inputs first, output last), so that a GPU host can rebuild them from shapes alone."""

from __future__ import annotations

import re
from typing import Any, Callable, Sequence

from .outcheck import heads_view

BASELINES: dict[str, Callable[..., Any]] = {
    "copy": lambda x, out: out.copy_(x),
    "add": lambda x, y, out: __import__("torch").add(x, y, out=out),
    "transpose": lambda x, out: out.copy_(x.t()),
    "row_sum": lambda x, out: __import__("torch").sum(x, dim=-1, out=out),
    "matmul_nt": lambda a, b, d: __import__("torch").matmul(a, b.t(), out=d),
    "sdpa": lambda q, k, v, o: _sdpa(q, k, v, o, causal=False),
    "sdpa_causal": lambda q, k, v, o: _sdpa(q, k, v, o, causal=True),
    # The same with one backend forced: FlashAttention-2 ("flash") or cuDNN's fused kernel.
    "sdpa_flash": lambda q, k, v, o: _sdpa(q, k, v, o, causal=False, backend="FLASH_ATTENTION"),
    "sdpa_flash_causal": lambda q, k, v, o: _sdpa(q, k, v, o, causal=True, backend="FLASH_ATTENTION"),
    "sdpa_cudnn": lambda q, k, v, o: _sdpa(q, k, v, o, causal=False, backend="CUDNN_ATTENTION"),
    "sdpa_cudnn_causal": lambda q, k, v, o: _sdpa(q, k, v, o, causal=True, backend="CUDNN_ATTENTION"),
    # Attention that also returns each row's log-sum-exp, over (q, k, v, o, lse): cuDNN's fused
    # kernel asked for it (SDPA asks only when autograd needs it), and FlashAttention-2, which
    # always writes it.
    "sdpa_cudnn_lse": lambda q, k, v, o, lse: _cudnn_lse(q, k, v, causal=False),
    "sdpa_cudnn_lse_causal": lambda q, k, v, o, lse: _cudnn_lse(q, k, v, causal=True),
    "sdpa_flash_lse": lambda q, k, v, o, lse: _sdpa(q, k, v, o, causal=False, backend="FLASH_ATTENTION"),
    "sdpa_flash_lse_causal": lambda q, k, v, o, lse: _sdpa(q, k, v, o, causal=True, backend="FLASH_ATTENTION"),
    # A variable-length batch, packed (total, H, d) with offsets cu (batch + 1): SDPA on nested
    # jagged tensors, the packed rows viewed as one sequence per batch entry (no copy, no padding).
    "sdpa_varlen": lambda q, k, v, cu, o: _sdpa_varlen(q, k, v, cu, causal=False),
    "sdpa_varlen_causal": lambda q, k, v, cu, o: _sdpa_varlen(q, k, v, cu, causal=True),
    # The kernel that path dispatches to, FlashAttention-2's variable-length forward, called
    # directly on the packed tensors: no nested tensors, one read of the longest length.
    "flash_varlen": lambda q, k, v, cu, o: _flash_varlen(q, k, v, cu, causal=False),
    "flash_varlen_causal": lambda q, k, v, cu, o: _flash_varlen(q, k, v, cu, causal=True),
    # FP8 GEMMs D = (sa A)(sb B)ᵀ through cuBLASLt (torch._scaled_mm), over the kernels' arguments
    # A (M x K), B (N x K), both float8 and K-major, their scales SA, SB (float32) and D (bf16).
    # One scale per tensor (SA, SB of one element): cuBLASLt's own accumulation, which adds the
    # tensor core's partial sums into fp32 as it goes, or its fast accumulation, which does not.
    "scaled_mm_tensor": lambda a, b, sa, sb, d: _scaled_mm(a, b, sa, sb),
    "scaled_mm_tensor_fast": lambda a, b, sa, sb, d: _scaled_mm(a, b, sa, sb, fast_accum=True),
    # Block scales: SA (K/128 x M), one per row of A and 128-wide K block, stored M-major; SB
    # (N/128 x K/128), one per 128 x 128 block of B.
    "scaled_mm_blockwise": lambda a, b, sa, sb, d: _scaled_mm(a, b, sa.t(), sb.t()),
}


def _scaled_mm(a: Any, b: Any, sa: Any, sb: Any, fast_accum: bool = False) -> Any:
    """torch._scaled_mm on A and Bᵀ (a column-major view of the K-major B), bf16 out; the scales'
    shapes pick the scaling (one element each: per tensor; SA.T of M x K/128 with SB.T of
    K/128 x N/128: blockwise 1 x 128 by 128 x 128). Returns a new tensor and leaves `d` alone."""
    import torch

    return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.bfloat16,
                            use_fast_accum=fast_accum)


def _sdpa(q: Any, k: Any, v: Any, o: Any, causal: bool, backend: str | None = None) -> Any:
    """PyTorch's scaled_dot_product_attention on (B, H, S, d) tensors: its default backend, or
    the one `backend` names (an `SDPBackend` member, the only one allowed: a backend that cannot
    take the inputs raises instead of falling back). K and V may have fewer heads (grouped-query
    attention). Returns a new tensor and leaves `o` alone: copying into it would add a pass over
    O to the baseline's time."""
    import torch.nn.functional as F

    gqa = q.shape[1] != k.shape[1]
    if backend is None:
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)
    from torch.nn.attention import SDPBackend, sdpa_kernel

    with sdpa_kernel(getattr(SDPBackend, backend)):
        return F.scaled_dot_product_attention(q, k, v, is_causal=causal, enable_gqa=gqa)


def _cudnn_lse(q: Any, k: Any, v: Any, causal: bool) -> Any:
    """cuDNN's fused attention with its log-sum-exp (aten's cuDNN entry point, which SDPA calls):
    (O, LSE), new tensors."""
    import torch

    out = torch.ops.aten._scaled_dot_product_cudnn_attention(q, k, v, None, True, 0.0, causal, False)
    return out[0], out[1]


# Baselines with parameters in their names, so that a GPU host rebuilds them from the name alone.
# Local (sliding-window) attention, query i seeing keys i - LEFT through i + RIGHT:
#   flex_window_LEFT_RIGHT: FlexAttention compiled with a block mask of the window, which skips
#     the blocks of keys the window leaves out, the fastest path PyTorch has for it;
#   sdpa_masked_window_LEFT_RIGHT: SDPA's default dispatch with the window as a boolean mask,
#     which computes every score.
FAMILIES: dict[str, Callable[..., Callable[..., Any]]] = {
    r"flex_window_(\d+)_(\d+)": lambda left, right: (
        lambda q, k, v, o: _flex_window(q, k, v, int(left), int(right))),
    r"sdpa_masked_window_(\d+)_(\d+)": lambda left, right: (
        lambda q, k, v, o: _sdpa_masked(q, k, v, (int(left), int(right)))),
    # Decoding, the kernel's queries stored (batch · HEADS · SEQLEN_Q, d) and a workspace between
    # V and O: sdpa[_flash|_cudnn]_decode_HEADS_SEQLEN_Q, SDPA on the queries viewed as
    # (batch, HEADS, SEQLEN_Q, d), by its default dispatch or with one backend forced.
    r"sdpa(_flash|_cudnn)?_decode_(\d+)_(\d+)": lambda backend, heads, seqlen_q: (
        lambda q, k, v, *rest: _sdpa(heads_view(q, k, int(heads), int(seqlen_q)), k, v, rest[-1], causal=False,
                                     backend={"_flash": "FLASH_ATTENTION", "_cudnn": "CUDNN_ATTENTION"}.get(backend))),
}
_CACHE: dict[Any, Any] = {}


def baseline(name: str) -> Callable[..., Any]:
    """The baseline of a name: BASELINES', or a family's with the name's parameters."""
    if name in BASELINES:
        return BASELINES[name]
    for pattern, make in FAMILIES.items():
        m = re.fullmatch(pattern, name)
        if m:
            return make(*m.groups())
    raise ValueError(f"unknown baseline {name!r}; known: {', '.join(BASELINES)}, "
                     f"and the families {', '.join(FAMILIES)}")


def _window_mask(n: int, m: int, window: tuple[int, int], device: Any) -> Any:
    """SDPA's boolean mask of a window: True where query i may see key j."""
    key = ("mask", n, m, window, str(device))
    if key not in _CACHE:
        from .outcheck import hidden_keys

        _CACHE[key] = ~hidden_keys(n, m, window=window, device=device)
    return _CACHE[key]


def _sdpa_masked(q: Any, k: Any, v: Any, window: tuple[int, int]) -> Any:
    import torch.nn.functional as F

    mask = _window_mask(q.shape[2], k.shape[2], window, q.device)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=q.shape[1] != k.shape[1])


def _flex_window(q: Any, k: Any, v: Any, left: int, right: int) -> Any:
    """FlexAttention (compiled once per process) with the window's block mask (made once per
    shape): blocks of keys wholly outside the window are skipped, edge blocks masked."""
    import torch
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    if "flex" not in _CACHE:
        _CACHE["flex"] = torch.compile(flex_attention, dynamic=False)
    key = ("flex", q.shape[2], k.shape[2], left, right, str(q.device))
    if key not in _CACHE:
        def window(b: Any, h: Any, i: Any, j: Any) -> Any:
            return (j >= i - left) & (j <= i + right)
        _CACHE[key] = create_block_mask(window, None, None, q.shape[2], k.shape[2], device=q.device)
    return _CACHE["flex"](q, k, v, block_mask=_CACHE[key], enable_gqa=q.shape[1] != k.shape[1])


def _sdpa_varlen(q: Any, k: Any, v: Any, cu: Any, causal: bool) -> Any:
    import torch
    import torch.nn.functional as F

    off = cu.to(torch.int64)
    nested = [torch.nested.nested_tensor_from_jagged(t, offsets=off).transpose(1, 2) for t in (q, k, v)]
    return F.scaled_dot_product_attention(*nested, is_causal=causal)


def _flash_varlen(q: Any, k: Any, v: Any, cu: Any, causal: bool) -> Any:
    import torch

    longest = int((cu[1:] - cu[:-1]).max())
    return torch.ops.aten._flash_attention_forward(q, k, v, cu, cu, longest, longest, 0.0, causal, False)[0]


def baseline_names(baseline_: str | Sequence[str] | None) -> list[str]:
    """The baselines a bench names (one name or several), each one BASELINES or a family knows."""
    names = [] if baseline_ is None else [baseline_] if isinstance(baseline_, str) else list(baseline_)
    for b in names:
        baseline(b)
    if len(set(names)) != len(names):
        raise ValueError(f"baselines named twice: {names}")
    return names
