"""The runtime bundle for a GPU host without apache-tvm: the libraries, the wheel, env.sh."""

from __future__ import annotations

import importlib.metadata as md
import subprocess
import sys
import zipfile

from gpubook import pack


def test_the_bundle_holds_the_runtime_the_wheel_and_an_env_script(tmp_path):
    version = md.version("apache-tvm-ffi")
    out = subprocess.run([sys.executable, "-m", "gpubook", "pack-runtime", str(tmp_path / "rt"), "--python",
                          f"{sys.version_info.major}.{sys.version_info.minor}"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    rt = tmp_path / "rt"
    libs = sorted(p.name for p in (rt / "lib").iterdir())
    assert "libtvm_runtime.so" in libs and libs == sorted(p.name for p in pack.runtime_libraries())
    (wheel,) = (rt / "wheels").glob("*.whl")
    assert wheel.name.startswith(f"apache_tvm_ffi-{version}-")
    assert any(n.startswith("tvm_ffi/") for n in zipfile.ZipFile(wheel).namelist())
    env = (rt / "env.sh").read_text()
    assert "TVM_LIBRARY_PATH=\"$_here/lib\"" in env and "--no-index" in env
    # env.sh installs the wheel and points Python at it: tvm_ffi imports from there alone
    probe = subprocess.run(["bash", "-c", f"source {rt}/env.sh && python3 -c 'import tvm_ffi, os; "
                            f"print(tvm_ffi.__file__, os.environ[\"TVM_LIBRARY_PATH\"])'"],
                           capture_output=True, text=True, env={"PATH": f"{sys.prefix}/bin:/usr/bin:/bin",
                                                                 "HOME": str(tmp_path)})
    assert probe.returncode == 0, probe.stderr
    assert probe.stdout.split() == ["/tmp/gpubook-site/tvm_ffi/__init__.py", str(rt / "lib")]
    assert "holds" in out.stdout and "env.sh" in out.stdout


def test_the_package_imports_without_sphinx_as_on_a_gpu_host():
    """A GPU host that replays cases has PyTorch and the TVM runtime, not Sphinx or docutils."""
    import subprocess
    import sys

    code = ("import sys\nfor m in ('sphinx', 'docutils', 'myst_nb', 'matplotlib.backends.backend_agg'):\n"
            "    sys.modules[m] = None\n"
            "import gpubook, gpubook.verify.replay, gpubook.run.bench\n"
            "assert 'sphinx' not in [k for k, v in sys.modules.items() if v is not None]\n")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
