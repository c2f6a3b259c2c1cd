"""What the GPU's clocks and power management were doing while a kernel was timed.

A measurement made while the SM clock sat below its maximum (a power cap is common for large
GEMMs on an H200) says less about the kernel than one made at full clock, so every timing records
a few samples of the SM clock and the reasons NVML gives for holding it down. NVML is read
through ctypes from the driver's `libnvidia-ml.so.1` (nothing to install); without it, through
`nvidia-smi`; without either, no sample is taken and the record says so.
"""

from __future__ import annotations

import ctypes
import shutil
import subprocess
from typing import Any

# NVML's clock-event ("throttle") reason bits, nvml.h: nvmlClocksEventReason*.
REASONS = {
    0x1: "gpu idle",
    0x2: "application clocks setting",
    0x4: "software power cap",
    0x8: "hardware slowdown",
    0x10: "sync boost",
    0x20: "software thermal slowdown",
    0x40: "hardware thermal slowdown",
    0x80: "hardware power brake slowdown",
    0x100: "display clock setting",
}
# Reasons that mean the clock was held below what the kernel's load asked for. "gpu idle" is
# set between launches and says nothing about the timed kernel.
SLOWDOWNS = {name for bit, name in REASONS.items() if bit not in (0x1, 0x100)}
_NVML_CLOCK_SM = 1
_NVML_SUCCESS = 0


def reasons(mask: int) -> list[str]:
    """The names of the reason bits set in an NVML clock-event mask."""
    return [name for bit, name in REASONS.items() if mask & bit]


class _Nvml:
    def __init__(self, index: int) -> None:
        self.lib = ctypes.CDLL("libnvidia-ml.so.1")
        if self.lib.nvmlInit_v2() != _NVML_SUCCESS:
            raise OSError("nvmlInit failed")
        self.handle = ctypes.c_void_p()
        if self.lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(self.handle)) != _NVML_SUCCESS:
            raise OSError(f"no NVML device {index}")

    def sample(self) -> dict[str, Any]:
        mhz, top, mask, mw = ctypes.c_uint(), ctypes.c_uint(), ctypes.c_ulonglong(), ctypes.c_uint()
        out: dict[str, Any] = {}
        if self.lib.nvmlDeviceGetClockInfo(self.handle, _NVML_CLOCK_SM, ctypes.byref(mhz)) == _NVML_SUCCESS:
            out["sm_mhz"] = mhz.value
        if self.lib.nvmlDeviceGetMaxClockInfo(self.handle, _NVML_CLOCK_SM, ctypes.byref(top)) == _NVML_SUCCESS:
            out["max_sm_mhz"] = top.value
        if self.lib.nvmlDeviceGetCurrentClocksThrottleReasons(self.handle, ctypes.byref(mask)) == _NVML_SUCCESS:
            out["reasons"] = reasons(mask.value)
        if self.lib.nvmlDeviceGetPowerUsage(self.handle, ctypes.byref(mw)) == _NVML_SUCCESS:
            out["power_w"] = round(mw.value / 1000, 1)
        return out


def _smi_sample(index: int) -> dict[str, Any]:
    q = "clocks.sm,clocks.max.sm,clocks_event_reasons.active,power.draw"
    proc = subprocess.run(["nvidia-smi", f"--id={index}", f"--query-gpu={q}", "--format=csv,noheader,nounits"],
                          capture_output=True, text=True, timeout=10)
    sm, top, mask, power = (v.strip() for v in proc.stdout.strip().split(","))
    return {"sm_mhz": int(sm), "max_sm_mhz": int(top), "reasons": reasons(int(mask, 16)),
            "power_w": float(power)}


class Sampler:
    """Samples of the SM clock and its slowdown reasons on one GPU, taken at the moments the
    timing loop chooses; `summary()` is what a measurement records."""

    def __init__(self, index: int = 0) -> None:
        self.samples: list[dict[str, Any]] = []
        self.source: str | None = None
        self._read = None
        try:
            nvml = _Nvml(index)
            nvml.sample()
            self._read, self.source = nvml.sample, "nvml"
        except (OSError, AttributeError):
            if shutil.which("nvidia-smi"):
                try:
                    _smi_sample(index)
                    self._read, self.source = (lambda: _smi_sample(index)), "nvidia-smi"
                except (OSError, ValueError, subprocess.SubprocessError):
                    pass

    def take(self) -> None:
        if self._read is not None:
            try:
                self.samples.append(self._read())
            except (OSError, ValueError, subprocess.SubprocessError):
                pass

    def summary(self) -> dict[str, Any]:
        """{source, samples, sm_mhz_min, sm_mhz_max, max_sm_mhz, reasons, slowed} or, without any
        sample, {source: None, why}."""
        return summarize(self.samples, self.source)


def summarize(samples: list[dict[str, Any]], source: str | None) -> dict[str, Any]:
    """What a list of samples says: the SM clock's range against its maximum, every reason seen,
    and whether any reason was a slowdown (power, thermal, hardware)."""
    if not samples:
        return {"source": None, "why": "no NVML library and no nvidia-smi here" if source is None
                else "no sample could be read"}
    mhz = [s["sm_mhz"] for s in samples if "sm_mhz" in s]
    seen = sorted({r for s in samples for r in s.get("reasons", [])})
    top = next((s["max_sm_mhz"] for s in samples if "max_sm_mhz" in s), None)
    return {"source": source, "samples": len(samples),
            "sm_mhz_min": min(mhz) if mhz else None, "sm_mhz_max": max(mhz) if mhz else None,
            "max_sm_mhz": top, "reasons": seen, "slowed": sorted(set(seen) & SLOWDOWNS),
            "power_w_max": max((s["power_w"] for s in samples if "power_w" in s), default=None)}


def describe(summary: dict[str, Any] | None) -> str:
    """One line for a report: 'SM clock 1755–1980 MHz of 1980, slowed by software power cap'."""
    if not summary or summary.get("source") is None:
        return "clocks not sampled" + (f" ({summary['why']})" if summary and summary.get("why") else "")
    lo, hi, top = summary.get("sm_mhz_min"), summary.get("sm_mhz_max"), summary.get("max_sm_mhz")
    span = f"{lo}" if lo == hi else f"{lo}–{hi}"
    line = f"SM clock {span} MHz" + (f" of {top}" if top else "")
    slowed = summary.get("slowed") or []
    return line + (f", slowed by {', '.join(slowed)}" if slowed else ", no slowdown reported")
