"""What a timing depends on besides the kernel: the driver, the GPU's power limit and clocks, and
the versions of the libraries the baselines call (cuBLAS, cuBLASLt, cuDNN). Every replay
records them in its run, so that two results files can be told apart when their numbers differ.

The GPU's clocks are not locked by the book (that needs root and changes the GPU for everyone
else on the host): the protocol's repeats and intervals are what make a number hold without it.
NVML is read through ctypes from the driver's library; each library's version comes from the
library PyTorch itself loaded. A fact that cannot be read is left out, never guessed.
"""

from __future__ import annotations

import ctypes
from typing import Any


def _loaded(stem: str) -> str | None:
    """The path of a shared library of this process whose file name starts with `stem`."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split()[-1] if line.strip() else ""
                if "/" in path and path.rsplit("/", 1)[-1].startswith(stem):
                    return path
    except OSError:
        return None
    return None


def _cublas_version(path: str) -> str | None:
    lib = ctypes.CDLL(path)
    parts = []
    for prop in (0, 1, 2):  # libraryPropertyType: MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        v = ctypes.c_int()
        if lib.cublasGetProperty(prop, ctypes.byref(v)) != 0:
            return None
        parts.append(str(v.value))
    return ".".join(parts)


def libraries() -> dict[str, Any]:
    """{'cuda': runtime version PyTorch was built with, 'cudnn', 'cublas', 'cublaslt'} as far as
    they can be read; a GEMM runs first so that PyTorch has loaded cuBLAS and cuBLASLt."""
    import torch

    out: dict[str, Any] = {"torch": torch.__version__, "cuda": torch.version.cuda}
    if torch.backends.cudnn.is_available():
        out["cudnn"] = torch.backends.cudnn.version()
    if torch.cuda.is_available():
        a = torch.ones(16, 16, device="cuda", dtype=torch.bfloat16)
        (a @ a).sum().item()
    path = _loaded("libcublas.so")
    if path:
        try:
            out["cublas"] = _cublas_version(path)
        except (OSError, AttributeError):
            pass
    path = _loaded("libcublasLt.so")
    if path:
        try:
            lt = ctypes.CDLL(path)
            lt.cublasLtGetVersion.restype = ctypes.c_size_t
            out["cublaslt"] = int(lt.cublasLtGetVersion())
        except (OSError, AttributeError):
            pass
    return out


def gpu_facts(index: int = 0) -> dict[str, Any]:
    """{'driver', 'power_limit_w', 'max_sm_mhz', 'max_mem_mhz', 'application_sm_mhz'} from NVML,
    as far as they can be read (an empty dict without NVML)."""
    try:
        lib = ctypes.CDLL("libnvidia-ml.so.1")
        if lib.nvmlInit_v2() != 0:
            return {}
    except OSError:
        return {}
    out: dict[str, Any] = {}
    buf = ctypes.create_string_buffer(96)
    if lib.nvmlSystemGetDriverVersion(buf, 96) == 0:
        out["driver"] = buf.value.decode()
    handle = ctypes.c_void_p()
    if lib.nvmlDeviceGetHandleByIndex_v2(index, ctypes.byref(handle)) != 0:
        return out
    mw, mhz = ctypes.c_uint(), ctypes.c_uint()
    if lib.nvmlDeviceGetEnforcedPowerLimit(handle, ctypes.byref(mw)) == 0:
        out["power_limit_w"] = round(mw.value / 1000)
    for key, fn, clock in (("max_sm_mhz", "nvmlDeviceGetMaxClockInfo", 1),
                           ("max_mem_mhz", "nvmlDeviceGetMaxClockInfo", 2),
                           ("application_sm_mhz", "nvmlDeviceGetApplicationsClock", 1)):
        if getattr(lib, fn)(handle, clock, ctypes.byref(mhz)) == 0:
            out[key] = mhz.value
    return out
