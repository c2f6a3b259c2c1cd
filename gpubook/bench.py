"""Time kernels with CUDA events (warm-up, L2 flush, median) against the hardware peaks."""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import export, runtime
from .hardware import gpu_for

# PyTorch operations a kernel is compared with, by name, over the kernel's own arguments
# (inputs first, output last), so that a GPU host can rebuild them from shapes alone.
BASELINES: dict[str, Callable[..., Any]] = {
    "copy": lambda x, out: out.copy_(x),
    "add": lambda x, y, out: __import__("torch").add(x, y, out=out),
    "transpose": lambda x, out: out.copy_(x.t()),
    "row_sum": lambda x, out: __import__("torch").sum(x, dim=-1, out=out),
    "matmul_nt": lambda a, b, d: __import__("torch").matmul(a, b.t(), out=d),
}


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

    @staticmethod
    def from_record(rec: dict[str, Any]) -> "Timing":
        """The Timing a replay recorded (results/*.json) for a performance case."""
        return Timing(rec["name"], "measured", gpu=rec["run"]["gpu"], ms=rec["ms"],
                      bytes=rec.get("bytes"), flops=rec.get("flops"),
                      baseline_ms=rec.get("baseline_ms"))

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

    def percent_of_peak(self) -> float | None:
        if self.gpu is None or self.ms is None:
            return None
        g = gpu_for(self.gpu)
        if self.bytes:
            return 100 * self.bandwidth / g.hbm_bandwidth
        if self.flops:
            return 100 * self.flop_rate / g.bf16_flops
        return None

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
        if self.bandwidth:
            parts.append(f"{self.bandwidth / 1e12:.2f} TB/s")
        if self.flop_rate:
            parts.append(f"{self.flop_rate / 1e12:.1f} TFLOP/s")
        pct = self.percent_of_peak()
        if pct is not None:
            parts.append(f"{pct:.0f}% of peak")
        if self.baseline_ms:
            parts.append(f"PyTorch {self.baseline_ms * 1e3:.1f} µs")
        return " · ".join(parts)


def time_fn(fn: Callable[[], Any], warmup: int = 10, repeat: int = 50, flush_bytes: int = 256 << 20) -> float:
    """Median milliseconds of fn() with CUDA events, the L2 flushed before each repeat."""
    import torch

    scratch = torch.empty(flush_bytes, dtype=torch.uint8, device="cuda")
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(repeat):
        scratch.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return statistics.median(times)


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


def bench(kernel: Any, bytes: float | None = None, flops: float | None = None,
          baseline: str | None = None, name: str | None = None) -> Timing:
    """Time a kernel on random inputs of its own shapes; report bandwidth or FLOP rate vs peak."""
    name = name or kernel.name
    if baseline is not None and baseline not in BASELINES:
        raise ValueError(f"unknown baseline {baseline!r}; known: {', '.join(BASELINES)}")
    export.record_perf(kernel, name, {"bytes": bytes, "flops": flops, "baseline": baseline})
    why = runtime.why_not_here(kernel.runs_on)
    if why is not None:
        from .results import latest

        rec = latest(name, "perf", chapter=export.current_chapter(), fingerprint=kernel.fingerprint)
        return Timing(name, "not measured", bytes=bytes, flops=flops, reason=why, recorded=rec)
    arch = runtime.local_arch()
    launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
    args = random_args(kernel.params)
    ms = time_fn(lambda: launcher(*args))
    base_ms = time_fn(lambda: BASELINES[baseline](*args)) if baseline else None
    return Timing(name, "measured", gpu=runtime.local_gpu_name(), ms=ms, bytes=bytes,
                  flops=flops, baseline_ms=base_ms)
