"""Find a CUDA compiler (nvcc, else NVRTC from NVIDIA's pip wheels) and turn CUDA source into PTX or a cubin."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
import sysconfig
import tempfile
from pathlib import Path

# The flags TVM's own nvcc path uses, so that a module compiled here and one compiled by a
# GPU host's nvcc at load time are the same program.
NVCC_FLAGS = [
    "-O3",
    "-U__CUDA_NO_HALF_OPERATORS__", "-U__CUDA_NO_HALF_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT16_OPERATORS__", "-U__CUDA_NO_BFLOAT16_CONVERSIONS__",
    "-U__CUDA_NO_BFLOAT162_OPERATORS__", "-U__CUDA_NO_BFLOAT162_CONVERSIONS__",
    "--expt-relaxed-constexpr", "--expt-extended-lambda", "--use_fast_math",
]


def wheel_cuda_root() -> Path | None:
    """The `nvidia/cu13` folder of NVIDIA's pip wheels, if they are installed."""
    for base in {sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]}:
        root = Path(base) / "nvidia" / "cu13"
        if (root / "include" / "cuda_runtime.h").exists():
            return root
    return None


@functools.cache
def compiler() -> str:
    """'nvcc' or 'nvrtc': GPUBOOK_COMPILER if set, else nvcc when on PATH, else NVRTC."""
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
    using = using or compiler()
    if using == "nvcc" and shutil.which("nvcc"):
        return _nvcc(src, arch, fmt)
    from tvm.support import nvcc as tvm_nvcc  # NVRTC through apache-tvm and cuda-bindings

    _nvrtc_env()
    return bytes(tvm_nvcc.compile_cuda(src, target_format=fmt, arch=arch, compiler="nvrtc"))


def _nvcc(src: str, arch: str, fmt: str) -> bytes:
    with tempfile.TemporaryDirectory() as tmp:
        cu, out = Path(tmp, "k.cu"), Path(tmp, f"k.{fmt}")
        cu.write_text(src)
        gen = f"arch=compute_{arch[3:]},code={'compute' if fmt == 'ptx' else 'sm'}_{arch[3:]}"
        cmd = ["nvcc", f"--{fmt}", "-gencode", gen, *NVCC_FLAGS, "-o", str(out), str(cu)]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0:
            raise RuntimeError(f"nvcc failed for {arch}:\n{proc.stdout}{proc.stderr}")
        return out.read_bytes()


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


def cuobjdump(cubin: bytes, *flags: str) -> str:
    """Run cuobjdump on a cubin held in memory and return what it prints."""
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
