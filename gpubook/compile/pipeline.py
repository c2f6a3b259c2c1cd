"""One run of the TIRx pipeline per kernel and arch (the lowered modules for the static facts and
the executable from the same run), and why a Hopper-only kernel has no sm_100a build."""

from __future__ import annotations

import re
from typing import Any

from . import report, toolchain

BLACKWELL = "sm_100a"  # the book's target (gb.BLACKWELL)


def target(arch: str) -> Any:
    """A CUDA target for an explicit arch (a bare 'cuda' target would guess without a GPU)."""
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": arch})


def lower(func: Any, arch: str) -> tuple[Any, Any]:
    """Run the TIRx pipeline: (host IRModule, device IRModule) for `arch`."""
    host, device, _ = _lower_and_compile(func, arch, compile=False)
    return host, device


def _lower_and_compile(func: Any, arch: str, compile: bool = True) -> tuple[Any, Any, Any]:
    """(host IRModule, device IRModule, executable) for `arch` from one run of the TIRx pipeline:
    what `tvm.compile(..., tir_pipeline="tirx")` does (tvm.tirx.build), with the lowered modules
    kept for the static facts instead of lowering the kernel a second time for them. The
    executable is None when `compile` is False."""
    import tvm
    from tvm.runtime import Executable
    from tvm.tirx.build import split_host_device_mods, tir_to_runtime

    tgt = target(arch)
    host_target = tvm.target.Target("llvm")
    mod = tvm.IRModule({"main": func})
    mod = tvm.tirx.transform.BindTarget(tgt.with_host(host_target))(mod)
    pipeline, finalize_host, finalize_device = tvm.tirx.get_tir_pipeline("tirx")
    mod = pipeline(mod)
    host, devices = split_host_device_mods(mod)
    device = next(iter(devices.values()))
    if not compile:
        return host, device, None
    toolchain.install_tvm_callback()
    lib = tir_to_runtime(finalize_host()(host), {t: finalize_device()(d) for t, d in devices.items()},
                         host_target)
    return host, device, Executable(lib)


# The Hopper-only instructions that take no operands: one of them, alone in a program, is
# refused by ptxas for sm_100a with the message the whole kernel would get.
_HOPPER_ALONE = re.compile(r"wgmma\.(fence|commit_group)\.sync\.aligned|wgmma\.wait_group\.sync\.aligned \d+")


def hopper_refusal(ptx: str, using: str) -> Exception | None:
    """Why a kernel does not build for sm_100a, from its sm_90a PTX alone: ptxas stops at the
    first instruction it refuses, so when the kernel's first Hopper-only instruction (wgmma.*)
    takes no operands, that instruction alone is assembled for sm_100a and its refusal is the
    kernel's (the same first error line, tested), without lowering and compiling the whole
    kernel a second time. None when there is no such instruction, or when it is not refused:
    then the kernel itself is tried."""
    first = next((i for i in report.ptx_instructions(ptx) if i.startswith("wgmma.")), None)
    if first is None or not _HOPPER_ALONE.fullmatch(first):
        return None
    probe = f'extern "C" __global__ void hopper_only_probe() {{ asm volatile("{first};"); }}\n'
    try:
        toolchain.compile_both(probe, BLACKWELL, using)  # once per instruction and process
    except RuntimeError as exc:
        return exc
    return None
