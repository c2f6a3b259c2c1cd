"""The timing loop: CUDA events around each call, L2 flushed before it, the launch queued before
the timed interval starts, calls of several functions interleaved repeat by repeat.

A CUDA event is stamped when the GPU reaches it. If the GPU is idle when `start.record()` is
queued, it stamps `start` at once, and the interval then holds whatever the host spends before
the kernel reaches the queue: a PyTorch wrapper's argument checks, a backend's dispatch, a
descriptor cache look-up — tens of microseconds for some libraries, nothing for a bare launch.
So before each start event the GPU is given a spin (`torch.cuda._sleep`) long enough for the
host to queue the start event, the call and the end event behind it: the GPU leaves the spin,
stamps `start` and finds the launch already waiting. Whether that held is checked on every
repeat — if the GPU had already passed `start` when the host finished queuing (`start.query()`),
the host was the slower side — and the spin doubles during warm-up until it holds. A timed
call that the host still queued late (a scheduler hiccup) is timed again with a longer spin, up
to RETRIES times; one still late after that is counted (`host_bound`) and kept in the record.
"""

from __future__ import annotations

import math
from typing import Any, Callable

from . import runtime
from ..facts.hardware import GPUS

FLUSHES = ("read", "write", "none")
# The flush buffer: at least twice the largest L2 of the table, so that reading it evicts
# every line a previous repeat left (and never less than 256 MiB).
FLUSH_BYTES = max(256 << 20, math.ceil(2 * max(g.l2_bytes for g in GPUS.values()) / (1 << 20)) << 20)
SPIN_US = 50.0  # the first spin before each start event; doubled while the host is slower
SPIN_MAX_US = 20000.0
RETRIES = 3  # times a call that the host queued late is timed again, its spin doubled each time


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


class Spin:
    """A GPU-side wait of a given length in microseconds (`torch.cuda._sleep` spins for a number
    of clock cycles; the cycles per microsecond are measured once, at the clock of the moment)."""

    def __init__(self, us: float = SPIN_US) -> None:
        import torch

        self.torch, self.us = torch, us
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        cycles = 1_000_000
        torch.cuda._sleep(cycles)  # the first call loads the kernel
        start.record()
        torch.cuda._sleep(cycles)
        end.record()
        end.synchronize()
        self.cycles_per_us = cycles / max(start.elapsed_time(end) * 1e3, 1e-3)

    def __call__(self) -> None:
        self.torch.cuda._sleep(int(self.us * self.cycles_per_us))

    def longer(self) -> bool:
        """Double the spin; False once it is at its ceiling."""
        if self.us >= SPIN_MAX_US:
            return False
        self.us = min(2 * self.us, SPIN_MAX_US)
        return True


def time_interleaved(fns: dict[str, Callable[[], Any]], warmup: int = 10, repeat: int = 50,
                     flush: str = "read", flush_bytes: int = FLUSH_BYTES,
                     sample: Callable[[], None] | None = None,
                     report: dict[str, Any] | None = None) -> dict[str, list[float]]:
    """Milliseconds of `repeat` calls of each fn, interleaved: repeat r runs them in order when r
    is even and in reverse order when r is odd (ABBA...), so that a drift of clock or temperature
    during the run falls on every one alike. CUDA events bracket each call; L2 is flushed before
    each, and on a GPU a spin keeps the GPU busy until the call is queued (module docstring).
    `sample()`, when given, runs after the first function's call at the start, middle and end of
    the run (the clock samples of gpubook.run.clocks). `report`, when given, receives the spin's
    length (`spin_us`) and how many timed calls of each fn the host still reached late
    (`host_bound`)."""
    import torch

    flush_l2 = flusher(flush, flush_bytes, runtime.DEVICE)
    spin = Spin() if runtime.DEVICE == "cuda" else None
    names = list(fns)

    def once(name: str) -> tuple[Any, Any, bool]:
        flush_l2()
        if spin is not None:
            spin()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fns[name]()
        end.record()
        late = spin is not None and start.query()  # the GPU reached start before the call was queued
        end.synchronize()
        return start, end, late

    for name in names:
        for _ in range(warmup):
            while once(name)[2] and spin.longer():
                pass
    times: dict[str, list[float]] = {name: [] for name in names}
    late_count = {name: 0 for name in names}
    marks = {0, repeat // 2, repeat - 1}
    for r in range(repeat):
        for name in names if r % 2 == 0 else names[::-1]:
            start, end, late = once(name)
            for _ in range(RETRIES):  # a late call timed host work: longer spin, time it again
                if not late:
                    break
                spin.longer()
                start, end, late = once(name)
            times[name].append(start.elapsed_time(end))
            late_count[name] += late
            if sample is not None and r in marks and name == names[0]:
                sample()
    if report is not None:
        report.update(spin_us=spin.us if spin is not None else None, host_bound=late_count)
    return times


def time_samples(fn: Callable[[], Any], warmup: int = 10, repeat: int = 50, flush: str = "read",
                 flush_bytes: int = FLUSH_BYTES) -> list[float]:
    """Milliseconds of each of `repeat` calls of fn() with CUDA events, L2 flushed before each."""
    return time_interleaved({"fn": fn}, warmup, repeat, flush, flush_bytes)["fn"]


def time_fn(fn: Callable[[], Any], warmup: int = 10, repeat: int = 50, flush: str = "read",
            flush_bytes: int = FLUSH_BYTES) -> float:
    """Median milliseconds of fn() with CUDA events, the L2 flushed before each repeat."""
    import statistics

    return statistics.median(time_samples(fn, warmup, repeat, flush, flush_bytes))
