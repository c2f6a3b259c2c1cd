"""The Blackwell GEMM ladder's model: the calls its kernels serve, the performance bound of a
step, the configuration shared with the fastest published kernel and the budgets, the published
figures."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from ..facts.hardware import B200, GPU, REGISTERS_PER_SM
from ..facts.numbers import SMALLEST_SUBNORMAL, UNIT_ROUNDOFF  # noqa: F401 - gg.UNIT_ROUNDOFF
from ..facts.sources import MLSYS_REPO, TIRX_KERNELS_BASELINE
from .roofline import gemm_bytes, gemm_flops
from ..compile.signature import KernelCallError

SUPPORTED_DTYPES = ("float16", "bfloat16")
TMA_ALIGN = 16  # bytes: a tensor map's base address and row strides are multiples of 16
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
    from ..compile.build import SYSTEM_SMEM_RESERVE
    from ..facts.hardware import MAX_THREADS_PER_SM

    smem = kernel.dynamic_smem + kernel.static_smem + SYSTEM_SMEM_RESERVE
    tmem_cols_per_sm = gpu.tmem_per_sm // (128 * 4)
    return min(gpu.smem_per_sm // smem, tmem_cols_per_sm // tmem_cols, MAX_THREADS_PER_SM // threads)


# -- published figures and measurements --------------------------------------------------------
PUBLISHED_SOURCE = ("mlc-ai/modern-gpu-programming-for-mlsys (commit 0fdad07), GEMM chapter, "
                    "\"End-to-End Results\": NVIDIA B200, M = N = K = 4096, fp16, locked clocks")
PUBLISHED_LINK = MLSYS_REPO  # the repository at that commit
# Milliseconds of the matching step of that ladder (its steps 1-3 are synchronous, one tile per
# CTA; its step 1 figure is of a full-matrix variant of the single-tile data path). Steps it
# does not report are absent.
PUBLISHED_MS: dict[int, float] = {1: 70.0, 3: 53.6, 4: 0.49, 7: 0.23}
PUBLISHED_SHAPE = (4096, 4096, 4096)
PUBLISHED_CUBLAS_MS = 0.094


# Steps 8 and 11, at the same shape, fp16, published as TFLOP/s: step 8 by the same ladder
# (2-CTA 256 x 256 MMA; two consumer warpgroups), step 11 by the TIRx-kernels GEMM (2 x 1
# cluster, CLC, two MMA warps over 256 rows of A per CTA: the configuration of `SOTA`),
# "bench_suite/baseline.md" at commit f495258. Steps 9 and 10 divide the work as no published
# kernel does at this shape, and have no figure.
PUBLISHED_TFLOPS: dict[int, float] = {8: 1321.0, 11: 1411.0}
# The same ladder's step 9: step 11's division of the work (two MMA consumers sharing each B
# stage) on a static persistent schedule, without CLC.
PUBLISHED_LADDER_STEP9 = 1462.0
PUBLISHED_SOTA_CUBLAS_US = 93.67  # baseline.md's cuBLAS at fp16 4096³, the same run as step 11's
PUBLISHED_SOTA_SOURCE = ("mlc-ai/TIRx-kernels (commit f495258), tirx_kernels/gemm/fp16_bf16_gemm.py and "
                         "bench_suite/baseline.md: NVIDIA B200, fp16 4096³ (bf16 8192³: 1595 TFLOP/s)")
PUBLISHED_SOTA_LINK = TIRX_KERNELS_BASELINE


def published_source_markdown(sota: bool = False) -> str:
    """PUBLISHED_SOURCE (or PUBLISHED_SOTA_SOURCE) as a Markdown link to where it can be read."""
    text, link = (PUBLISHED_SOTA_SOURCE, PUBLISHED_SOTA_LINK) if sota else (PUBLISHED_SOURCE, PUBLISHED_LINK)
    return f"[{text}]({link.url})"


def published_tflops(step: int) -> float | None:
    """TFLOP/s of the published figure for `step`, or None where no public ladder reports one."""
    if step in PUBLISHED_TFLOPS:
        return PUBLISHED_TFLOPS[step]
    ms = PUBLISHED_MS.get(step)
    return None if ms is None else gemm_flops(*PUBLISHED_SHAPE) / (ms * 1e-3) / 1e12


# -- the configuration the ladder's last steps share with the fastest published kernel ------------
# (its cluster, MMA, K tile, ring depth and register split: at N = 4096 and 8192 that kernel also
# gives each CTA two MMA warps over 256 rows of A sharing one B stage, which chapter 10 does not)
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
    from ..compile.tmem import alloc_columns

    return alloc_columns(accumulators * blk_n)


