"""Planted numeric defects: what a kernel with one arithmetic mistake would output, computed in
PyTorch on the CPU, so that a test can show that the output checks refuse each of them and
accept a correct low-precision result.

Each defect acts row by row (one query's softmax, one row of D), so a slice of rows at the full
reduction length (all the keys, all of K) shows what the whole output would: the tests and
appendix B compute a few rows of one head, or a few rows and columns of D, at every timed shape.

Attention, as the kernels compute it: S = Q Kᵀ in fp32 from 16-bit inputs, an online softmax over
blocks of 128 keys with exp2 of (S · scale − m) · log2(e), P rounded to the inputs' dtype, O = P V
accumulated in fp32 and rescaled when the running maximum m rises, O / l rounded at the end.
The defects: the last block of keys dropped; log2(e) missing (exp2 of the scaled logits, a
softmax at temperature ln 2); the softmax scale 10% too large; O halved (the row sum l reduced
over twice the lanes it should); O not rescaled when m rises (l still is).

GEMM: D = A Bᵀ summed K tile by K tile in fp32, rounded to D's dtype; the defect leaves one K
tile out. FP8 GEMM: the tensor core's accumulator modelled as DeepSeek-V3's measurement has it,
about 14 significant bits: each group of 4 products is added to it and the sum truncated to 14
bits. The correct kernel restarts it for every K block of 128 and promotes its sum into fp32
with the block's scales; the defect never promotes, so one short accumulator sums all of K
(block scales applied to the products as they enter, so that only the accumulation differs).
"""

from __future__ import annotations

import math
from types import SimpleNamespace
from typing import Any, Callable

from ..run.inputs import random_args
from ..run.outcheck import REFERENCES, compare_output, tolerance_spec

BLK_KV = 128
ATTENTION_DEFECTS = ("drop_last_block", "no_log2e", "scale_10pct", "half", "no_rescale")
# a split-KV combine: the last split left out, the splits averaged with equal weights, their
# base-2 log-sum-exps weighted as if natural
DECODE_DEFECTS = ("drop_split", "no_split_rescale", "lse_base_e")
GEMM_DEFECTS = ("missing_k_tile",)
FP8_DEFECTS = ("missing_k_tile", "no_promotion")
DEFECT_NAMES = {
    "drop_last_block": "last KV block dropped", "no_log2e": "log2(e) missing in exp2",
    "scale_10pct": "softmax scale 10% off", "half": "O / 2 (l over 8 lanes, not 4)",
    "no_rescale": "O not rescaled when the max rises", "missing_k_tile": "one K tile missing",
    "no_promotion": "no promotion: all of K in the short accumulator",
    "drop_split": "the last split of keys left out", "no_split_rescale": "splits averaged, not weighted",
    "lse_base_e": "a base-2 log-sum-exp weighted as natural",
}


def attention_kernel_like(q: Any, k: Any, v: Any, causal: bool = False, defect: str | None = None,
                          blk: int = BLK_KV, partial: bool = False) -> Any:
    """O of one head or several (q: (..., n, d), k and v: (..., m, d), the same heads), as a
    FlashAttention kernel computes it, with one `defect` of ATTENTION_DEFECTS or none. Under
    the causal mask query i of n sees keys up to m - n + i (the last n queries of a sequence).
    `partial`: (O / l in fp32, the log-sum-exp in base 2 of the scaled logits), what one split
    of a split-KV kernel leaves for the combine."""
    import torch

    dt, n, m, d = q.dtype, q.shape[-2], k.shape[-2], q.shape[-1]
    scale = d ** -0.5 * (1.1 if defect == "scale_10pct" else 1.0)
    c = scale * (1.0 if defect == "no_log2e" else math.log2(math.e))
    qf = q.float()
    mx = torch.full((*q.shape[:-1], 1), float("-inf"))
    l = torch.zeros(*q.shape[:-1], 1)
    acc = torch.zeros(*q.shape[:-1], d)
    rows = torch.arange(n).reshape(n, 1) + (m - n)
    last = (m - 1) // blk * blk
    for j0 in range(0, m, blk):
        if defect == "drop_last_block" and j0 == last:
            break
        s = (qf @ k[..., j0:j0 + blk, :].float().transpose(-1, -2)) * c   # log2 units
        if causal:
            s = s.masked_fill(torch.arange(j0, j0 + s.shape[-1]).reshape(1, -1) > rows, float("-inf"))
        new = torch.maximum(mx, s.amax(dim=-1, keepdim=True))
        safe = torch.where(torch.isinf(new), torch.zeros_like(new), new)
        corr = torch.exp2(mx - safe)
        p = torch.exp2(s - safe)
        l = l * corr + p.sum(dim=-1, keepdim=True)
        if defect != "no_rescale":
            acc = acc * corr
        acc = acc + p.to(dt).float() @ v[..., j0:j0 + blk, :].float()
        mx = new
    if defect == "half":
        l = 2 * l
    if partial:
        return acc / l, mx + torch.log2(l)
    return (acc / l).to(dt)


def decode_kernel_like(q: Any, k: Any, v: Any, splits: int, defect: str | None = None, blk: int = BLK_KV) -> Any:
    """O of a split-KV kernel: the keys cut into `splits` runs of whole blocks (the last may be
    shorter), each run's O / l and log-sum-exp as `attention_kernel_like(partial=True)`, then
    combined with weights 2^(LSE_s - max LSE); with one `defect` of DECODE_DEFECTS or none."""
    import torch

    blocks = -(-k.shape[-2] // blk)
    keys = -(-blocks // splits) * blk
    parts = [attention_kernel_like(q, k[..., j0:j0 + keys, :], v[..., j0:j0 + keys, :], blk=blk, partial=True)
             for j0 in range(0, k.shape[-2], keys)]
    if defect == "drop_split":
        parts = parts[:-1]
    o = torch.stack([p[0] for p in parts])
    lse = torch.stack([p[1] for p in parts])
    top = lse.amax(dim=0)
    w = torch.exp(lse - top) if defect == "lse_base_e" else torch.exp2(lse - top)
    if defect == "no_split_rescale":
        w = torch.ones_like(w)
    return ((w * o).sum(dim=0) / w.sum(dim=0)).to(q.dtype)


def _bits14(x: Any) -> Any:
    """x (fp32) truncated to 14 significant bits, toward zero."""
    import torch

    return (x.view(torch.int32) & ~((1 << 10) - 1)).view(torch.float32)


def gemm_kernel_like(a: Any, b: Any, blk_k: int, out_dtype: Any, skip: int | None = None) -> Any:
    """D = A Bᵀ summed K tile by K tile in fp32, rounded to `out_dtype`; `skip` leaves a tile out."""
    import torch

    acc = torch.zeros(a.shape[0], b.shape[0])
    for i, k0 in enumerate(range(0, a.shape[1], blk_k)):
        if i != skip:
            acc += a[:, k0:k0 + blk_k].float() @ b[:, k0:k0 + blk_k].float().t()
    return acc.to(out_dtype)


def fp8_kernel_like(a: Any, b: Any, sa: Any, sb: Any, promote: bool = True, skip: int | None = None,
                    block: int = 128, group: int = 4) -> Any:
    """An FP8 GEMM with the short accumulator modelled (module docstring): promoted into fp32
    every K block of 128 (`promote`) or never; `skip` leaves K block `skip` out. Scales: one per
    tensor (shape (1,)) or block scales as the kernels take them (sa (K/128, M), sb (N/128, K/128))."""
    import torch

    M, K = a.shape
    N = b.shape[0]
    # the sums of each group of `group` products, (M, N, K / group), exact in fp32
    parts = torch.einsum("mgk,ngk->mng", a.float().reshape(M, K // group, group),
                         b.float().reshape(N, K // group, group))
    per_block = block // group
    short = torch.zeros(M, N)
    acc = torch.zeros(M, N)
    for kb in range(K // block):
        if sa.dim() == 1:
            s = torch.ones(M, N)
        else:
            s = sa[kb].reshape(M, 1) * sb[:, kb].repeat_interleave(block)[:N].reshape(1, N)
        if promote:
            short = torch.zeros(M, N)
        if kb != skip:
            for g in range(kb * per_block, (kb + 1) * per_block):
                short = _bits14(short + (parts[:, :, g] if promote else parts[:, :, g] * s))
        if promote:
            acc += short * s
    out = acc if promote else short
    if sa.dim() == 1:
        out = out * (sa.float() * sb.float())
    return out.to(torch.bfloat16)


def _params(*specs: tuple[str, str, tuple[int, ...]]) -> list[Any]:
    return [SimpleNamespace(name=n, dtype=dt, shape=shape, torch_shape=shape, packed=1) for n, dt, shape in specs]


def attention_inputs(seqlen: int, head_dim: int, rows: int = 128, dtype: str = "bfloat16", seed: int = 0) -> list[Any]:
    """The replay's random inputs (gpubook.run.inputs.random_args, on the CPU) for one head:
    Q's last `rows` queries, K and V at the full length."""
    q, k, v = random_args(_params(("Q", dtype, (1, 1, seqlen, head_dim)), ("K", dtype, (1, 1, seqlen, head_dim)),
                                  ("V", dtype, (1, 1, seqlen, head_dim))), device="cpu", seed=seed)
    return [q[:, :, -rows:].contiguous(), k, v]


def attention_case(seqlen: int, head_dim: int, causal: bool, tolerance: Any, rows: int = 128,
                   dtype: str = "bfloat16") -> dict[str, dict[str, Any]]:
    """{result: compare_output record} at one timed shape: "correct" (the kernel-like result)
    and every defect, each compared with the fp32 reference within `tolerance`."""
    q, k, v = attention_inputs(seqlen, head_dim, rows, dtype)
    mask = "_causal" if causal else ""
    ref = REFERENCES["sdpa_fp32" + mask](q, k, v)
    spec = tolerance_spec(tolerance)
    out = {}
    for defect in (None,) + ATTENTION_DEFECTS:
        got = attention_kernel_like(q[0], k[0], v[0], causal, defect).unsqueeze(0)
        out[defect or "correct"] = compare_output(got, ref, spec, [q, k, v], "sdpa_fp32" + mask)
    return out


def decode_case(seqlen_k: int, head_dim: int, splits: int, tolerance: Any, rows: int = 8,
                dtype: str = "bfloat16", q: Any = None, k: Any = None, v: Any = None) -> dict[str, dict[str, Any]]:
    """The same for a split-KV decoding kernel: `rows` queries of one head against `seqlen_k`
    keys in `splits` splits, on the replay's random inputs or on the given (1, 1, n, d) q, k, v."""
    if q is None:
        q, k, v = random_args(_params(("Q", dtype, (1, 1, rows, head_dim)), ("K", dtype, (1, 1, seqlen_k, head_dim)),
                                      ("V", dtype, (1, 1, seqlen_k, head_dim))), device="cpu")
    ref = REFERENCES["sdpa_fp32"](q, k, v)
    spec = tolerance_spec(tolerance)
    return {defect or "correct": compare_output(decode_kernel_like(q[0], k[0], v[0], splits, defect).unsqueeze(0),
                                                ref, spec, [q, k, v], "sdpa_fp32")
            for defect in (None,) + DECODE_DEFECTS}


def gemm_case(K: int, blk_k: int, tolerance: Any, rows: int = 32, cols: int = 256, dtype: str = "bfloat16",
              reference: str | None = "matmul_nt") -> dict[str, dict[str, Any]]:
    """The same for a bf16/fp16 GEMM at reduction length K: `rows` x `cols` of D against the fp32
    reference (or, `reference` None, against a cuBLAS-like fp32 sum rounded to D's dtype, the
    comparison of a baseline)."""
    import torch

    a, b = random_args(_params(("A", dtype, (rows, K)), ("B", dtype, (cols, K))), device="cpu")
    odt = getattr(torch, dtype)
    ref = REFERENCES["matmul_nt"](a, b) if reference else (a.float() @ b.float().t()).to(odt)
    spec = tolerance_spec(tolerance)
    got = {"correct": gemm_kernel_like(a, b, blk_k, odt),
           "missing_k_tile": gemm_kernel_like(a, b, blk_k, odt, skip=K // blk_k // 2)}
    return {key: compare_output(d, ref, spec, [a, b], reference or "matmul_nt") for key, d in got.items()}


def fp8_case(K: int, scaling: str, tolerance: Any, rows: int = 16, cols: int = 256,
             baseline: bool = False) -> dict[str, dict[str, Any]]:
    """The same for an FP8 GEMM of 12H: block scaling against the fp32 dequantized product
    (scaled_matmul_nt), or with `baseline` against cuBLASLt's blockwise output (modelled as
    the correct kernel: promoted every block); one scale per tensor against the fast-accumulation
    baseline's model (the short accumulator over all of K), as step 1 is compared with cuBLASLt's."""
    import torch

    sa_shape, sb_shape = ((1,), (1,)) if scaling == "tensor" else ((K // 128, rows), (cols // 128, K // 128))
    a, b, sa, sb = random_args(_params(("A", "float8_e4m3fn", (rows, K)), ("B", "float8_e4m3fn", (cols, K)),
                                       ("SA", "float32", sa_shape), ("SB", "float32", sb_shape)), device="cpu")
    spec = tolerance_spec(tolerance)
    if scaling == "tensor":
        ref, against = fp8_kernel_like(a, b, sa, sb, promote=False).float(), "scaled_mm_tensor_fast"
        got = {"correct": fp8_kernel_like(a, b, sa, sb, promote=False),
               "missing_k_tile": fp8_kernel_like(a, b, sa, sb, promote=False, skip=K // 256)}
    else:
        ref, against = REFERENCES["scaled_matmul_nt"](a, b, sa, sb), "scaled_matmul_nt"
        if baseline:
            ref, against = fp8_kernel_like(a, b, sa, sb).float(), "scaled_mm_blockwise"
        got = {"correct": fp8_kernel_like(a, b, sa, sb),
               "missing_k_tile": fp8_kernel_like(a, b, sa, sb, skip=K // 256),
               "no_promotion": fp8_kernel_like(a, b, sa, sb, promote=False)}
    return {key: compare_output(d, ref, spec, [a, b, sa, sb], against) for key, d in got.items()}


def table(cases: dict[str, tuple[Callable[[], dict[str, dict[str, Any]]], Callable[[], dict[str, dict[str, Any]]]]]
          ) -> list[str]:
    """Markdown rows: for each case (name: (now, before), each a function returning {result:
    compare_output record}, under the tolerance and under the earlier one), each result's
    largest error and the share of the allowance it uses under each (above 100%: refused)."""
    rows = ["| timed case | result | max error | share of 2 e_ref + eps | share of the earlier bound |",
            "|---|---|---:|---:|---:|"]
    for name, (now, before) in cases.items():
        new, old = now(), before()
        for key, rec in new.items():
            rows.append(f"| {name} | {DEFECT_NAMES.get(key, 'correct result')} | {rec['max_abs_error']:.2g} | "
                        f"{100 * rec['max_error_over_allowed']:,.0f}% | {100 * old[key]['max_error_over_allowed']:,.0f}% |")
    return rows
