"""Find a CUDA compiler (nvcc, else NVRTC from NVIDIA's pip wheels) and turn CUDA source into PTX or a cubin."""

from __future__ import annotations

import functools
import hashlib
import os
import re
import shlex
import shutil
import subprocess
import sysconfig
import tempfile
import threading
from pathlib import Path
from typing import Any

# The flags TVM's own nvcc path uses, so that a module compiled here and one compiled by a
# GPU host's nvcc at load time are the same program.
NVCC_FLAGS = [
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
]
# What ptxas is told, by either compiler: TVM's ptxas options (tvm.support.nvcc) with ptxas's own
# default register-usage level, 5, where TVM asks for 10, at which ptxas trades registers for
# local memory: chapter 12's MXFP8 kernel spills at 10 under either compiler and not at 5.
# Level 5 is the level of every Hopper binary the book has timed (the GPU host's nvcc, by
# default; these options give the same SASS). (-v changes the cubin's bytes, not its code, so it
# is kept, as TVM passes it.) A chapter's static facts are those of the binary its kernel runs
# as, whichever compiler built it.
PTXAS_FLAGS = ("-v", "--register-usage-level=5", "--warn-on-local-memory-usage")  # TVM's order


def local_arch() -> str | None:
    """The sm_XX(a) target of the first visible CUDA GPU, or None without one."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available():
        return None
    major, minor = torch.cuda.get_device_capability(0)
    suffix = "a" if major >= 9 else ""
    return f"sm_{major}{minor}{suffix}"


def wheel_cuda_root() -> Path | None:
    """The `nvidia/cu13` folder of NVIDIA's pip wheels, if they are installed."""
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        root = Path(base) / "nvidia" / "cu13"
        if (root / "include" / "cuda_runtime.h").exists():
            return root
    return None


@functools.cache
def compiler() -> str:
    """'nvcc' or 'nvrtc': GPUBOOK_COMPILER if set, else nvcc when on PATH, else NVRTC.

    Both are given the same ptxas options (`PTXAS_FLAGS`) and the same declarations (the
    CUtensorMap of cuda.h, 128-byte aligned), so that most kernels get the same registers,
    shared memory and spills (tests/test_harness.py compares them). The PTX still differs:
    NVRTC's carries cuda::std's globals, and its front end computes shared-memory addresses in
    64 bits where nvcc's uses 32, which costs registers: chapter 11B's FA4 check case with the
    most pressure spills a few instructions under NVRTC and none under nvcc (the chapter says
    so). Every kernel's report names the compiler that built it.
    """
    choice = os.environ.get("GPUBOOK_COMPILER", "").lower()
    if choice in ("nvcc", "nvrtc"):
        return choice
    if choice:
        raise ValueError(f"GPUBOOK_COMPILER must be 'nvcc' or 'nvrtc', not {choice!r}")
    return "nvcc" if shutil.which("nvcc") else "nvrtc"


def _nvrtc_env() -> None:
    """Point TVM's NVRTC path at the pip wheels' headers (no system CUDA needed)."""
    root = wheel_cuda_root()
    if root is None:
        raise RuntimeError(
            "no nvcc on PATH and no NVIDIA CUDA pip wheels found: "
            "pip install -r requirements.txt installs nvidia-cuda-nvrtc and its headers"
        )
    os.environ["CUDA_PATH"] = str(root)
    cccl = f"-I{root / 'include' / 'cccl'}"
    if cccl not in os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", ""):
        os.environ["TVM_CUDA_NVRTC_EXTRA_OPTS"] = (
            os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", "") + " " + cccl
        ).strip()


def compile_source(src: str, arch: str, fmt: str, using: str | None = None) -> bytes:
    """Compile CUDA source to 'ptx' or 'cubin' for an arch such as 'sm_100a'."""
    ptx, cubin = compile_both(src, arch, using)
    return ptx if fmt == "ptx" else cubin


# One compilation per (source, arch, compiler) in a process: the PTX and the cubin of a kernel
# come from the same NVRTC run, and a refusal is remembered as well as a success.
_compiled: dict[tuple[str, str, str], tuple[bytes, bytes] | RuntimeError] = {}
_compiled_lock = threading.Lock()


def compile_both(src: str, arch: str, using: str | None = None) -> tuple[bytes, bytes]:
    """(PTX, cubin) of CUDA source for an arch such as 'sm_100a', compiled once per process.

    With NVRTC one compilation for the real arch yields both (its PTX is byte for byte the PTX of
    a compilation for the virtual arch), and the CUDA headers are parsed once per process: they
    come first in the program, and NVRTC's automatic precompiled header keeps them. The program
    is otherwise TVM's (`tvm.support.nvcc`, same preamble, same options); `GPUBOOK_COMPILE_VERIFY=1`
    compiles each source through TVM as well and fails on any byte of difference.
    """
    using = using or compiler()
    if using == "nvcc" and not shutil.which("nvcc"):
        using = "nvrtc"
    key = (hashlib.sha256(src.encode()).hexdigest(), arch, using)
    with _compiled_lock:
        found = _compiled.get(key)
    if found is None:
        try:
            found = _nvcc_both(src, arch) if using == "nvcc" else _nvrtc(src, arch)
        except RuntimeError as exc:
            found = exc
        with _compiled_lock:
            _compiled[key] = found
    if isinstance(found, RuntimeError):
        raise RuntimeError(str(found))
    return found


# Headers every TVM CUDA program may include (tvm/backend/cuda/codegen/header.py), parsed
# first so that one precompiled header serves every kernel of a process. Each is guarded, so
# the program's own #include of it later is empty; a header that the program includes after
# defining macros for it (sm_61_intrinsics.h) is left out, and so is mma.h, with which NVRTC
# makes no precompiled header.
PCH_HEADERS = ("cuda/std/cstdint", "cuda/std/limits", "cuda/std/type_traits", "cuda_fp16.h",
               "cuda_bf16.h", "cuda_fp8.h", "cuda_fp6.h", "cuda_fp4.h", "math_constants.h")
# TVM's NVRTC preamble, verbatim (tvm.support.nvcc._compile_cuda_nvrtc).
_TVM_PREAMBLE = """#include <cuda/std/cstdint>
using cuda::std::uint8_t;
using cuda::std::uint16_t;
using cuda::std::uint32_t;
using cuda::std::uint64_t;
using cuda::std::int8_t;
using cuda::std::int16_t;
using cuda::std::int32_t;
using cuda::std::int64_t;

// NVRTC uses asm/volatile instead of __asm__/__volatile__
#ifndef __asm__
#define __asm__ asm
#endif
#ifndef __volatile__
#define __volatile__ volatile
#endif

// NVRTC does not pull in the host <math.h>, so INFINITY is undefined. Provide it
// from libcu++ (same float +inf value nvcc's <math.h> yields).
#include <cuda/std/limits>
#ifndef INFINITY
#define INFINITY (::cuda::std::numeric_limits<float>::infinity())
#endif

"""
# cuda.h's CUtensorMap (CUDA 12.x and 13.x), which NVRTC programs cannot include: 128-byte
# aligned, as a kernel parameter too. (TVM's NVRTC program declares it 64-byte aligned.)
_TENSOR_MAP = ("struct alignas(128) CUtensorMap_st {\n  unsigned long long opaque[16];\n};\n"
               "typedef struct CUtensorMap_st CUtensorMap;\n\n")


def nvrtc_program(src: str) -> str:
    """The program NVRTC compiles for a TVM CUDA source: the headers, then TVM's preamble and
    source transformation (no host-only cuda.h; the CUtensorMap type that cuda.h would define)."""
    body = "\n".join(ln for ln in src.splitlines() if ln.strip() != "#include <cuda.h>")
    if "CUtensorMap" in body:
        body = _TENSOR_MAP + body
    head = "".join(f"#include <{h}>\n" for h in PCH_HEADERS) + "#pragma nv_hdrstop\n"
    return head + _TVM_PREAMBLE + body


def nvrtc_options(arch: str, pch: bool = True) -> list[str]:
    """TVM's NVRTC options for an arch (tvm.support.nvcc._compile_cuda_nvrtc) with the book's
    ptxas options (`PTXAS_FLAGS`, which nvcc is given too), plus the automatic precompiled header."""
    from tvm.support import nvcc as tvm_nvcc

    _nvrtc_env()
    cuda_path = tvm_nvcc.find_cuda_path()
    includes = []
    if os.path.isdir(os.path.join(cuda_path, "include")):
        includes.append(os.path.join(cuda_path, "include"))
    arch_include = tvm_nvcc._find_cuda_target_include(cuda_path)
    if arch_include:
        includes.append(arch_include)
        if os.path.isdir(os.path.join(arch_include, "cccl")):
            includes.append(os.path.join(arch_include, "cccl"))
    opts = [f"--gpu-architecture={arch}", "-default-device", "--device-int128"]
    opts += [f"-I{p}" for p in includes]
    opts += ["-D__NV_SILENCE_DEPRECATION_BEGIN=", "-D__NV_SILENCE_DEPRECATION_END=",
             "-D__NV_SILENCE_HOST_DEPRECATION_BEGIN=", "-D__NV_SILENCE_HOST_DEPRECATION_END=",
             "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
             "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
             "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
             "--use_fast_math"]
    opts += [f"--ptxas-options={f}" for f in PTXAS_FLAGS]
    opts += shlex.split(os.environ.get("TVM_CUDA_NVRTC_EXTRA_OPTS", "").strip())
    if pch:
        opts.append("-pch")
    return opts


def _nvrtc(src: str, arch: str) -> tuple[bytes, bytes]:
    from cuda.bindings import nvrtc

    if "#include <nvshmem.h>" in src or "#include <nvshmemx.h>" in src:
        raise RuntimeError("NVSHMEM kernels are not compiled by the book's toolchain")
    opts = [o.encode() for o in nvrtc_options(arch)]
    err, prog = nvrtc.nvrtcCreateProgram(nvrtc_program(src).encode(), b"tvm_kernels.cu", 0, None, None)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise RuntimeError(f"Failed to create NVRTC program: {err}")
    try:
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            _, n = nvrtc.nvrtcGetProgramLogSize(prog)
            log = bytearray(n)
            nvrtc.nvrtcGetProgramLog(prog, log)
            raise RuntimeError("NVRTC compilation failed:\n" + log.decode(errors="replace").rstrip("\x00"))
        out = []
        for size, get in ((nvrtc.nvrtcGetPTXSize, nvrtc.nvrtcGetPTX), (nvrtc.nvrtcGetCUBINSize, nvrtc.nvrtcGetCUBIN)):
            err, n = size(prog)
            buf = bytearray(n)
            (err2,) = get(prog, buf)
            if nvrtc.nvrtcResult.NVRTC_SUCCESS not in (err,) or err2 != nvrtc.nvrtcResult.NVRTC_SUCCESS:
                raise RuntimeError(f"NVRTC produced no output ({err}, {err2})")
            out.append(bytes(buf))
    finally:
        nvrtc.nvrtcDestroyProgram(prog)
    ptx, cubin = out
    if os.environ.get(VERIFY_ENV):
        _verify(src, arch, ptx, cubin)
    return ptx, cubin


VERIFY_ENV = "GPUBOOK_COMPILE_VERIFY"
_callback: list[Any] = []


def install_tvm_callback() -> None:
    """Route TVM's own CUDA compilation (a module's export or load) through `compile_both` with the
    book's compiler and options, so that a kernel runs as the binary its report describes and is
    not compiled again. The arch is the one TVM would pick."""
    if _callback:
        return
    import tvm_ffi
    from tvm.support import nvcc as tvm_nvcc
    from tvm.target import Target

    def tvm_callback_cuda_compile(code: str, *rest: Any) -> bytes:
        version = tvm_nvcc.get_target_compute_version(Target.current(allow_none=True))
        return bytearray(compile_both(code, f"sm_{''.join(version.split('.'))}")[1])

    tvm_ffi.register_global_func("tvm_callback_cuda_compile", tvm_callback_cuda_compile, override=True)
    _callback.append(tvm_callback_cuda_compile)


def _verify(src: str, arch: str, ptx: bytes, cubin: bytes) -> None:
    """Compile through TVM's own NVRTC path too; fail unless both outputs are the same bytes.
    TVM is given the book's register-usage level; a program with a tensor map is not compared
    (the book declares it 128-byte aligned, as cuda.h does, where TVM's program says 64)."""
    if "CUtensorMap" in src:
        return
    from unittest import mock

    from tvm.support import nvcc as tvm_nvcc

    level = next(f.split("=")[1] for f in PTXAS_FLAGS if f.startswith("--register-usage-level="))
    with mock.patch.dict(os.environ, {"TVM_CUDA_PTXAS_REG_LEVEL": level}):
        theirs_ptx = bytes(tvm_nvcc.compile_cuda(src, target_format="ptx", arch=arch, compiler="nvrtc"))
        theirs_cubin = bytes(tvm_nvcc.compile_cuda(src, target_format="cubin", arch=arch, compiler="nvrtc"))
    if theirs_ptx.rstrip(b"\0") != ptx.rstrip(b"\0") or theirs_cubin != cubin:
        which = "PTX" if theirs_ptx.rstrip(b"\0") != ptx.rstrip(b"\0") else "cubin"
        raise RuntimeError(f"{VERIFY_ENV}: the book's NVRTC program and TVM's give another {which} for {arch}")


def _nvcc_both(src: str, arch: str) -> tuple[bytes, bytes]:
    """(PTX, cubin) from one nvcc run: the cubin, and the PTX that nvcc generates on the way to it
    (kept with -keep; the same text `nvcc --ptx` writes for the arch)."""
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = Path(tmp, "k.cu"), Path(tmp, "k.cubin")
        cu.write_text(src)
        gen = f"arch=compute_{arch[3:]},code=sm_{arch[3:]}"
        cmd = ["nvcc", "--cubin", "-gencode", gen, *NVCC_FLAGS, _nvcc_ptxas(), "-keep", "--keep-dir", tmp, "-o", str(out), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed for {arch}:\n{proc.stdout}{proc.stderr}")
        ptx = sorted(Path(tmp).glob("*.ptx"))
        if len(ptx) != 1:
            raise RuntimeError(f"nvcc -keep left {len(ptx)} PTX files for {arch}")
        return ptx[0].read_bytes(), out.read_bytes()


def _nvcc(src: str, arch: str, fmt: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = Path(tmp, "k.cu"), Path(tmp, f"k.{fmt}")
        cu.write_text(src)
        gen = f"arch=compute_{arch[3:]},code={'compute' if fmt == 'ptx' else 'sm'}_{arch[3:]}"
        cmd = ["nvcc", f"--{fmt}", "-gencode", gen, *NVCC_FLAGS, _nvcc_ptxas(), "-o", str(out), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed for {arch}:\n{proc.stdout}{proc.stderr}")
        return out.read_bytes()


def _nvcc_ptxas() -> str:
    return "--ptxas-options=" + ",".join(PTXAS_FLAGS)


def first_error(message: str) -> str:
    """The first error line of a compiler's output, e.g. "ptxas: Instruction 'wgmma.fence' not
    supported on .target 'sm_100a'" (file names and line numbers dropped)."""
    for line in message.splitlines():
        m = re.search(r"\berror\b\s*:\s*(.+)$", line)
        if m:
            tool_name = "ptxas" if line.lstrip().startswith("ptxas") else "error"
            return f"{tool_name}: {m.group(1).strip()}"
    for line in message.splitlines():
        if "fatal" in line or "error" in line.lower():
            return line.strip()
    lines = [ln.strip() for ln in message.splitlines() if ln.strip()]
    return lines[0] if lines else "the compiler refused it (no message)"


def tool(name: str) -> str | None:
    """Path of a CUDA binary tool (cuobjdump, nvdisasm): PATH first, then the pip wheels."""
    found = shutil.which(name)
    if found:
        return found
    root = wheel_cuda_root()
    if root is not None and (root / "bin" / name).exists():
        return str(root / "bin" / name)
    return None


@functools.lru_cache(maxsize=64)
def cuobjdump(cubin: bytes, *flags: str) -> str:
    """Run cuobjdump on a cubin held in memory and return what it prints (once per cubin and
    flags in a process: a kernel built twice, as a probe and as a check, is listed once)."""
    exe = tool("cuobjdump")
    if exe is None:
        raise RuntimeError("cuobjdump not found: pip install nvidia-cuda-cuobjdump")
    with tempfile.NamedTemporaryFile(suffix=".cubin") as f:
        f.write(cubin)
        f.flush()
        proc = subprocess.run([exe, *flags, f.name], capture_output=True, text=True)
    if proc.returncode != 0:
        raise RuntimeError(f"cuobjdump {' '.join(flags)} failed: {proc.stderr}")
    return proc.stdout


@functools.cache
def identity() -> dict[str, str]:
    """What built a kernel's modules, by version: TVM, the compiler and its ptxas. A replay made
    of modules built by another toolchain is a replay of another binary."""
    import importlib.metadata as md

    def version(dist: str) -> str:
        try:
            return md.version(dist)
        except md.PackageNotFoundError:
            return "absent"

    using = compiler()
    out = {"tvm": version("apache-tvm"), "compiler": using}
    if using == "nvcc" and shutil.which("nvcc"):
        for tool_name in ("nvcc", "ptxas"):
            exe = shutil.which(tool_name)
            text = subprocess.run([exe, "--version"], capture_output=True, text=True).stdout if exe else ""
            out[tool_name] = text.strip().splitlines()[-1] if text.strip() else "absent"
    else:  # NVRTC carries its own ptxas
        out["nvrtc"] = version("nvidia-cuda-nvrtc")
    return out
