"""The Blackwell GEMM ladder's shared parts: calls it refuses, tolerances, diffs, a model, tables.

`D = A @ B.T` with A (M x K) and B (N x K) both K-major, fp16 or bf16 in, fp32 accumulated in
tensor memory, D written in the input dtype. Chapters 8-10 build the kernels; this module holds
what they would otherwise repeat: the checks of a call (`problem`, `Gemm`, and the rules that
the Hopper ladder shares, `validate_operands`), the tolerance of a check (`tolerance`), the diff
of one step against the next (`show_diff`), the performance model of a step (`Plan`, `bound`),
the published figures a step is compared with (`PUBLISHED`), and the ladder's table and figure
(`ladder_rows`, `ladder_markdown`, `plot_ladder`).
"""

from __future__ import annotations

import difflib
import hashlib
import inspect
import math
import os
import re
import textwrap
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

from .hardware import B200, GPU, REGISTERS_PER_SM
from .roofline import gemm_bytes, gemm_flops
from .signature import KernelCallError

SUPPORTED_DTYPES = ("float16", "bfloat16")
TMA_ALIGN = 16  # bytes: a tensor map's base address and row strides are multiples of 16
UNIT_ROUNDOFF = {"float16": 2.0**-11, "bfloat16": 2.0**-8}  # half an ulp, relative
SMALLEST_SUBNORMAL = {"float16": 2.0**-24, "bfloat16": 2.0**-133}
LATENCY_NS = 800  # ASSUMED loaded round trip to memory, as in chapters 1, 2 and 5 — not a spec


# -- calls the kernels cannot serve ----------------------------------------------------------
class GemmCallError(KernelCallError):
    """A GEMM call the ladder's kernels cannot serve, refused before anything is built or launched."""


def validate_operands(A: Any, B: Any, blk_k: int, mma: str, reads: str,
                      writes: str) -> tuple[int, int, int, str]:
    """(M, N, K, dtype) of D = A @ B.T, or GemmCallError naming the rule the call breaks: the
    rules both GEMM ladders share.

    Their kernels multiply fp16 or bf16 operands alike with `mma`, read A (M x K) and B (N x K)
    as dense K-major rows with `reads` (16-byte aligned, like a tensor map's base and row
    stride), walk K in whole tiles of `blk_k`, and write D (M x N) in the input dtype with
    `writes`, which need rows of D a multiple of 16 bytes apart. The three words name each
    ladder's instructions in the messages.
    """
    for name, t in (("A", A), ("B", B)):
        if getattr(t, "dim", lambda: -1)() != 2:
            raise GemmCallError(f"{name} must be a matrix (a 2-D tensor), got {type(t).__name__} "
                                f"with shape {tuple(getattr(t, 'shape', ()))}")
    dtype = str(A.dtype).removeprefix("torch.")
    other = str(B.dtype).removeprefix("torch.")
    if dtype not in SUPPORTED_DTYPES or other != dtype:
        raise GemmCallError(
            f"unsupported dtypes A {dtype}, B {other}: the kernels' {mma} multiplies "
            f"{' or '.join(SUPPORTED_DTYPES)}, both operands alike")
    (M, K), (N, KB) = tuple(A.shape), tuple(B.shape)
    if K != KB:
        raise GemmCallError(f"A is {M} x {K} but B is {N} x {KB}: D = A @ B.T needs equal K "
                            "(it sums over the same K columns of A and B)")
    if K == 0 or K % blk_k:
        raise GemmCallError(
            f"K = {K} is not a positive multiple of BLK_K = {blk_k}: the K loop runs whole tiles "
            "(pad A and B with zero columns to the next multiple)")
    esize = A.element_size()
    for name, t in (("A", A), ("B", B)):
        if t.stride(1) != 1:
            raise GemmCallError(
                f"{name} has strides {tuple(t.stride())}: the kernels read K-major rows ({reads} "
                "walk the innermost dimension contiguously), so K must have stride 1; pass "
                ".contiguous()")
        if t.stride(0) != t.shape[1]:
            raise GemmCallError(
                f"{name}'s rows are {t.stride(0) * esize} bytes apart, not {t.shape[1] * esize}: "
                "the kernels are compiled for dense rows (row stride = K); pass .contiguous()")
        if (t.stride(0) * esize) % TMA_ALIGN:
            raise GemmCallError(
                f"{name}'s rows are {t.stride(0) * esize} bytes apart, and {reads} need a row "
                f"stride that is a multiple of {TMA_ALIGN} bytes")
        if t.data_ptr() % TMA_ALIGN:
            raise GemmCallError(
                f"{name} starts at an address that is not a multiple of {TMA_ALIGN} bytes, and "
                f"{reads} need a {TMA_ALIGN}-byte-aligned base; pass .clone()")
    if (N * esize) % TMA_ALIGN:
        raise GemmCallError(
            f"N = {N}: rows of D would be {N * esize} bytes apart, and {writes} need a row "
            f"stride that is a multiple of {TMA_ALIGN} bytes (N a multiple of {TMA_ALIGN // esize})")
    return M, N, K, dtype


def problem(A: Any, B: Any, blk_k: int, m: int | None = None, n: int | None = None,
            k: int | None = None) -> tuple[int, int, int, str]:
    """(M, N, K, dtype) of D = A @ B.T for the Blackwell ladder, or GemmCallError naming the
    rule the call breaks.

    Besides the rules of both ladders (`validate_operands`: the kernels read A and B through
    tensor maps or 16-byte vector loads and write D with 16-byte stores or TMA), a call must
    have an output to launch for; `m`, `n`, `k` pin a size for a step that handles only one
    (steps 1 and 2 compute a single output tile).
    """
    M, N, K, dtype = validate_operands(
        A, B, blk_k, mma="tcgen05.mma .kind::f16", reads="tensor maps and 16-byte vector loads",
        writes="the 16-byte stores of steps 1-3 and TMA stores")
    if M == 0 or N == 0:
        raise GemmCallError(f"D would be {M} x {N}: an empty output has nothing to launch")
    for label, want, got in (("M", m, M), ("N", n, N), ("K", k, K)):
        if want is not None and got != want:
            raise GemmCallError(f"{label} = {got}: this step computes {label} = {want} only")
    return M, N, K, dtype


class Gemm:
    """One step of the ladder as a function of torch tensors: `D = gemm(A, B)`.

    A call checks the arguments (`problem`), builds the kernel for their shapes once (`make(M,
    N, K, dtype, **options)` returns the TIRx PrimFunc), and launches it on the GPU. A call the
    kernels cannot serve raises GemmCallError before anything is built; on a machine without a
    GPU that can run the kernel, a valid call raises RuntimeError after the build.
    """

    def __init__(self, make: Callable[..., Any], name: str, blk_k: int, m: int | None = None,
                 n: int | None = None, k: int | None = None, **options: Any):
        self.make, self.name, self.blk_k = make, name, blk_k
        self.pinned = {"m": m, "n": n, "k": k}
        self.options = options
        self._kernels: dict[tuple[int, int, int, str], Any] = {}

    def kernel(self, M: int, N: int, K: int, dtype: str) -> Any:
        """The built kernel for these sizes (gb.build, cached)."""
        from .build import build

        key = (M, N, K, dtype)
        if key not in self._kernels:
            self._kernels[key] = build(self.make(M, N, K, dtype, **self.options),
                                       name=f"{self.name}_{M}x{N}x{K}_{dtype}")
        return self._kernels[key]

    def __call__(self, A: Any, B: Any) -> Any:
        import torch

        from . import runtime

        M, N, K, dtype = problem(A, B, self.blk_k, **self.pinned)
        kern = self.kernel(M, N, K, dtype)
        why = runtime.why_not_here(kern.runs_on)
        if why is not None:
            raise RuntimeError(f"{kern.name} compiled for {', '.join(kern.runs_on)} — not launched: {why}")
        D = torch.empty(M, N, dtype=A.dtype, device=A.device)
        arch = runtime.local_arch()
        runtime.load(kern.export(arch), kern.name, kern.params, arch)(A, B, D)
        return D


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

    from .check import seeded

    A = seeded((M, K), dtype, seed)
    B = seeded((N, K), dtype, seed + 1)
    return [A, B, torch.empty(M, N, dtype=A.dtype)]


def check(kernel: Any, M: int, N: int, K: int, dtype: str, seed: int = 1, stress: int = 0) -> Any:
    """gb.check of a ladder kernel against `reference` on seeded inputs, at `tolerance`.

    With `stress`, the stress run's input variants are fresh seeded matrices (seeds 2s, 2s + 1
    for variant seed s), and the tolerance is the largest over the inputs and every variant.
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
                     stress=stress, variants=variants)


# -- what changed ------------------------------------------------------------------------------
def _named_source(f: Callable[..., Any] | str) -> tuple[str, list[str]]:
    """(name, lines) of a function, or of a function's source text (its `def` names it)."""
    if isinstance(f, str):
        m = re.match(r"\s*def (\w+)", f)
        return (m.group(1) if m else "old"), textwrap.dedent(f).splitlines()
    return f.__name__, textwrap.dedent(inspect.getsource(f)).splitlines()


def source_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = 2) -> str:
    """The unified diff of two functions' source code (what changed from one step to the next);
    either may be given as source text, e.g. a function read from another chapter."""
    (na, a), (nb, b) = _named_source(old), _named_source(new)
    lines = difflib.unified_diff(a, b, fromfile=na, tofile=nb, n=context, lineterm="")
    return "\n".join(lines)


def show_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = 2) -> Any:
    """The diff as a Markdown ``diff`` code block, for a notebook cell to display."""
    from IPython.display import Markdown

    return Markdown(f"```diff\n{source_diff(old, new, context)}\n```")


CHAPTERS_DIR = Path(__file__).resolve().parent.parent / "chapters"


def chapter_source(chapter: str, name: str, chapters_dir: Path | str | None = None) -> str:
    """The source of the top-level function `name` defined in a code cell of a chapter
    (chapters/<chapter>.md): a step's kernel factory, for diffing against the next chapter's."""
    text = (Path(chapters_dir or CHAPTERS_DIR) / f"{chapter}.md").read_text()
    for cell in re.findall(r"```\{code-cell\}[^\n]*\n(.*?)\n```", text, flags=re.S):
        lines = cell.splitlines()
        for i, ln in enumerate(lines):
            if ln.startswith(f"def {name}("):
                body = [ln]
                for nxt in lines[i + 1:]:
                    if nxt and not nxt[0].isspace():
                        break
                    body.append(nxt)
                while body and not body[-1].strip():
                    body.pop()
                return "\n".join(body)
    raise KeyError(f"no top-level def {name}(...) in a code cell of {chapter}.md")


def load_factory(chapter: str, name: str, namespace: dict[str, Any]) -> Callable[..., Any]:
    """Define chapter `chapter`'s function `name` in `namespace` (which must hold the names it
    uses) and return it: a kernel of an earlier chapter, rebuilt to find its replays."""
    import linecache

    src = chapter_source(chapter, name) + "\n"
    filename = str(CHAPTERS_DIR / f"{chapter}.md:{name}")  # TIRx's parser reads the source back
    linecache.cache[filename] = (len(src), None, src.splitlines(True), filename)
    exec(compile(src, filename, "exec"), namespace)
    return namespace[name]


def diff_counts(old: Callable[..., Any] | str, new: Callable[..., Any] | str) -> tuple[int, int]:
    """(lines removed, lines added) from `old` to `new`."""
    lines = source_diff(old, new, 0).splitlines()[2:]
    return (sum(ln.startswith("-") for ln in lines), sum(ln.startswith("+") for ln in lines))


# -- static facts ---------------------------------------------------------------------------------
PTX_EXTRA: list[tuple[str, str]] = [
    ("fence.proxy.async", r"fence\.proxy\.async"),
    ("trap", r"trap\b"),
    ("mbarrier.init", r"mbarrier\.init"),
    ("tcgen05.fence::before", r"tcgen05\.fence::before_thread_sync"),
    ("tcgen05.fence::after", r"tcgen05\.fence::after_thread_sync"),
    ("tcgen05.dealloc", r"tcgen05\.dealloc"),
    ("relinquish", r"tcgen05\.relinquish_alloc_permit"),
    ("bulk commit_group", r"cp\.async\.bulk\.commit_group"),
    ("bulk wait_group.read", r"cp\.async\.bulk\.wait_group\.read"),
    ("setmaxnreg.dec", r"setmaxnreg\.dec"),
    ("setmaxnreg.inc", r"setmaxnreg\.inc"),
]


def ptx_facts(kernel: Any) -> dict[str, int]:
    """The kernel's PTX counts (gb.build's families) and the ladder's extra ones (fences, traps,
    barrier inits, bulk groups, register reallocation)."""
    from .report import count_ptx

    return {**kernel.ptx_counts, **count_ptx(kernel.ptx, PTX_EXTRA)}


def proxy_fenced(ptx: str, consumer: str) -> bool:
    """True when, before the first instruction matching `consumer` (a regex: the tensor core's
    `tcgen05\\.mma`, a TMA store), the last st.shared is followed by a fence.proxy.async and then
    a barrier: generic stores published to the async proxy before the consumer is released."""
    from .report import ptx_instructions

    seq = [ins for ins in ptx_instructions(ptx)
           if re.match(r"st\.shared|fence\.proxy\.async|bar(rier)?\.(cta\.)?sync|" + consumer, ins)]
    first = next((i for i, ins in enumerate(seq) if re.match(consumer, ins)), None)
    stores = [i for i, ins in enumerate(seq[: first or 0]) if ins.startswith("st.shared")]
    if first is None or not stores:
        return False
    kinds = ["fence" if ins.startswith("fence") else "bar" if ins.startswith("bar") else "other"
             for ins in seq[stores[-1] + 1 : first]]
    return "fence" in kinds and "bar" in kinds[kinds.index("fence"):]


def refill_fenced(ptx: str) -> bool:
    """True when the PTX has a tcgen05.mma and, in program order, every st.shared after the first
    one follows a fence.proxy.async that follows the last mbarrier wait before it: ordinary
    stores into tiles the tensor core read are ordered after its reads (a write after a read,
    across proxies). Branches are ignored, as in `gpubook.lint`."""
    from .report import ptx_instructions

    seen_mma, fenced = False, True
    for ins in ptx_instructions(ptx):
        if ins.startswith("tcgen05.mma"):
            seen_mma = True
        elif re.match(r"mbarrier\.(?:try_wait|test_wait)", ins):
            fenced = False
        elif ins.startswith("fence.proxy.async"):
            fenced = True
        elif ins.startswith("st.shared") and seen_mma and not fenced:
            return False
    return seen_mma


def tmem_columns(kernel: Any) -> dict[str, list[int]]:
    """The column count of every tcgen05.alloc and tcgen05.dealloc the kernel's CUDA source
    issues: {'alloc': [...], 'dealloc': [...]} (TMEMPool passes them as constants)."""
    out: dict[str, list[int]] = {}
    for kind in ("alloc", "dealloc"):
        out[kind] = [int(n) for n in re.findall(
            rf"tcgen05_{kind}_{kind}\w*\(.*?, \(uint\)(\d+)\);", kernel.source)]
    return out


def setmaxnreg_values(ptx: str) -> dict[str, list[int]]:
    """{'dec': [...], 'inc': [...]}: the register counts of every setmaxnreg in the PTX."""
    out: dict[str, list[int]] = {"dec": [], "inc": []}
    for kind, n in re.findall(r"setmaxnreg\.(dec|inc)\.sync\.aligned\.u32\s+(\d+)", ptx):
        out[kind].append(int(n))
    return out


# Blackwell step -> the step of chapter 10H (the same pipeline on Hopper's wgmma) it mirrors.
HOPPER_TWIN_STEP = {4: 1, 5: 2, 6: 4, 7: 3}


def hopper_twin(step: int, chapters_dir: Path | str | None = None) -> str | None:
    """'chapter 10H, step n: <its title>' as a Markdown link once chapter 10H exists, or a
    plain note naming the chapter; None for a step without a Hopper twin."""
    n = HOPPER_TWIN_STEP.get(step)
    if n is None:
        return None
    found = sorted(Path(chapters_dir or CHAPTERS_DIR).glob("10H-*.md"))
    if not found:
        return f"chapter 10H, step {n} (in preparation)"
    title = next((ln[3:].strip() for ln in found[0].read_text().splitlines()
                  if ln.startswith(f"## Step {n}:")), f"Step {n}")
    return f"[chapter 10H]({found[0].name}), {title[0].lower() + title[1:]}"


def fingerprint(func: Any) -> str:
    """The fingerprint gb.build would give this PrimFunc (its TIRx script's hash), without building."""
    return hashlib.sha256(func.script().encode()).hexdigest()[:16]


# -- the performance model ---------------------------------------------------------------------
@dataclass(frozen=True)
class Plan:
    """What the model needs to know about one step.

    `in_flight`: K tiles of A and B a CTA keeps on their way at once (1 for a kernel that waits
    for each load). `overlap`: loads run while the tensor core works (a ring); otherwise each K
    tile pays its round trip and then its MMAs. `ctas_per_sm`: CTAs resident per SM (from the
    shared-memory and TMEM budgets). `refill_per_tile`: the ring starts empty for every output
    tile (False once a producer runs ahead across tiles).
    """

    blk_m: int
    blk_n: int
    blk_k: int
    in_flight: int = 1
    overlap: bool = False
    ctas_per_sm: int = 1
    refill_per_tile: bool = True


@dataclass(frozen=True)
class Bound:
    """The three floors of a step's time, in seconds, and the one that binds."""

    flops: float
    compute_s: float
    memory_s: float
    latency_s: float
    waiting: bool = True  # the per-CTA floor is set by round trips (else by MMAs, in waves of tiles)

    @property
    def seconds(self) -> float:
        return max(self.compute_s, self.memory_s, self.latency_s)

    @property
    def limit(self) -> str:
        """'compute', 'memory', 'latency' (round trips), or 'MMAs in waves' (the tensor core
        of each SM busy, but the tiles quantized into rounds of one per CTA slot)."""
        third = "latency" if self.waiting else "MMAs in waves"
        return max((self.compute_s, "compute"), (self.memory_s, "memory"), (self.latency_s, third))[1]

    @property
    def tflops(self) -> float:
        return self.flops / self.seconds / 1e12


def bound(M: int, N: int, K: int, plan: Plan, gpu: GPU = B200, dtype: str = "float16",
          latency_ns: float = LATENCY_NS) -> Bound:
    """Chapter 2's roofline, plus Little's law for the loads a CTA keeps in flight.

    compute: 2MNK at the tensor-core peak. memory: A and B read once, D written once, at the
    HBM peak (L2 catching every reuse). latency: the output tiles run in rounds of
    SMs x ctas_per_sm; in each, a CTA walks K/BLK_K tiles, each costing a round trip plus its
    MMAs when the two alternate, or max(round trip / in_flight, MMAs) when a ring overlaps them,
    plus one round trip to fill the ring (per tile, or once when the producer runs ahead).
    """
    flops = gemm_flops(M, N, K)
    peak = gpu.peak_flops(dtype)
    compute = flops / peak
    memory = gemm_bytes(M, N, K, 2) / gpu.hbm_bandwidth
    tiles = math.ceil(M / plan.blk_m) * math.ceil(N / plan.blk_n)
    rounds = math.ceil(tiles / (gpu.sms * plan.ctas_per_sm))
    k_tiles = math.ceil(K / plan.blk_k)
    lat = latency_ns * 1e-9
    mma = 2 * plan.blk_m * plan.blk_n * plan.blk_k / (peak / gpu.sms)  # one K tile, one SM
    if plan.overlap:
        waiting = lat / plan.in_flight >= mma * plan.ctas_per_sm
        per_tile = k_tiles * max(lat / plan.in_flight, mma * plan.ctas_per_sm)
        latency = rounds * (per_tile + (lat if plan.refill_per_tile else 0.0))
        latency += 0.0 if plan.refill_per_tile else lat
    else:
        waiting = True
        latency = rounds * k_tiles * (lat + mma)
    return Bound(flops, compute, memory, latency, waiting)


def ctas_per_sm(kernel: Any, tmem_cols: int, gpu: GPU = B200, threads: int = 128) -> int:
    """CTAs of `kernel` that fit on one SM by shared memory (with the system's reserve), by TMEM
    columns and by threads (the register file is not the limit of any step of the ladder)."""
    from .build import SYSTEM_SMEM_RESERVE
    from .hardware import MAX_THREADS_PER_SM

    smem = kernel.dynamic_smem + kernel.static_smem + SYSTEM_SMEM_RESERVE
    tmem_cols_per_sm = gpu.tmem_per_sm // (128 * 4)
    return min(gpu.smem_per_sm // smem, tmem_cols_per_sm // tmem_cols, MAX_THREADS_PER_SM // threads)


# -- published figures and measurements --------------------------------------------------------
PUBLISHED_SOURCE = ("mlc-ai/modern-gpu-programming-for-mlsys (commit 0fdad07), GEMM chapter, "
                    "\"End-to-End Results\": NVIDIA B200, M = N = K = 4096, fp16, locked clocks")
# Milliseconds of the matching step of that ladder (its steps 1-3 are synchronous, one tile per
# CTA; its step 1 figure is of a full-matrix variant of the single-tile data path). Steps it
# does not report are absent.
PUBLISHED_MS: dict[int, float] = {1: 70.0, 3: 53.6, 4: 0.49, 7: 0.23}
PUBLISHED_SHAPE = (4096, 4096, 4096)
PUBLISHED_CUBLAS_MS = 0.094


# Steps 8-10, at the same shape, fp16, published as TFLOP/s: steps 8 and 9 by the same ladder
# (2-CTA 256 x 256 MMA; two consumer warpgroups), step 10 by the TIRx-kernels GEMM (2 x 1
# cluster, CLC, the configuration of `SOTA`), "bench_suite/baseline.md" at commit f495258.
PUBLISHED_TFLOPS: dict[int, float] = {8: 1321.0, 9: 1462.0, 10: 1411.0}
PUBLISHED_SOTA_SOURCE = ("mlc-ai/TIRx-kernels (commit f495258), tirx_kernels/gemm/fp16_bf16_gemm.py and "
                         "bench_suite/baseline.md: NVIDIA B200, fp16 4096³ (bf16 8192³: 1595 TFLOP/s)")


def published_tflops(step: int) -> float | None:
    """TFLOP/s of the published figure for `step`, or None where no public ladder reports one."""
    if step in PUBLISHED_TFLOPS:
        return PUBLISHED_TFLOPS[step]
    ms = PUBLISHED_MS.get(step)
    return None if ms is None else gemm_flops(*PUBLISHED_SHAPE) / (ms * 1e-3) / 1e12


# -- the configuration of the fastest published kernels (chapter 10) ------------------------------
@dataclass(frozen=True)
class Config:
    """A 2-CTA GEMM's shape: cluster, MMA instruction, K tile, ring depth, registers per role."""

    cluster: tuple[int, int]
    mma_m: int
    mma_n: int
    blk_k: int
    stages: int
    regs_producer: int
    regs_consumer: int
    consumers: int

    @property
    def blk_m(self) -> int:
        """Rows of A (and of D) per CTA: the MMA's M split over the cluster's CTAs."""
        return self.mma_m // self.cluster[0]

    @property
    def b_rows(self) -> int:
        """Rows of B per CTA: a 2-CTA MMA reads half of its N from each CTA's shared memory."""
        return self.mma_n // self.cluster[0]

    @property
    def threads(self) -> int:
        """A producer warpgroup and the consumer warpgroups."""
        return 128 * (1 + self.consumers)


SOTA = Config(cluster=(2, 1), mma_m=256, mma_n=256, blk_k=64, stages=4, regs_producer=56,
              regs_consumer=224, consumers=2)


def launch_registers(threads: int, registers_per_sm: int = REGISTERS_PER_SM) -> int:
    """Registers per thread that ptxas gives a launch of `threads` threads, one CTA per SM: the
    SM's file divided among them, rounded down to a multiple of 8."""
    return registers_per_sm // threads // 8 * 8


def register_exchange_fits(cfg: Config, registers_per_sm: int = REGISTERS_PER_SM) -> bool:
    """setmaxnreg's rules for `cfg`: counts are multiples of 8 in [24, 256], .dec lowers and
    .inc raises the launch's count, and the roles' counts fit in the CTA's pool."""
    launch = launch_registers(cfg.threads, registers_per_sm)
    ok = all(r % 8 == 0 and 24 <= r <= 256 for r in (cfg.regs_producer, cfg.regs_consumer))
    pool = 128 * cfg.regs_producer + 128 * cfg.consumers * cfg.regs_consumer
    return ok and cfg.regs_producer <= launch <= cfg.regs_consumer and pool <= cfg.threads * launch


def smem_budget(stages: int, blk_m: int, b_rows: int, blk_k: int, d_bytes: int,
                header: int = 1024, esize: int = 2) -> int:
    """Dynamic shared memory of a ladder kernel: the barrier header (padded to 1024 bytes for the
    swizzled tiles), `stages` K tiles of A (blk_m rows) and B (b_rows rows), the output staging."""
    return header + stages * (blk_m + b_rows) * blk_k * esize + d_bytes


def tmem_budget(accumulators: int, blk_n: int) -> int:
    """TMEM columns a CTA allocates for `accumulators` fp32 accumulators of `blk_n` columns: a
    power of two in [32, 512], or ValueError when they do not fit in the SM's 512."""
    from .tmem import alloc_columns

    return alloc_columns(accumulators * blk_n)


def measured(name: str, func: Any, chapter: str | None = None) -> dict[str, Any] | None:
    """The newest replayed timing of exactly this kernel (name and script), or None."""
    from . import results

    return results.latest(name, "perf", chapter=chapter, fingerprint=fingerprint(func))


# -- the ladder's table and figure ---------------------------------------------------------------
@dataclass
class Row:
    """One step in the ladder's table: the model's bound, the published figure, the measurement."""

    step: int
    name: str
    adds: str
    shape: tuple[int, int, int]
    bound: Bound
    published: float | None  # TFLOP/s, at PUBLISHED_SHAPE
    measured: dict[str, Any] | None  # a results case

    @property
    def measured_tflops(self) -> float | None:
        c = self.measured
        if not c or not c.get("ms"):
            return None
        return gemm_flops(*self.shape) / (c["ms"] * 1e-3) / 1e12


PERF_ENV = "GPUBOOK_PERF"


def perf_enabled() -> bool:
    """True when GPUBOOK_PERF asks chapters to build and time the large shapes."""
    return os.environ.get(PERF_ENV, "") not in ("", "0", "false", "no")


def step_row(step: int, name: str, adds: str, make: Callable[..., Any], shape: tuple[int, int, int],
             plan: Plan, dtype: str = "float16", **options: Any) -> Row:
    """One row of the ladder at `shape`: the model's bound, the published figure (at its shape
    only), and the newest replayed timing of exactly this kernel.

    With GPUBOOK_PERF=1 the kernel is also built and timed here (gb.bench, which exports the
    performance case for a GPU host); without it nothing is compiled: the fingerprint of the
    PrimFunc is enough to find a replay.
    """
    from .export import current_chapter

    func = make(*shape, dtype, **options)
    rec = None
    if perf_enabled():
        from .bench import bench
        from .build import build

        timing = bench(build(func, name=name), flops=gemm_flops(*shape), baseline="matmul_nt",
                       dtype=dtype)
        if timing.status == "measured":
            import datetime

            rec = {"ms": timing.ms, "run": {"gpu": timing.gpu, "date": datetime.date.today().isoformat()}}
    if rec is None:
        rec = measured(name, func, chapter=current_chapter())
    pub = published_tflops(step) if tuple(shape) == PUBLISHED_SHAPE else None
    return Row(step, name, adds, tuple(shape), bound(*shape, plan, dtype=dtype), pub, rec)


def _rate(tflops: float) -> str:
    """A TFLOP/s figure: whole numbers from 100 up, three significant digits below."""
    return f"{tflops:,.0f}" if tflops >= 100 else f"{tflops:.3g}"


def ladder_markdown(rows: Sequence[Row]) -> str:
    """The table: shape, the model's bound (and what binds it), published and measured TFLOP/s."""
    head = ("| step | kernel | adds | M × N × K | model bound, TFLOP/s (binds) | published B200, TFLOP/s "
            "(not measured here) | measured here on a B200, TFLOP/s |\n|---:|---|---|---|---:|---:|---:|")
    lines = [head]
    for r in rows:
        shape = " × ".join(map(str, r.shape))
        pub = "—" if r.published is None else _rate(r.published)
        if r.measured_tflops is None:
            meas = "not measured"
        else:
            run = r.measured["run"]
            meas = f"{_rate(r.measured_tflops)} ({run['gpu'].replace('NVIDIA ', '')}, {run['date']})"
        lines.append(f"| {r.step} | `{r.name}` | {r.adds} | {shape} | "
                     f"{_rate(r.bound.tflops)} ({r.bound.limit}) | {pub} | {meas} |")
    return "\n".join(lines)


def plot_ladder(rows: Sequence[Row], gpu: GPU = B200) -> Any:
    """TFLOP/s per step on a log axis: the model's bound (bars), the published figure and the
    measurement (markers), and the tensor-core peak."""
    from .plots import PALETTE, SIZES, _new_axes, PAGE_WIDTH_IN

    fig, ax = _new_axes(None, size=(PAGE_WIDTH_IN, 4.2))
    xs = list(range(len(rows)))
    ax.bar(xs, [r.bound.tflops for r in rows], width=0.6, color=PALETTE["sky"],
           label="model bound (roofline + Little's law)", gid="bound")
    pub = [(x, r.published) for x, r in zip(xs, rows) if r.published]
    ax.plot([p[0] for p in pub], [p[1] for p in pub], "D", color=PALETTE["vermillion"], ms=7,
            label="published B200 figure (not measured here)", gid="published")
    meas = [(x, r.measured_tflops) for x, r in zip(xs, rows) if r.measured_tflops]
    if meas:
        ax.plot([m[0] for m in meas], [m[1] for m in meas], "o", color=PALETTE["black"], ms=7,
                label="measured here", gid="measured")
    else:
        ax.plot([], [], "o", color=PALETTE["black"], label="measured here: none yet")
    ax.axhline(gpu.bf16_flops / 1e12, color=PALETTE["grey"], ls="--", lw=1,
               label=f"{gpu.name} dense fp16 peak, {gpu.bf16_flops / 1e12:,.0f} TFLOP/s")
    ax.set_yscale("log")
    ax.set_ylim(1, gpu.bf16_flops / 1e12 * 3)
    ax.set_xticks(xs)
    ax.set_xticklabels([f"step {r.step}\n{' × '.join(map(str, r.shape))}" for r in rows],
                       fontsize=SIZES["tick"])
    ax.set_ylabel("TFLOP/s (log scale)")
    ax.grid(True, axis="y", color="#dddddd", lw=0.6)
    ax.legend(loc="lower right", fontsize=SIZES["legend"], facecolor="white", framealpha=1.0)
    fig.tight_layout()
    return fig
