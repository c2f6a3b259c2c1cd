"""A runtime bundle for a GPU host that cannot install apache-tvm: what `gpubook replay` needs to
load the modules that `gpubook export` wrote on a machine with the compiler.

The bundle holds the TVM runtime libraries of the apache-tvm installed here (libtvm_runtime*.so,
about 5 MB), the apache-tvm-ffi wheel of the same version for the GPU host's Python, and env.sh,
which installs that wheel under /tmp and sets PYTHONPATH, TVM_LIBRARY_PATH and LD_LIBRARY_PATH.
On the GPU host: `source DIR/env.sh && python3 -m gpubook replay EXPORT_DIR ...`; gpubook.runtime
then loads tvm_ffi, the runtime libraries (libtvm_runtime.so first) and each exported module.
"""

from __future__ import annotations

import importlib.metadata as md
import importlib.util
import shutil
import subprocess
import sys
from pathlib import Path

PLATFORMS = ("manylinux_2_28_x86_64", "manylinux_2_27_x86_64", "manylinux_2_24_x86_64",
             "manylinux_2_17_x86_64", "manylinux2014_x86_64")

ENV_SH = """# source this on the GPU host (bash): python3 then imports tvm_ffi and finds the TVM runtime
_here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
python3 -m pip install -q --no-index --no-deps --no-compile --upgrade --target /tmp/gpubook-site \\
  "$_here"/wheels/*.whl >/dev/null 2>&1 || { echo "env.sh: could not install apache-tvm-ffi" >&2; return 1; }
export PYTHONPATH=/tmp/gpubook-site${PYTHONPATH:+:$PYTHONPATH}
export TVM_LIBRARY_PATH="$_here/lib"
export LD_LIBRARY_PATH="$_here/lib:/usr/local/cuda/lib64${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
"""


def runtime_libraries() -> list[Path]:
    """The TVM runtime libraries of the installed apache-tvm."""
    spec = importlib.util.find_spec("tvm")
    if spec is None or spec.origin is None:
        raise RuntimeError("apache-tvm is not installed: pip install -r requirements.txt")
    libs = sorted((Path(spec.origin).parent / "lib").glob("libtvm_runtime*.so"))
    if not libs:
        raise RuntimeError(f"no libtvm_runtime*.so under {Path(spec.origin).parent / 'lib'}")
    return libs


def pack_runtime(out: Path, python_version: str = "3.12", wheel_dir: Path | None = None) -> Path:
    """Write the bundle to `out` (replacing it) for a GPU host whose python3 is `python_version`.

    The apache-tvm-ffi wheel is downloaded with pip (from the index this machine's pip uses), or
    taken from `wheel_dir` when given. Returns `out`.
    """
    version = md.version("apache-tvm-ffi")
    out = Path(out)
    shutil.rmtree(out, ignore_errors=True)
    (out / "lib").mkdir(parents=True)
    (out / "wheels").mkdir()
    for lib in runtime_libraries():
        shutil.copy2(lib, out / "lib" / lib.name)
    if wheel_dir is not None:
        tag = "cp" + python_version.replace(".", "")
        wheels = [w for w in Path(wheel_dir).glob(f"apache_tvm_ffi-{version}-*.whl") if f"-{tag}-" in w.name
                  or "-py3-none-" in w.name or "abi3" in w.name]
        if not wheels:
            raise RuntimeError(f"no apache_tvm_ffi-{version} wheel for Python {python_version} in {wheel_dir}")
        shutil.copy2(wheels[0], out / "wheels" / wheels[0].name)
    else:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--only-binary=:all:",
               "--python-version", python_version, "--implementation", "cp",
               *[a for p in PLATFORMS for a in ("--platform", p)], "-d", str(out / "wheels"),
               f"apache-tvm-ffi=={version}"]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode != 0 or not list((out / "wheels").glob("*.whl")):
            raise RuntimeError(f"pip could not download apache-tvm-ffi=={version} for Python "
                               f"{python_version}:\n{proc.stderr[-2000:]}")
    (out / "env.sh").write_text(ENV_SH)
    return out


def bundle_size(out: Path) -> int:
    return sum(p.stat().st_size for p in Path(out).rglob("*") if p.is_file())
