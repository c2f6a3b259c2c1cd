"""What chapter 12's block-scaled GEMMs share: their seeded inputs, the reference that decodes
them, the tolerance argued from the formats, and the rules of a call.

`D = alpha (A ∘ SA) (B ∘ SB)ᵀ`, A (M x K) and B (N x K) K-major, each element of A times the
scale of its block of `block` consecutive K elements (SA has one scale per row per block, and
likewise for B), accumulated in fp32 in tensor memory, D written in bf16. Scales travel in the
tiled layout of `gpubook.models.lowprec.blocked_scales`: (row blocks of 128, K / (4 block),
512) bytes. MXFP8 has no `alpha`; NVFP4 passes the product of the two fp32 tensor scales as a
one-element fp32 tensor after the scales, and E2M1 operands as PyTorch's packed
`float4_e2m1fn_x2` (rows, K / 2).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..models import lowprec as lp

BLK_K = 128            # K elements per K tile: one 128-byte row of E4M3


@dataclass(frozen=True)
class Recipe:
    """One block-scaled format: element format, scale format, block length, and the dtype
    strings of the kernel's parameters."""

    name: str
    element: lp.Format
    scale: str          # "ue8m0" or "ue4m3"
    block: int
    element_dtype: str      # the PyTorch dtype of an operand
    scale_dtype: str
    elements_per_byte: int = 1

    @property
    def tensor_scale(self) -> bool:
        return self.scale == "ue4m3"


MXFP8 = Recipe("MXFP8", lp.E4M3, "ue8m0", lp.MX_BLOCK, "float8_e4m3fn", "float8_e8m0fnu")
NVFP4 = Recipe("NVFP4", lp.E2M1, "ue4m3", lp.NVFP4_BLOCK, "float4_e2m1fn_x2", "float8_e4m3fn", 2)
RECIPES = {"mxfp8": MXFP8, "nvfp4": NVFP4}


def quantize(x: Any, recipe: Recipe = MXFP8) -> tuple[Any, Any, float]:
    """(elements as float32 values of the format, scale codes as uint8 (rows, K / block), the
    fp32 tensor scale: 1 for MX)."""
    import torch

    if recipe.tensor_scale:
        q, s, g = lp.nvfp4_quantize(x, recipe.block)
        return q, s.to(torch.float8_e4m3fn).view(torch.uint8), g
    q, s = lp.mx_quantize(x, recipe.element, recipe.block)
    return q, lp.ue8m0_codes(s), 1.0


def scale_values(codes: Any, recipe: Recipe = MXFP8) -> Any:
    """The float32 values of scale codes (uint8)."""
    import torch

    if recipe.tensor_scale:
        return codes.view(torch.float8_e4m3fn).float()
    return torch.exp2(codes.float() - lp.UE8M0_BIAS)


def decode(q: Any, codes: Any, recipe: Recipe = MXFP8) -> Any:
    """The float32 values the tensor core multiplies: elements times their block's scale."""
    blocks = q.float().reshape(*q.shape[:-1], q.shape[-1] // recipe.block, recipe.block)
    return (blocks * scale_values(codes, recipe)[..., None]).reshape(q.shape)


def hard_matrix(rows: int, K: int, seed: int, recipe: Recipe = MXFP8) -> Any:
    """A Gaussian whose blocks of `block` elements span seven binades (2^-3 ... 2^3), so that
    every block has a scale of its own and a scale from the wrong block, stage or K tile
    changes the product."""
    import torch

    g = torch.Generator().manual_seed(seed)
    spread = torch.exp2(torch.randint(-3, 4, (rows, K // recipe.block), generator=g).float())
    return torch.randn(rows, K, generator=g) * spread.repeat_interleave(recipe.block, 1)


def inputs(M: int, N: int, K: int, seed: int, recipe: Recipe = MXFP8) -> list[Any]:
    """[A, B, SA, SB, (ALPHA,) D]: seeded hard matrices, quantized; scales in the tiled layout;
    for NVFP4 the product of the tensor scales in fp32; D empty."""
    import torch

    qa, sa, ga = quantize(hard_matrix(M, K, seed, recipe), recipe)
    qb, sb, gb_ = quantize(hard_matrix(N, K, seed + 1, recipe), recipe)
    sdt = getattr(torch, recipe.scale_dtype)
    pad = int(scale_codes_of_one(recipe))      # a pad row's scale is one: it scales zeros
    if recipe.elements_per_byte == 2:
        A, B = (lp.pack_e2m1(q).view(torch.float4_e2m1fn_x2) for q in (qa, qb))
    else:
        A, B = (q.to(getattr(torch, recipe.element_dtype)) for q in (qa, qb))
    args = [A, B, lp.blocked_scales(sa, pad).view(sdt), lp.blocked_scales(sb, pad).view(sdt)]
    if recipe.tensor_scale:
        args.append(torch.tensor([ga * gb_], dtype=torch.float32))
    return args + [torch.empty(M, N, dtype=torch.bfloat16)]


def scale_codes_of_one(recipe: Recipe) -> int:
    """The scale code whose value is 1."""
    import torch

    if recipe.tensor_scale:
        return int(torch.tensor(1.0).to(torch.float8_e4m3fn).view(torch.uint8))
    return lp.UE8M0_BIAS


def elements(t: Any, recipe: Recipe = MXFP8) -> Any:
    """The float32 element values of an operand tensor (E2M1 unpacked, low nibble first)."""
    import torch

    if recipe.elements_per_byte == 2:
        return lp.unpack_e2m1(t.view(torch.uint8))
    return t.float()


def operands(A: Any, B: Any, SA: Any, SB: Any, recipe: Recipe = MXFP8) -> tuple[Any, Any]:
    """The decoded float32 operands of a call's arguments (without the tensor scale)."""
    import torch

    a_el, b_el = elements(A, recipe), elements(B, recipe)
    (M, K), N = a_el.shape, b_el.shape[0]
    sa = lp.unblocked_scales(SA.view(torch.uint8), M, K // recipe.block)
    sb = lp.unblocked_scales(SB.view(torch.uint8), N, K // recipe.block)
    return decode(a_el, sa, recipe), decode(b_el, sb, recipe)


def alpha(rest: Any, recipe: Recipe = MXFP8) -> float:
    """The fp32 factor the epilogue multiplies by: ALPHA's value for NVFP4, 1 for MX."""
    return float(rest[0][0]) if recipe.tensor_scale else 1.0


def reference(A: Any, B: Any, SA: Any, SB: Any, *rest: Any, recipe: Recipe = MXFP8) -> Any:
    """alpha times the product of the decoded operands, in float64, as float32."""
    a, b = operands(A, B, SA, SB, recipe)
    return (alpha(rest, recipe) * (a.double() @ b.double().T)).float()


def tolerance(A: Any, B: Any, SA: Any, SB: Any, *rest: Any, recipe: Recipe = MXFP8) -> tuple[float, float]:
    """(rtol, atol) argued from the formats. A product of two elements and their two scales is
    exact in fp32 (E4M3 x E4M3 x two powers of two: 8 significant bits; E2M1 x E2M1 x two UE4M3
    scales: 2 + 2 + 4 + 4 = 12), so the accumulator's error is that of K fp32 additions, each
    within 2^-24 of a partial sum bounded by sum |a| |b|: atol = alpha K 2^-24 max sum |a| |b|.
    NVFP4's epilogue multiplies by alpha in fp32 (2^-24 relative more); the bf16 store rounds
    to 8 significant bits (2^-9): rtol = 2^-8 covers both, and the rounding of the
    accumulator's error."""
    a, b = operands(A, B, SA, SB, recipe)
    bound = float((a.abs().double() @ b.abs().double().T).max())
    return 2.0 ** -8, alpha(rest, recipe) * a.shape[1] * 2.0 ** -24 * bound


def check(kernel: Any, M: int, N: int, K: int, seed: int = 1, stress: int = 0,
          recipe: Recipe = MXFP8, resident: int | None = None) -> Any:
    """gb.check of a block-scaled GEMM on seeded hard inputs, at `tolerance` (the largest over
    the inputs and, with `stress`, every variant)."""
    from ..verify.check import STRESS_VARIANTS
    from ..verify.check import check as run_check

    args = inputs(M, N, K, seed, recipe)
    variants = lambda s: inputs(M, N, K, 2 * s, recipe)  # noqa: E731 - the check calls it per seed
    tols = [tolerance(*args[:-1], recipe=recipe)]
    if stress:
        tols += [tolerance(*variants(1000 + v)[:-1], recipe=recipe) for v in range(STRESS_VARIANTS)]
    rtol, atol = max(t[0] for t in tols), max(t[1] for t in tols)
    return run_check(kernel, args, ref=lambda *a: reference(*a[:-1], recipe=recipe),
                     rtol=rtol, atol=atol, stress=stress, variants=variants, resident=resident)


def validate(A: Any, B: Any, SA: Any, SB: Any, *rest: Any, recipe: Recipe = MXFP8,
             blk_k: int = BLK_K) -> tuple[int, int, int]:
    """(M, N, K) of a call (`rest`: NVFP4's ALPHA), or KernelCallError naming the first rule it
    breaks."""
    import torch

    from ..compile.signature import KernelCallError

    def refuse(msg: str) -> None:
        raise KernelCallError(f"{recipe.name} GEMM: {msg}")

    edt, sdt = getattr(torch, recipe.element_dtype), getattr(torch, recipe.scale_dtype)
    for name, t in (("A", A), ("B", B)):
        if t.dtype != edt:
            refuse(f"{name} is {t.dtype}, the kernel takes {edt}")
        if t.dim() != 2 or not t.is_contiguous():
            refuse(f"{name} must be a dense K-major matrix (rows x K, contiguous)")
    per = recipe.elements_per_byte               # E2M1: two elements per byte along K
    (M, K), (N, K_b) = (A.shape[0], A.shape[1] * per), (B.shape[0], B.shape[1] * per)
    if K != K_b:
        refuse(f"A has K = {K}, B has K = {K_b}")
    if K <= 0 or K % blk_k:
        refuse(f"K = {K} is not a positive multiple of {blk_k} (whole K tiles; pad A and B with zero columns)")
    if N % 8:
        refuse(f"N = {N}: rows of the bf16 D must lie a multiple of 16 bytes apart (N a multiple of 8)")
    for name, s, rows in (("SA", SA, M), ("SB", SB, N)):
        want = (-(-rows // lp.SF_ROWS), K // recipe.block // lp.SF_COLS, lp.SF_ROWS * lp.SF_COLS)
        if s.dtype != sdt:
            refuse(f"{name} is {s.dtype}, the scales are {sdt}")
        if tuple(s.shape) != want or not s.is_contiguous():
            refuse(f"{name} has shape {tuple(s.shape)}; one scale per {recipe.block} elements of K in "
                   f"the tiled layout is {want} (gpubook.models.lowprec.blocked_scales)")
    if recipe.tensor_scale and (len(rest) != 1 or rest[0].dtype != torch.float32 or tuple(rest[0].shape) != (1,)):
        refuse("ALPHA, the product of the two tensor scales, is one fp32 value: a float32 tensor of shape (1,)")
    if not recipe.tensor_scale and rest:
        refuse(f"{recipe.name} takes no tensor scale")
    return M, N, K


class BlockScaledGemm:
    """A block-scaled GEMM as a function of torch tensors: `D = gemm(A, B, SA, SB)`. A call
    checks its arguments (`validate`) before anything is built, builds the kernel for their
    shapes once (`make(M, N, K)`), and launches it where a GPU can run it; elsewhere a valid
    call raises RuntimeError after the build."""

    def __init__(self, make: Any, name: str, recipe: Recipe = MXFP8, blk_k: int = BLK_K):
        self.make, self.name, self.recipe, self.blk_k = make, name, recipe, blk_k
        self._kernels: dict[tuple[int, int, int], Any] = {}

    def kernel(self, M: int, N: int, K: int) -> Any:
        from ..compile.build import build

        if (M, N, K) not in self._kernels:
            self._kernels[(M, N, K)] = build(self.make(M, N, K), name=f"{self.name}_{M}x{N}x{K}")
        return self._kernels[(M, N, K)]

    def __call__(self, A: Any, B: Any, SA: Any, SB: Any, *rest: Any) -> Any:
        import torch

        from ..run import runtime

        M, N, K = validate(A, B, SA, SB, *rest, recipe=self.recipe, blk_k=self.blk_k)
        kern = self.kernel(M, N, K)
        why = runtime.why_not_here(kern.runs_on)
        if why is not None:
            raise RuntimeError(f"{kern.name} compiled for {', '.join(kern.runs_on)} — not launched: {why}")
        D = torch.empty(M, N, dtype=torch.bfloat16, device=A.device)
        arch = runtime.local_arch()
        runtime.load(kern.export(arch), kern.name, kern.params, arch)(A, B, SA, SB, *rest, D)
        return D


def plot_errors(names: Sequence[str], groups: dict[str, Sequence[float]], xlabel: str) -> Any:
    """Grouped horizontal bars on a log axis: one row per name (a format), one bar per group
    (a kind of data), each labelled with its value."""
    from ..models.plots import PAGE_WIDTH_IN, PALETTE, SIZES, _new_axes, finish_log_rows

    fig, ax = _new_axes(None, size=(PAGE_WIDTH_IN, 1.0 + 0.55 * len(names) * max(len(groups), 1) ** 0.5))
    h = 0.8 / max(len(groups), 1)
    colors = list(PALETTE.values())
    values = [v for vs in groups.values() for v in vs]
    for n, (group, vals) in enumerate(groups.items()):
        offset = (n - (len(groups) - 1) / 2) * h
        ys = [i + offset for i in range(len(names))]
        ax.barh(ys, vals, height=h, color=colors[n % len(colors)], label=group, gid=f"errors-{n}")
        for y, v in zip(ys, vals):
            ax.text(v * 1.15, y, f"{v:.1e}", va="center", fontsize=SIZES["note"], color=PALETTE["black"])
    return finish_log_rows(fig, ax, names, (min(values) / 3, max(values) * 12), xlabel, "above")
