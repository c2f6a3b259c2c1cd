"""The PyTorch operations a timed kernel is compared with, by name, over the kernel's own
arguments (inputs first, output last), so that a GPU host can rebuild them from shapes alone."""

from __future__ import annotations

from typing import Any, Callable, Sequence

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
}


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


def baseline_names(baseline: str | Sequence[str] | None) -> list[str]:
    """The baselines a bench names (one name or several), each checked against BASELINES."""
    names = [] if baseline is None else [baseline] if isinstance(baseline, str) else list(baseline)
    for b in names:
        if b not in BASELINES:
            raise ValueError(f"unknown baseline {b!r}; known: {', '.join(BASELINES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"baselines named twice: {names}")
    return names
