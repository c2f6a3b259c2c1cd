"""The hardware table: vendor peaks for the GPUs the book talks about, each with its source."""

from __future__ import annotations

from dataclasses import dataclass

SOURCES = (
    "NVIDIA datasheets as tabulated in stas00/ml-engineering (compute/accelerator/README.md) "
    "and Dao-AILab/flash-attention (benchmarks/benchmark_attn.py); TMEM geometry from the "
    "PTX ISA, section on tcgen05 Tensor Memory."
)


@dataclass(frozen=True)
class GPU:
    """Dense (no sparsity) vendor peaks of one GPU."""

    name: str
    arch: str  # the sm_XXa target the book compiles for
    compute_capability: tuple[int, int]
    sms: int
    bf16_flops: float  # FLOP/s, dense bf16/fp16 tensor core
    fp8_flops: float  # FLOP/s, dense fp8 tensor core
    hbm_bandwidth: float  # bytes/s
    hbm_bytes: float  # usable bytes
    l2_bytes: float
    smem_per_sm: int  # bytes
    tmem_per_sm: int  # bytes (0 where the GPU has no tensor memory)
    source: str = SOURCES

    @property
    def ridge_bf16(self) -> float:
        """FLOP per byte at which bf16 tensor-core work stops being memory-bound."""
        return self.bf16_flops / self.hbm_bandwidth

    @property
    def tensor_clock_hz(self) -> float:
        """Clock implied by the peak: FLOP/s over (SMs x dense FLOP per SM per cycle)."""
        per_sm_per_clk = 8192 if self.arch == "sm_100a" else 4096
        return self.bf16_flops / (self.sms * per_sm_per_clk)


KB = 1024
B200 = GPU("B200", "sm_100a", (10, 0), 148, 2250e12, 4500e12, 8.0e12, 180e9, 126e6,
           228 * KB, 128 * 512 * 4)
H200 = GPU("H200", "sm_90a", (9, 0), 132, 989e12, 1979e12, 4.8e12, 141e9, 50e6, 228 * KB, 0)
H100 = GPU("H100", "sm_90a", (9, 0), 132, 989e12, 1979e12, 3.35e12, 80e9, 50e6, 228 * KB, 0)
GPUS: dict[str, GPU] = {g.name: g for g in (B200, H200, H100)}

# Per-SM and per-warp facts of the programming model that hold on sm_90 and sm_100 alike
# (CUDA C++ Programming Guide, compute capabilities table).
WARP_SIZE = 32
MAX_THREADS_PER_CTA = 1024
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 64 * 1024  # 32-bit registers
MAX_REGISTERS_PER_THREAD = 255
MAX_CLUSTER_SIZE_PORTABLE = 8
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4
# Non-tensor throughput per SM per clock, sm_90 and sm_100 alike (CUDA C++ Programming Guide,
# arithmetic instruction throughput): fp32 add/mul/FMA results, and special-function (MUFU:
# exp2, log2, rcp, rsqrt, sin, cos) results. An FMA counts as two FLOP.
FP32_RESULTS_PER_SM_PER_CLK = 128
SFU_RESULTS_PER_SM_PER_CLK = 16


def gpu_for(name: str) -> GPU:
    """Find a GPU of the table by a device name such as 'NVIDIA H200' or 'B200'."""
    for key in sorted(GPUS, key=len, reverse=True):
        if key.lower() in name.lower():
            return GPUS[key]
    raise KeyError(f"no entry for {name!r} in the hardware table (known: {', '.join(GPUS)})")
