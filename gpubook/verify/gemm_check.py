"""The GEMM ladder's checks against PyTorch: seeded inputs, the float64 reference, the argued
tolerance (fp32 summation bound plus output rounding)."""

from __future__ import annotations

from typing import Any

from ..facts.numbers import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF


# -- checking against PyTorch ----------------------------------------------------------------
def fp32_sum_atol(A: Any, B: Any) -> float:
    """2 K 2^-23 max_ij sum_k |A_ik B_jk|: twice the worst fp32 summation error of D = A @ B.T
    (every fp16/bf16 product is exact in fp32; each of K additions loses at most 2^-23)."""
    return 2 * A.shape[1] * 2.0**-23 * float((A.double().abs() @ B.double().abs().T).max())


def tolerance(A: Any, B: Any) -> tuple[float, float]:
    """(rtol, atol) for comparing the kernel's D with `reference(A, B)`, both rounded to A's dtype.

    With a and b the exact and the accumulated fp32 value, |a - b| <= fp32_sum_atol, and each of
    the two roundings to the output dtype moves a value by at most u |rounded| (u: unit roundoff,
    2^-11 for fp16, 2^-8 for bf16) or, below the normal range, by half the smallest subnormal.
    So |D - ref| <= (fp32_sum_atol + 2 u |ref| + smallest subnormal) / (1 - u).
    """
    dtype = str(A.dtype).removeprefix("torch.")
    u = UNIT_ROUNDOFF[dtype]
    return 2 * u / (1 - u), (fp32_sum_atol(A, B) + SMALLEST_SUBNORMAL[dtype]) / (1 - u)


def reference(A: Any, B: Any) -> Any:
    """A @ B.T in float64, rounded once to the inputs' dtype."""
    return (A.double() @ B.double().T).to(A.dtype)


def inputs(M: int, N: int, K: int, dtype: str, seed: int) -> list[Any]:
    """Seeded A (M x K), B (N x K) and an output D (M x N), CPU tensors in kernel order."""
    import torch

    from .compare import seeded

    A = seeded((M, K), dtype, seed)
    B = seeded((N, K), dtype, seed + 1)
    return [A, B, torch.empty(M, N, dtype=A.dtype)]


def check(kernel: Any, M: int, N: int, K: int, dtype: str, seed: int = 1, stress: int = 0,
          resident: int | None = None) -> Any:
    """gb.check of a ladder kernel against `reference` on seeded inputs, at `tolerance`.

    With `stress`, the stress run's input variants are fresh seeded matrices (seeds 2s, 2s + 1
    for variant seed s), and the tolerance is the largest over the inputs and every variant.
    `resident` is passed on (clusters resident in the CPU simulation; see `gpubook.check`).
    """
    from .check import STRESS_VARIANTS
    from .check import check as run_check

    args = inputs(M, N, K, dtype, seed)
    variants = lambda s: inputs(M, N, K, dtype, 2 * s)  # noqa: E731 - the check calls it per seed
    tols = [tolerance(*args[:2])]
    if stress:
        tols += [tolerance(*variants(1000 + v)[:2]) for v in range(STRESS_VARIANTS)]
    rtol, atol = max(t[0] for t in tols), max(t[1] for t in tols)
    return run_check(kernel, args, ref=lambda A, B, D: reference(A, B), rtol=rtol, atol=atol,
                     stress=stress, variants=variants, resident=resident)


