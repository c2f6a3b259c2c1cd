"""Stand-ins for the GPU in unit tests: no GPU at all, or a Python function run on CPU tensors
through the real check and replay paths; and the fixtures that the harness's tests share
(import them by name: ``from gpu_stubs import no_gpu, vadd``)."""

from __future__ import annotations

from typing import Any, Callable

import pytest

import gpubook as gb
import kernels
from gpubook import runtime
from gpubook.compile import toolchain


def pretend_no_gpu(monkeypatch: Any) -> None:
    """Pretend, on any machine, that no GPU is present, with no strict mode and no export."""
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)
    monkeypatch.delenv("GPUBOOK_EXPORT_DIR", raising=False)


def fake_gpu(monkeypatch: Any, body: Callable[..., Any]) -> None:
    """Launches run `body` on CPU tensors through the real check and replay paths, on a
    pretended H200 (sm_90a)."""
    monkeypatch.setattr(toolchain, "local_arch", lambda: "sm_90a")
    monkeypatch.setattr(runtime, "local_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    monkeypatch.setattr(runtime, "synchronize", lambda: None)
    monkeypatch.setattr(gb.Kernel, "export", lambda self, arch, path=None: "unused.so")
    monkeypatch.setattr(runtime, "load",
                        lambda so, name, params, arch: runtime.Launcher(body, name, params, arch))


@pytest.fixture(autouse=True)
def no_gpu(monkeypatch: Any) -> None:
    """Every test of a module that imports this runs as if no GPU were present, unless it
    says otherwise (``fake_gpu``)."""
    pretend_no_gpu(monkeypatch)


@pytest.fixture(scope="module")
def vadd() -> Any:
    """tests/kernels.py's vadd, built once per module."""
    return gb.build(kernels.vadd, name="vadd")
