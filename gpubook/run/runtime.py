"""Load an exported kernel module through tvm_ffi and launch it: the one run path of the book.

The same code runs in a notebook on a GPU machine (apache-tvm installed) and on a lean GPU
host that has only PyTorch, apache-tvm-ffi and the TVM runtime libraries (TVM_LIBRARY_PATH).
An exported module carries CUDA source; loading it calls the global function
`tvm_callback_cuda_compile`, which this module registers to compile for the local GPU's arch.
"""

from __future__ import annotations

import ctypes
import glob
import importlib.util
import os
from typing import Any, Callable, Sequence

from ..compile import toolchain
from ..compile.signature import Param, validate

_state: dict[str, Any] = {"arch": None, "ready": False}
DEVICE = "cuda"  # where launched kernels' tensors live
CUBIN_CACHE_ENV = "GPUBOOK_CUBIN_CACHE"


def synchronize() -> None:
    """Wait for the GPU to finish the launched work."""
    import torch

    torch.cuda.synchronize()


def local_arch() -> str | None:
    """The sm_XX(a) target of the first visible CUDA GPU, or None without one (asked of the
    compile layer, which builds for it too)."""
    return toolchain.local_arch()


def why_not_here(runs_on: Sequence[str]) -> str | None:
    """None if this machine's GPU can run a kernel built for `runs_on`, else the reason."""
    arch = local_arch()
    if arch is None:
        return "no GPU on this machine"
    return None if arch in runs_on else f"this GPU is {arch}"


def local_gpu_name() -> str | None:
    """The name of the first visible CUDA GPU ('NVIDIA H200'), or None."""
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else None


def _load_runtime_libraries() -> None:
    if _state["ready"]:
        return
    if importlib.util.find_spec("tvm") is not None:
        import tvm  # noqa: F401  (loads libtvm_runtime and its CUDA module loader)
    else:
        import tvm_ffi  # noqa: F401

        libdir = os.environ.get("TVM_LIBRARY_PATH")
        if not libdir:
            raise RuntimeError(
                "apache-tvm is not installed and TVM_LIBRARY_PATH is unset: point it at the "
                "folder holding libtvm_runtime*.so (the runtime bundle's lib/)"
            )
        libs = sorted(glob.glob(os.path.join(libdir, "libtvm_runtime*.so")), key=len)
        if not libs:
            raise RuntimeError(f"no libtvm_runtime*.so in TVM_LIBRARY_PATH={libdir}")
        for lib in libs:  # libtvm_runtime.so (the shortest name) first
            ctypes.CDLL(lib, mode=ctypes.RTLD_GLOBAL)
    import tvm_ffi

    def compile_callback(code: str) -> bytearray:
        from ..compile.toolchain import compile_source

        # GPUBOOK_CUBIN_CACHE, a folder: the replay's child processes load the same modules, so
        # each CUDA source is compiled once per replay (keyed by the source and the arch).
        cache = os.environ.get(CUBIN_CACHE_ENV)
        if not cache:
            return bytearray(compile_source(code, _state["arch"], "cubin"))
        import hashlib

        path = os.path.join(cache, hashlib.sha256(f"{_state['arch']}\n{code}".encode()).hexdigest() + ".cubin")
        if not os.path.exists(path):
            os.makedirs(cache, exist_ok=True)
            tmp = f"{path}.{os.getpid()}"
            with open(tmp, "wb") as f:
                f.write(compile_source(code, _state["arch"], "cubin"))
            os.replace(tmp, path)
        with open(path, "rb") as f:
            return bytearray(f.read())

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", compile_callback, override=True)
    _state["ready"] = True


def packed_view(p: Param, t: Any) -> Any:
    """The tensor `t` that holds a sub-byte parameter (a `torch.float4_e2m1fn_x2` of shape
    (M, K / 2) for `float4_e2m1fn[M, K]`) as the kernel declares it: a tvm_ffi view of the same
    bytes with the kernel's shape and dtype, one lane per element. (DLPack would hand TVM the
    tensor as it is, two-lane elements of half the count, which the kernel's argument check
    refuses.) The view keeps `t` alive."""
    import tvm_ffi

    create_view = tvm_ffi.get_global_func("runtime.TVMTensorCreateView")
    return create_view(tvm_ffi.from_dlpack(t), tvm_ffi.Shape(p.shape), tvm_ffi.dtype(p.dtype), 0)


def kernel_args(params: Sequence[Param], args: Sequence[Any]) -> list[Any]:
    """The arguments as the compiled kernel takes them: sub-byte tensors as `packed_view`s."""
    return [packed_view(p, a) if p.packed > 1 else a for p, a in zip(params, args)]


class Launcher:
    """A loaded kernel: validates its arguments, then launches it on the current stream."""

    def __init__(self, fn: Callable[..., Any], name: str, params: Sequence[Param], arch: str):
        self._fn, self.name, self.params, self.arch = fn, name, list(params), arch
        self._packed = any(p.packed > 1 for p in self.params)

    def __call__(self, *args: Any) -> None:
        validate(self.name, self.params, args, device=DEVICE)
        self._fn(*(kernel_args(self.params, args) if self._packed else args))


def load(so_path: str, name: str, params: Sequence[Param], arch: str | None = None) -> Launcher:
    """Load an exported module, compiling its CUDA source for `arch` (default: the local GPU)."""
    arch = arch or local_arch()
    if arch is None:
        raise RuntimeError("no CUDA GPU visible: an exported kernel can only be loaded on a GPU")
    _load_runtime_libraries()
    import tvm_ffi

    _state["arch"] = arch
    module = tvm_ffi.load_module(so_path)
    return Launcher(module["main"], name, params, arch)
