"""Time kernels with CUDA events (warm-up, L2 flush, median) against the hardware peaks."""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from . import record
from . import runtime
from ..facts.hardware import GPUS, PEAK_LABELS, gpu_for, peak_kind

# PyTorch operations a kernel is compared with, by name, over the kernel's own arguments
# (inputs first, output last), so that a GPU host can rebuild them from shapes alone.
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

def _recorded_baselines(rec: dict[str, Any]) -> dict[str, float]:
    """A record's baselines by name: its 'baselines' map, or (files written before several
    baselines were timed per case) its one 'baseline' and 'baseline_ms'."""
    if rec.get("baselines"):
        return dict(rec["baselines"])
    if rec.get("baseline") and rec.get("baseline_ms"):
        return {rec["baseline"]: rec["baseline_ms"]}
    return {}


def baseline_names(baseline: str | Sequence[str] | None) -> list[str]:
    """The baselines a bench names (one name or several), each checked against BASELINES."""
    names = [] if baseline is None else [baseline] if isinstance(baseline, str) else list(baseline)
    for b in names:
        if b not in BASELINES:
            raise ValueError(f"unknown baseline {b!r}; known: {', '.join(BASELINES)}")
    if len(set(names)) != len(names):
        raise ValueError(f"baselines named twice: {names}")
    return names


FLUSHES = ("read", "write", "none")
# The flush buffer: at least twice the largest L2 of the table, so that reading it evicts
# every line a previous repeat left (and never less than 256 MiB).
FLUSH_BYTES = max(256 << 20, math.ceil(2 * max(g.l2_bytes for g in GPUS.values()) / (1 << 20)) << 20)


@dataclass
class Timing:
    """A median time and what it moved or computed, against the peak of the GPU it ran on."""

    name: str
    status: str  # "measured" or "not measured"
    gpu: str | None = None
    ms: float | None = None
    bytes: float | None = None
    flops: float | None = None
    baseline_ms: float | None = None
    reason: str | None = None
    recorded: dict[str, Any] | None = None  # the newest replay of this case on a GPU host
    dtype: str | None = None  # what the FLOPs are counted in: picks the FLOP peak
    flush: str = "read"  # how L2 was flushed before each repeat
    samples: list[float] = field(default_factory=list)  # every repeat's time, ms
    baseline_samples: list[float] = field(default_factory=list)
    # Every baseline timed in the same run, by name: median ms and every repeat. The first
    # one is also `baseline_ms` / `baseline_samples`.
    baselines: dict[str, float] = field(default_factory=dict)
    baselines_samples: dict[str, list[float]] = field(default_factory=dict)

    @staticmethod
    def from_record(rec: dict[str, Any]) -> "Timing":
        """The Timing a replay recorded (results/*.json) for a performance case."""
        return Timing(rec["name"], "measured", gpu=rec["run"]["gpu"], ms=rec["ms"],
                      bytes=rec.get("bytes"), flops=rec.get("flops"),
                      baseline_ms=rec.get("baseline_ms"), dtype=rec.get("dtype"),
                      flush=rec.get("flush") or "write",  # results before the read flush
                      samples=list(rec.get("samples") or []),
                      baseline_samples=list(rec.get("baseline_samples") or []),
                      baselines=_recorded_baselines(rec),
                      baselines_samples={k: list(v) for k, v in
                                         (rec.get("baselines_samples") or {}).items()})

    def speedup(self, baseline: str | None = None) -> float | None:
        """How many times faster than a baseline (the first one by default) the kernel ran."""
        ms = self.baseline_ms if baseline is None else self.baselines.get(baseline)
        return ms / self.ms if ms and self.ms else None

    def best(self) -> "Timing | None":
        """This measurement if made here, else the recorded one from the verification matrix."""
        if self.status == "measured":
            return self
        return Timing.from_record(self.recorded) if self.recorded else None

    @property
    def bandwidth(self) -> float | None:
        return self.bytes / (self.ms * 1e-3) if self.bytes and self.ms else None

    @property
    def flop_rate(self) -> float | None:
        return self.flops / (self.ms * 1e-3) if self.flops and self.ms else None

    def percent_of_bandwidth(self) -> float | None:
        """Achieved bytes/s as a percentage of the GPU's HBM peak."""
        if self.gpu is None or self.bandwidth is None:
            return None
        return 100 * self.bandwidth / gpu_for(self.gpu).hbm_bandwidth

    def percent_of_flops(self) -> float | None:
        """Achieved FLOP/s as a percentage of the peak of `dtype` (bf16/fp16 and fp8: tensor
        cores; fp32: the FP32 pipes)."""
        if self.gpu is None or self.flop_rate is None:
            return None
        return 100 * self.flop_rate / gpu_for(self.gpu).peak_flops(self.dtype)

    def percent_of_peak(self) -> float | None:
        """Percentage of the roof that binds: with both bytes and FLOPs, the larger of the two
        percentages (the roofline's attainable rate is the lower roof)."""
        found = [p for p in (self.percent_of_bandwidth(), self.percent_of_flops()) if p is not None]
        return max(found) if found else None

    def peak_label(self) -> str | None:
        """Which peak percent_of_peak() measures against: 'HBM' or a FLOP peak's name."""
        bw, fl = self.percent_of_bandwidth(), self.percent_of_flops()
        if bw is None and fl is None:
            return None
        if fl is not None and (bw is None or fl > bw):
            return PEAK_LABELS[peak_kind(self.dtype)]
        return "HBM"

    def __repr__(self) -> str:
        if self.status != "measured":
            line = f"NOT MEASURED {self.name} here: {self.reason}"
            if self.recorded:
                run = self.recorded["run"]
                line += (f"\n  verification matrix ({run['date']}, replayed on {run['gpu']}): "
                         f"{Timing.from_record(self.recorded)!r}")
            else:
                line += "\n  no GPU measurement recorded in the verification matrix yet"
            return line
        parts = [f"{self.name} on {self.gpu}: {self.ms * 1e3:.1f} µs"]
        if self.samples:
            parts[0] += f" (median of {len(self.samples)}, {self.flush} flush)"
        else:
            parts[0] += f" ({self.flush} flush)"
        if self.bandwidth:
            parts.append(f"{self.bandwidth / 1e12:.2f} TB/s")
        if self.flop_rate:
            parts.append(f"{self.flop_rate / 1e12:.1f} TFLOP/s")
        pct = self.percent_of_peak()
        if pct is not None:
            parts.append(f"{pct:.0f}% of {self.peak_label()} peak")
        if len(self.baselines) > 1:
            parts.append("PyTorch " + ", ".join(f"{b} {ms * 1e3:.1f} µs"
                                                for b, ms in self.baselines.items()))
        elif self.baseline_ms:
            parts.append(f"PyTorch {self.baseline_ms * 1e3:.1f} µs")
        return " · ".join(parts)


def flusher(flush: str = "read", nbytes: int = FLUSH_BYTES, device: str | None = None) -> Callable[[], None]:
    """What runs before each timed repeat to empty L2 of the previous repeat's lines.

    'read' sums a buffer larger than any L2 into a preallocated scalar: every line it leaves
    is clean, so the timed kernel starts with no write-backs to pay for. 'write' zeroes the
    buffer (it leaves L2 full of dirty lines that the timed kernel's misses write back).
    'none' flushes nothing (warm-L2 timing).
    """
    import torch

    if flush not in FLUSHES:
        raise ValueError(f"flush must be one of {', '.join(FLUSHES)}, not {flush!r}")
    if flush == "none":
        return lambda: None
    device = device or runtime.DEVICE
    buf = torch.zeros(nbytes // 4, dtype=torch.float32, device=device)
    if flush == "write":
        return buf.zero_
    acc = torch.zeros((), dtype=torch.float32, device=device)
    return lambda: torch.sum(buf, dim=0, out=acc)


def time_samples(fn: Callable[[], Any], warmup: int = 10, repeat: int = 50, flush: str = "read",
                 flush_bytes: int = FLUSH_BYTES) -> list[float]:
    """Milliseconds of each of `repeat` calls of fn() with CUDA events, L2 flushed before each."""
    import torch

    flush_l2 = flusher(flush, flush_bytes, runtime.DEVICE)
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        flush_l2()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return times


def time_fn(fn: Callable[[], Any], warmup: int = 10, repeat: int = 50, flush: str = "read",
            flush_bytes: int = FLUSH_BYTES) -> float:
    """Median milliseconds of fn() with CUDA events, the L2 flushed before each repeat."""
    return statistics.median(time_samples(fn, warmup, repeat, flush, flush_bytes))


def random_args(params: Sequence[Any], device: str = "cuda", seed: int = 0) -> list[Any]:
    """Random tensors matching a kernel's parameters, made on `device`."""
    import torch

    g = torch.Generator(device=device).manual_seed(seed)
    out = []
    for p in params:
        dt = getattr(torch, p.dtype)
        if dt.is_floating_point:
            out.append(torch.randn(p.shape, generator=g, device=device, dtype=torch.float32).to(dt))
        else:
            out.append(torch.randint(-8, 8, p.shape, generator=g, device=device).to(dt))
    return out


def flop_dtype(params: Sequence[Any]) -> str | None:
    """The dtype a kernel's FLOPs are counted in when bench is not told: its narrowest
    floating-point parameter (fp8 before bf16/fp16 before fp32), or None without one."""
    kinds = {}
    for p in params:
        try:
            kinds.setdefault(peak_kind(p.dtype), p.dtype)
        except ValueError:
            continue
    for kind in ("fp8", "bf16", "fp32"):
        if kind in kinds:
            return kinds[kind]
    return None


def bench(kernel: Any, bytes: float | None = None, flops: float | None = None,
          baseline: str | Sequence[str] | None = None, name: str | None = None,
          dtype: str | None = None, flush: str = "read", warmup: int = 10,
          repeat: int = 50) -> Timing:
    """Time a kernel on random inputs of its own shapes; report bandwidth or FLOP rate vs peak.

    `baseline` names one PyTorch baseline or several (a tuple): each is timed in the same run
    as the kernel (`Timing.baselines`); the first is `Timing.baseline_ms`. `dtype` names what
    `flops` are counted in (bf16/fp16 and fp8: tensor-core peaks; fp32: the FP32 pipes); by
    default the kernel's narrowest floating-point parameter. `flush` is 'read' (default),
    'write' or 'none' (see `flusher`).
    """
    name = name or kernel.name
    names = baseline_names(baseline)
    baseline = names[0] if len(names) == 1 else tuple(names) if names else None
    if flush not in FLUSHES:
        raise ValueError(f"flush must be one of {', '.join(FLUSHES)}, not {flush!r}")
    if flops and dtype is None:
        dtype = flop_dtype(kernel.params)
    if dtype is not None:
        peak_kind(dtype)  # an unknown dtype fails here, not after the run
    meta = {"bytes": bytes, "flops": flops, "baseline": names[0] if names else None,
            "dtype": dtype, "flush": flush, "warmup": warmup, "repeat": repeat}
    if len(names) > 1:
        meta["baselines"] = names
    record.record_perf(kernel, name, meta)
    why = runtime.why_not_here(kernel.runs_on)
    if why is not None:
        from ..facts.results import latest

        rec = latest(name, "perf", chapter=record.current_chapter(), fingerprint=kernel.fingerprint)
        return Timing(name, "not measured", bytes=bytes, flops=flops, reason=why, recorded=rec,
                      dtype=dtype, flush=flush)
    arch = runtime.local_arch()
    launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
    return measure(launcher, name, bytes=bytes, flops=flops, baseline=baseline, dtype=dtype,
                   flush=flush, warmup=warmup, repeat=repeat)


def measure(launcher: Any, name: str, bytes: float | None = None, flops: float | None = None,
            baseline: str | Sequence[str] | None = None, dtype: str | None = None,
            flush: str = "read", warmup: int = 10, repeat: int = 50) -> Timing:
    """Time a loaded kernel (and its PyTorch baselines, one after the other) on random inputs:
    the one timing path of notebooks and replays."""
    names = baseline_names(baseline)
    args = random_args(launcher.params, device=runtime.DEVICE)
    samples = time_samples(lambda: launcher(*args), warmup, repeat, flush)
    base = {b: time_samples(lambda b=b: BASELINES[b](*args), warmup, repeat, flush) for b in names}
    first = base[names[0]] if names else []
    return Timing(name, "measured", gpu=runtime.local_gpu_name(), ms=statistics.median(samples),
                  bytes=bytes, flops=flops,
                  baseline_ms=statistics.median(first) if first else None, dtype=dtype,
                  flush=flush, samples=samples, baseline_samples=first,
                  baselines={b: statistics.median(v) for b, v in base.items()},
                  baselines_samples=base)
