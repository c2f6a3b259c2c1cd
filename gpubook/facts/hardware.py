"""The hardware table: vendor peaks for the GPUs the book talks about, each with its source."""

from __future__ import annotations

from dataclasses import dataclass

from . import sources as _src

SOURCES = (
    "NVIDIA datasheets as tabulated in stas00/ml-engineering (compute/accelerator/README.md) "
    "and Dao-AILab/flash-attention (benchmarks/benchmark_attn.py); TMEM geometry from the "
    "PTX ISA, section on tcgen05 Tensor Memory; per-SM FP32 and SFU throughput from the CUDA "
    "C++ Programming Guide (arithmetic instruction throughput); the H200's L2 size as "
    "cudaDevAttrL2CacheSize reports it."
)
# the same sources as links, in SOURCES' order (the L2 figure is a device query, not a document)
SOURCE_LINKS = (_src.ML_ENGINEERING, _src.FLASH_ATTENTION_BENCH, _src.PTX_ISA, _src.CUDA_GUIDE)


def sources_markdown() -> str:
    """The hardware table's sources as one line of Markdown links."""
    return _src.markdown_list(SOURCE_LINKS)

# dtype spellings -> which peak a FLOP rate of that dtype is measured against
_PEAK_OF_DTYPE = {
    "bfloat16": "bf16", "bf16": "bf16", "float16": "bf16", "fp16": "bf16", "half": "bf16",
    "float8_e4m3fn": "fp8", "float8_e5m2": "fp8", "float8_e4m3fnuz": "fp8",
    "float8_e5m2fnuz": "fp8", "e4m3": "fp8", "e5m2": "fp8", "fp8": "fp8",
    "float4_e2m1fn": "fp4", "float4_e2m1fn_x2": "fp4", "e2m1": "fp4", "fp4": "fp4",
    "float32": "fp32", "fp32": "fp32", "float": "fp32",
}
PEAK_LABELS = {"bf16": "bf16/fp16 tensor", "fp8": "fp8 tensor", "fp4": "fp4 tensor", "fp32": "FP32"}


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
    device_names: tuple[str, ...] = ()  # torch.cuda.get_device_name() spellings of exactly this GPU
    fp32_lanes_per_sm: int = 128  # FP32 add/mul/FMA results per SM per clock
    sfu_per_sm: int = 16  # special-function (MUFU: exp2, rcp, ...) results per SM per clock
    fp4_flops: float = 0.0  # FLOP/s, dense fp4 tensor core (NVFP4, MXFP4); 0 where there is none
    source: str = SOURCES
    source_links: tuple[_src.Source, ...] = SOURCE_LINKS

    @property
    def ridge_bf16(self) -> float:
        """FLOP per byte at which bf16 tensor-core work stops being memory-bound."""
        return self.bf16_flops / self.hbm_bandwidth

    @property
    def tensor_flops_per_sm_per_clock(self) -> int:
        """Dense fp16/bf16 tensor-core FLOP per SM per clock (8192 on sm_100, 4096 on sm_90)."""
        return 8192 if self.arch == "sm_100a" else 4096

    @property
    def tensor_clock_hz(self) -> float:
        """Clock implied by the peak: FLOP/s over (SMs x dense FLOP per SM per cycle)."""
        return self.bf16_flops / (self.sms * self.tensor_flops_per_sm_per_clock)

    @property
    def fp32_flops(self) -> float:
        """FP32 pipe peak (non-tensor): SMs x 128 FMA lanes x 2 FLOP x the implied clock."""
        return self.sms * self.fp32_lanes_per_sm * 2 * self.tensor_clock_hz

    @property
    def sfu_rate(self) -> float:
        """Special-function results per second (exp2, log2, rcp, rsqrt, sin, cos): SMs x 16 x clock."""
        return self.sms * self.sfu_per_sm * self.tensor_clock_hz

    def peak_flops(self, dtype: str | None) -> float:
        """The FLOP/s peak a rate of `dtype` is measured against: bf16/fp16 -> tensor cores,
        fp8 and fp4 -> their tensor cores, fp32 -> the FP32 pipes (non-tensor). None means bf16."""
        kind = peak_kind(dtype)
        flops = getattr(self, {"bf16": "bf16_flops", "fp8": "fp8_flops", "fp4": "fp4_flops",
                               "fp32": "fp32_flops"}[kind])
        if not flops:
            raise ValueError(f"the {self.name} has no {PEAK_LABELS[kind]} peak")
        return flops


def peak_kind(dtype: str | None) -> str:
    """'bf16', 'fp8', 'fp4' or 'fp32': which peak FLOP rates of `dtype` count against."""
    if dtype is None:
        return "bf16"
    key = str(dtype).removeprefix("torch.").lower()
    if key not in _PEAK_OF_DTYPE:
        raise ValueError(f"no peak in the hardware table for dtype {dtype!r}; known: "
                         f"{', '.join(sorted(_PEAK_OF_DTYPE))}")
    return _PEAK_OF_DTYPE[key]


KB = 1024
MiB = 1024 * 1024
B200 = GPU("B200", "sm_100a", (10, 0), 148, 2250e12, 4500e12, 8.0e12, 180e9, 126e6,
           228 * KB, 128 * 512 * 4, device_names=("NVIDIA B200",), fp4_flops=9000e12)
H200 = GPU("H200", "sm_90a", (9, 0), 132, 989e12, 1979e12, 4.8e12, 141e9, 60 * MiB, 228 * KB, 0,
           device_names=("NVIDIA H200",))
H100 = GPU("H100", "sm_90a", (9, 0), 132, 989e12, 1979e12, 3.35e12, 80e9, 50e6, 228 * KB, 0,
           device_names=("NVIDIA H100 80GB HBM3",))  # the SXM part
GPUS: dict[str, GPU] = {g.name: g for g in (B200, H200, H100)}

# Per-SM and per-warp facts of the programming model that hold on sm_90 and sm_100 alike
# (CUDA C++ Programming Guide, compute capabilities table).
WARP_SIZE = 32
MAX_THREADS_PER_CTA = 1024
MAX_THREADS_PER_SM = 2048
REGISTERS_PER_SM = 64 * 1024  # 32-bit registers
SMEM_PER_CTA = 227 * KB  # the most shared memory one CTA may use (of the SM's 228 KB, 1 KB is the system's)
MAX_REGISTERS_PER_THREAD = 255
MAX_CLUSTER_SIZE_PORTABLE = 8
SMEM_BANKS = 32
SMEM_BANK_BYTES = 4


class UnknownGPUError(KeyError):
    """A device name the hardware table has no row for (variants have other peaks)."""

    def __str__(self) -> str:
        return str(self.args[0]) if self.args else ""


def known_names() -> list[str]:
    """Every name gpu_for accepts: the table's short names and the exact device names."""
    return [n for g in GPUS.values() for n in (g.name, *g.device_names)]


def gpu_for(name: str) -> GPU:
    """The table's GPU for an exact name: a device name as torch.cuda.get_device_name() spells
    it ('NVIDIA H200', 'NVIDIA B200', 'NVIDIA H100 80GB HBM3') or a short name ('H200').

    Variants are refused rather than matched by substring: a GB200, an H100 PCIe or NVL, an
    H20 or an H200 NVL has other clocks, power and bandwidth than the row it resembles.
    """
    key = " ".join(str(name).split()).lower()
    for g in GPUS.values():
        if key in (n.lower() for n in (g.name, *g.device_names)):
            return g
    raise UnknownGPUError(
        f"no entry for {name!r} in the hardware table; it knows exactly: "
        f"{', '.join(repr(n) for n in known_names())}. Variants (GB200, H100 PCIe, H100 NVL, "
        "H200 NVL, H20, ...) have other peaks: add a row with their datasheet figures first."
    )
