"""Roofline arithmetic: FLOP and byte counts, intensities, ridges, minimum times, measured points."""

from __future__ import annotations

import datetime
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from ..facts.paths import CHAPTERS
from ..facts import results
from ..facts.hardware import GPU, GPUS, REGISTERS_PER_SM, gpu_for

ELEM_BYTES = {"fp32": 4, "bf16": 2, "fp16": 2, "fp8": 1}


# -- peaks and ridges ------------------------------------------------------------------------
def peak_flops(gpu: GPU, dtype: str = "bf16") -> float:
    """Dense tensor-core peak FLOP/s of the table for bf16/fp16 or fp8."""
    if dtype in ("bf16", "fp16"):
        return gpu.bf16_flops
    if dtype == "fp8":
        return gpu.fp8_flops
    raise ValueError(f"the hardware table holds no {dtype} peak (it has bf16, fp16, fp8)")


def ridge(gpu: GPU, dtype: str = "bf16") -> float:
    """FLOP per HBM byte above which a kernel can be compute-bound: peak FLOP/s / HBM bytes/s."""
    return peak_flops(gpu, dtype) / gpu.hbm_bandwidth


def attainable(intensity: float, gpu: GPU, dtype: str = "bf16") -> float:
    """The roofline: min(peak FLOP/s, intensity x HBM bandwidth)."""
    return min(peak_flops(gpu, dtype), intensity * gpu.hbm_bandwidth)


def min_time(flops: float, bytes: float, gpu: GPU, dtype: str = "bf16") -> float:
    """Seconds a kernel needs at least: the slower of doing its FLOPs and moving its bytes."""
    return max(flops / peak_flops(gpu, dtype), bytes / gpu.hbm_bandwidth)


def bound(intensity: float, gpu: GPU, dtype: str = "bf16") -> str:
    """'memory' below the ridge, 'compute' at or above it."""
    return "memory" if intensity < ridge(gpu, dtype) else "compute"


# -- counts and intensities ------------------------------------------------------------------
def intensity_elementwise(n_inputs: int, n_outputs: int, elem_bytes: int,
                          flops_per_elem: float = 1) -> float:
    """FLOP per byte of an elementwise op: each element read from n_inputs, written to n_outputs."""
    return flops_per_elem / ((n_inputs + n_outputs) * elem_bytes)


def intensity_reduction(rows: int, cols: int, elem_bytes: int, out_bytes: int | None = None) -> float:
    """FLOP per byte of summing each row of a rows x cols matrix: cols - 1 adds per row."""
    out_bytes = elem_bytes if out_bytes is None else out_bytes
    return rows * (cols - 1) / (rows * cols * elem_bytes + rows * out_bytes)


def gemm_flops(M: int, N: int, K: int) -> float:
    """D = A @ B.T with A M x K and B N x K: one multiply and one add per (m, n, k)."""
    return 2.0 * M * N * K


def gemm_bytes(M: int, N: int, K: int, elem_bytes: int, out_bytes: int | None = None) -> float:
    """The least a GEMM can move: read A and B once, write D once."""
    out_bytes = elem_bytes if out_bytes is None else out_bytes
    return float((M * K + N * K) * elem_bytes + M * N * out_bytes)


def intensity_gemm(M: int, N: int, K: int, elem_bytes: int, out_bytes: int | None = None) -> float:
    """FLOP per byte of a GEMM whose operands each cross memory exactly once."""
    return gemm_flops(M, N, K) / gemm_bytes(M, N, K, elem_bytes, out_bytes)


def intensity_gemm_tiled(BLK_M: int, BLK_N: int, elem_bytes: int) -> float:
    """FLOP per byte a CTA sees per K step: 2*BLK_M*BLK_N*BLK_K over (BLK_M+BLK_N)*BLK_K operand bytes."""
    return 2.0 * BLK_M * BLK_N / ((BLK_M + BLK_N) * elem_bytes)


def gemm_tiled_bytes(M: int, N: int, K: int, BLK_M: int, BLK_N: int, elem_bytes: int,
                     out_bytes: int | None = None) -> float:
    """Bytes all CTAs load and store when every tile fetches its own operands (no reuse in caches)."""
    out_bytes = elem_bytes if out_bytes is None else out_bytes
    a_reads = M * K * -(-N // BLK_N)  # each of the ceil(N / BLK_N) tile columns reads all of A
    b_reads = N * K * -(-M // BLK_M)  # each of the ceil(M / BLK_M) tile rows reads all of B
    return float((a_reads + b_reads) * elem_bytes + M * N * out_bytes)


def attention_flops(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int,
                    causal: bool = False) -> float:
    """Matmul FLOPs of O = softmax(Q K^T / sqrt(d)) V: 2*Sq*Skv*d for Q K^T, as many for P V."""
    f = 4.0 * batch * heads * seq_q * seq_kv * head_dim
    return f / 2 if causal else f  # the usual convention: causal masking skips half the scores


def window_pairs(seqlen: int, left: int, right: int) -> int:
    """How many (query, key) pairs a local window lets through at equal lengths: query i sees
    keys max(0, i - left) through min(seqlen - 1, i + right)."""
    return sum(min(seqlen - 1, i + right) - max(0, i - left) + 1 for i in range(seqlen))


def window_flops(batch: int, heads: int, seqlen: int, head_dim: int, left: int, right: int) -> float:
    """Matmul FLOPs of local attention counted as FlashAttention counts them: 4 d per pair the
    window lets through (Q K^T and P V), none for the pairs it leaves out."""
    return 4.0 * batch * heads * head_dim * window_pairs(seqlen, left, right)


def attention_bytes(batch: int, heads: int, seq_q: int, seq_kv: int, head_dim: int,
                    elem_bytes: int, score_bytes: int | None = None) -> float:
    """HBM bytes: Q, K, V read and O written once (fused); plus S and P round trips when unfused."""
    io = batch * heads * (2 * seq_q + 2 * seq_kv) * head_dim * elem_bytes
    if score_bytes is None:
        return float(io)
    # unfused: write S, read S and write P (softmax), read P (second matmul)
    return float(io + 4 * batch * heads * seq_q * seq_kv * score_bytes)


def intensity_attention(seq_q: int, seq_kv: int, head_dim: int, elem_bytes: int,
                        causal: bool = False, score_bytes: int | None = None) -> float:
    """FLOP per byte of attention; fused unless score_bytes (the stored S and P element size) is set."""
    return (attention_flops(1, 1, seq_q, seq_kv, head_dim, causal)
            / attention_bytes(1, 1, seq_q, seq_kv, head_dim, elem_bytes, score_bytes))


# -- latency and bytes in flight -------------------------------------------------------------
def bytes_in_flight(bandwidth: float, latency_s: float) -> float:
    """Little's law: to sustain `bandwidth` against `latency_s`, this many bytes must be on the way."""
    return bandwidth * latency_s


def registers_per_thread(threads_per_sm: int) -> int:
    """The register budget of a thread when threads_per_sm threads share one SM's register file."""
    return REGISTERS_PER_SM // threads_per_sm


# -- measured points -------------------------------------------------------------------------
CHAPTER1_KERNELS = ("copy_naive", "copy_vec4", "vadd", "row_sum")  # the kernels chapter 1 times
BASELINE_LABELS = {"copy": "torch copy_", "add": "torch.add", "transpose": "torch transpose copy",
                   "row_sum": "torch.sum", "matmul_nt": "torch.matmul"}


@dataclass(frozen=True)
class Point:
    """One measured run: what it moved and computed, how long it took, on which GPU and when."""

    label: str
    source: str  # "book" (a kernel of this book) or "torch"
    gpu: str  # device name as the run reported it, e.g. "NVIDIA H200"
    date: str
    ms: float
    bytes: float | None
    flops: float | None

    @property
    def intensity(self) -> float | None:
        """FLOP per byte; None for a run timed by its bytes alone (a copy, or no FLOPs counted)."""
        return self.flops / self.bytes if self.flops and self.bytes else None

    @property
    def flop_rate(self) -> float | None:
        return self.flops / (self.ms * 1e-3) if self.flops else None

    @property
    def bandwidth(self) -> float | None:
        return self.bytes / (self.ms * 1e-3) if self.bytes else None

    @property
    def hardware(self) -> GPU | None:
        """The table entry of the GPU it ran on, or None for a GPU the table lacks."""
        try:
            return gpu_for(self.gpu)
        except KeyError:
            return None


def _known(case: dict[str, Any]) -> bool:
    try:
        gpu_for(case["run"]["gpu"])
    except KeyError:
        return False
    return bool(case.get("ms")) and bool(case.get("bytes") or case.get("flops"))


def measured_points(directory: Path | str | None = None,
                    names: tuple[str, ...] = CHAPTER1_KERNELS) -> list[Point]:
    """The newest measured run of each named kernel per GPU, and the PyTorch baseline it was timed against."""
    newest: dict[tuple[str, str, str], Point] = {}
    for c in results.cases(directory):  # oldest run first, so later runs overwrite earlier ones
        if c["kind"] != "perf" or c["status"] != "measured" or c["name"] not in names or not _known(c):
            continue
        run = c["run"]
        newest[("book", c["name"], run["gpu"])] = Point(
            c["name"], "book", run["gpu"], run["date"], c["ms"], c.get("bytes"), c.get("flops"))
        if c.get("baseline") and c.get("baseline_ms"):
            label = BASELINE_LABELS.get(c["baseline"], c["baseline"])
            newest[("torch", f"{label} ({c['name']} shapes)", run["gpu"])] = Point(
                f"{label} ({c['name']} shapes)", "torch", run["gpu"], run["date"], c["baseline_ms"],
                c.get("bytes"), c.get("flops"))
    return list(newest.values())


def measure_torch_points(gpu_name: str, n: int = 1 << 26, mnk: int = 8192, device: str = "cuda",
                         time_fn: Callable[[Callable[[], Any]], float] | None = None) -> list[Point]:
    """Time torch.add over fp32 vectors and a bf16 matmul (D = A @ B.T); bytes and FLOPs counted here."""
    import torch

    if time_fn is None:
        from ..run.bench import time_fn  # CUDA events, warm-up, L2 flushed, median
    today = datetime.date.today().isoformat()
    x, y, out = (torch.randn(n, device=device) for _ in range(3))
    add_ms = time_fn(lambda: torch.add(x, y, out=out))
    A, B, D = (torch.randn(mnk, mnk, device=device, dtype=torch.bfloat16) for _ in range(3))
    mm_ms = time_fn(lambda: torch.matmul(A, B.t(), out=D))
    return [
        Point(f"torch.add fp32, N={n}", "torch", gpu_name, today, add_ms, 3.0 * n * 4, float(n)),
        Point(f"torch.matmul bf16, {mnk}³", "torch", gpu_name, today, mm_ms,
              gemm_bytes(mnk, mnk, mnk, 2), gemm_flops(mnk, mnk, mnk)),
    ]


# -- the GEMM ladder -------------------------------------------------------------------------
@dataclass(frozen=True)
class Step:
    """One rung of the GEMM ladder: the kernel name its chapter times it under, and what it adds."""

    number: int
    name: str
    chapter: int  # the chapter of the book that builds and times it
    adds: str


GEMM_LADDER: tuple[Step, ...] = (
    Step(1, "gemm_v1", 8, "one 128 × 128 tcgen05 tile, operands copied by threads into swizzled shared memory"),
    Step(2, "gemm_v2", 8, "the K loop: accumulate in TMEM, one mbarrier phase per K tile"),
    Step(3, "gemm_v3", 8, "a 2-D grid of output tiles, ragged edges guarded"),
    Step(4, "gemm_v4", 9, "TMA loads and a TMA-store epilogue"),
    Step(5, "gemm_v5", 9, "a ring of shared-memory stages: loads run ahead of the MMAs"),
    Step(6, "gemm_v6", 9, "persistent CTAs, a static tile scheduler, grouped rasterization"),
    Step(7, "gemm_v7", 9, "warp specialization: TMA warp, MMA warp, epilogue warpgroup"),
    Step(8, "gemm_v8", 10, "2-CTA clusters (cta_group::2)"),
    Step(9, "gemm_v9", 10, "two consumers with double-buffered TMEM accumulators"),
    Step(10, "gemm_v10", 10, "cluster launch control"),
    Step(11, "gemm_v11", 10, "two MMA warps over 256 rows of A per CTA sharing each B stage"),
)


def ladder_rows(directory: Path | str | None = None,
                ladder: tuple[Step, ...] = GEMM_LADDER) -> list[dict[str, Any]]:
    """One row per step with its newest measurement (time, TFLOP/s, % of bf16 peak) or None."""
    rows = []
    for step in ladder:
        c = results.latest(step.name, kind="perf", directory=directory)
        row: dict[str, Any] = {"step": step.number, "name": step.name, "adds": step.adds,
                               "chapter": step.chapter, "gpu": None, "date": None, "us": None, "tflops": None, "percent": None}
        if c is not None and c.get("ms") and c.get("flops") and c["status"] == "measured":
            try:
                g = gpu_for(c["run"]["gpu"])
            except KeyError:
                g = None
            rate = c["flops"] / (c["ms"] * 1e-3)
            row.update(gpu=c["run"]["gpu"], date=c["run"]["date"], us=c["ms"] * 1e3,
                       tflops=rate / 1e12, percent=100 * rate / g.bf16_flops if g else None)
        rows.append(row)
    return rows


CHAPTERS_DIR = CHAPTERS


def chapter_ref(number: int, chapters_dir: Path | str | None = None) -> str:
    """A link to chapter `number` once its file exists (relative to a chapter page), else a plain note."""
    found = sorted(Path(chapters_dir or CHAPTERS_DIR).glob(f"{number:02d}-*.md"))
    if found:
        return f"[chapter {number}]({found[0].name})"
    return f"chapter {number} (in preparation)"


def ladder_markdown(rows: list[dict[str, Any]], chapters_dir: Path | str | None = None) -> str:
    """The ladder as a Markdown table: where each step is built, and its measurement or 'not measured'."""
    lines = ["| step | kernel | adds | built in | time (µs) | TFLOP/s | % of bf16 peak | measured on |",
             "|---:|---|---|---|---:|---:|---:|---|"]
    for r in rows:
        if r["us"] is None:
            cells = ["not measured"] * 3 + ["—"]
        else:
            pct = f"{r['percent']:.0f}" if r["percent"] is not None else "GPU not in table"
            cells = [f"{r['us']:.1f}", f"{r['tflops']:.0f}", pct, f"{r['gpu']}, {r['date']}"]
        where = chapter_ref(r["chapter"], chapters_dir) if r.get("chapter") else "—"
        lines.append(f"| {r['step']} | `{r['name']}` | {r['adds']} | {where} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def gpus_of(points: list[Point]) -> list[GPU]:
    """The table entries of the GPUs that points ran on, in table order."""
    names = {p.hardware.name for p in points if p.hardware is not None}
    return [g for g in GPUS.values() if g.name in names]


def points_markdown(points: list[Point]) -> str:
    """Measured points as a Markdown table: time, bandwidth, FLOP rate and the share of the roof they reach."""
    if not points:
        return "*No measured point: no GPU on this machine and no timed run in `results/`.*"
    lines = ["| what ran | GPU, date | time (µs) | TB/s | % of HBM peak | FLOP/B | TFLOP/s "
             "| % of roof at that intensity |",
             "|---|---|---:|---:|---:|---:|---:|---:|"]
    for p in points:
        hw = p.hardware
        bw = f"{p.bandwidth / 1e12:.2f}" if p.bandwidth else "—"
        pct_bw = f"{100 * p.bandwidth / hw.hbm_bandwidth:.0f}" if p.bandwidth and hw else "—"
        inten = f"{p.intensity:.3g}" if p.intensity else "— (bytes only)"
        rate = f"{p.flop_rate / 1e12:.3g}" if p.flop_rate else "—"
        roof = (f"{100 * p.flop_rate / attainable(p.intensity, hw):.0f}"
                if p.intensity and hw else "—")
        gpu = f"{p.gpu.replace('NVIDIA ', '')}, {p.date}"
        lines.append(f"| {p.label} | {gpu} | {p.ms * 1e3:.1f} | {bw} | {pct_bw} | {inten} | {rate} | {roof} |")
    return "\n".join(lines)


def describe_points(points: list[Point], live: bool) -> str:
    """One sentence on where the measured points came from, or that there are none."""
    if not points:
        return ("No measurement exists yet: this page was built without a GPU and `results/` holds "
                "no timed run of " + ", ".join(f"`{n}`" for n in CHAPTER1_KERNELS[:-1])
                + f" or `{CHAPTER1_KERNELS[-1]}`, so the figure below draws the B200 roofline with no point on it.")
    runs = sorted({(p.gpu.replace("NVIDIA ", ""), p.date) for p in points})
    where = "; ".join(f"{g} on {d}" for g, d in runs)
    origin = ("timed on this page's own GPU while the book was built, together with the "
              "verification runs in `results/`" if live else
              "read from the verification runs in `results/` (this page was built without a GPU)")
    return f"The {len(points)} measurements in the table above and the figure below were {origin}: {where}."
