"""The inputs of a timed case: random tensors of a kernel's own parameters, and the dtype its
FLOPs count in. A GPU host rebuilds them from the parameters alone (seed 0), so that the case's
digest names them."""

from __future__ import annotations

from typing import Any, Mapping, Sequence

from ..facts.hardware import peak_kind

FP8_DTYPES = ("float8_e4m3fn", "float8_e5m2")


def random_args(params: Sequence[Any], device: str = "cuda", seed: int = 0,
                fixed: Mapping[str, Sequence[Any]] | None = None) -> list[Any]:
    """Random tensors matching a kernel's parameters, made on `device`: standard normal values
    rounded to each floating-point dtype (float8 included), except that in a kernel with float8
    tensors a float32 parameter whose name starts with S is a scale, uniform in [0.5, 1). A
    packed parameter (E2M1, two to a byte) gets random bytes of PyTorch's packed dtype. A
    parameter named in `fixed` takes those values instead (the offsets of a variable-length
    batch, which random values would not make)."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    fp8 = any(p.dtype in FP8_DTYPES for p in params)
    fixed = dict(fixed or {})
    unknown = set(fixed) - {p.name for p in params}
    if unknown:
        raise ValueError(f"fixed inputs name no parameter of the kernel: {sorted(unknown)}")
    out = []
    for p in params:
        if p.name in fixed:
            t = torch.tensor(list(fixed[p.name]), dtype=getattr(torch, p.dtype), device=device)
            if tuple(t.shape) != tuple(p.shape):
                raise ValueError(f"fixed input {p.name} has shape {tuple(t.shape)}, the kernel's is {tuple(p.shape)}")
            out.append(t)
            continue
        if getattr(p, "packed", 1) > 1:
            raw = torch.randint(0, 256, p.torch_shape, generator=g, device=device, dtype=torch.uint8)
            out.append(raw.view(getattr(torch, p.torch_dtype)))
            continue
        dt = getattr(torch, p.dtype)
        if fp8 and p.dtype == "float32" and p.name.upper().startswith("S"):
            # the scales of an FP8 GEMM (SA, SB): positive, in [0.5, 1), so that the scaled
            # products keep the inputs' range and |sa sb a b| <= |a b|
            out.append(0.5 + 0.5 * torch.rand(p.shape, generator=g, device=device))
        elif dt.is_floating_point:
            out.append(torch.randn(p.shape, generator=g, device=device, dtype=torch.float32).to(dt))
        else:
            out.append(torch.randint(-8, 8, p.shape, generator=g, device=device).to(dt))
    return out


def flop_dtype(params: Sequence[Any]) -> str | None:
    """The dtype a kernel's FLOPs are counted in when bench is not told: its narrowest
    floating-point parameter (fp4 before fp8 before bf16/fp16 before fp32), or None without one."""
    kinds = {}
    for p in params:
        try:
            kinds.setdefault(peak_kind(p.dtype), p.dtype)
        except ValueError:
            continue
    for kind in ("fp4", "fp8", "bf16", "fp32"):
        if kind in kinds:
            return kinds[kind]
    return None
