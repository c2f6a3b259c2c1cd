"""Compile a TIRx PrimFunc for an explicit arch, without a GPU, and keep its static facts."""

from __future__ import annotations

import html
import os
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from . import report, toolchain
from .signature import Param, params_of

BLACKWELL = "sm_100a"
HOPPER = "sm_90a"
# cuobjdump's SHARED figure includes 1 KB per CTA that the system reserves (CUDA C++
# Programming Guide, shared memory of compute capability 8.0+); ptxas -v leaves it out.
SYSTEM_SMEM_RESERVE = 1024


def target(arch: str) -> Any:
    """A CUDA target for an explicit arch (a bare 'cuda' target would guess without a GPU)."""
    import tvm

    return tvm.target.Target({"kind": "cuda", "arch": arch})


def lower(func: Any, arch: str) -> tuple[Any, Any]:
    """Run the TIRx pipeline: (host IRModule, device IRModule) for `arch`."""
    import tvm
    from tvm.tirx.build import split_host_device_mods

    tgt = target(arch)
    mod = tvm.IRModule({"main": func})
    with tgt:
        mod = tvm.tirx.transform.BindTarget(tgt.with_host("llvm"))(mod)
        pipeline, _, _ = tvm.tirx.get_tir_pipeline("tirx")
        mod = pipeline(mod)
    host, devices = split_host_device_mods(mod)
    return host, next(iter(devices.values()))


@dataclass
class Kernel:
    """A TIRx kernel compiled for sm_100a (and for sm_90a when it uses no Blackwell-only PTX)."""

    name: str
    func: Any
    params: list[Param]
    arch: str
    runs_on: tuple[str, ...]
    compiler: str
    source: str
    ptx: str
    cubin: bytes
    sass: str
    resources: dict[str, int]
    launches: list[report.Launch]
    ptx_counts: dict[str, int]
    sass_counts: dict[str, int]
    compile_seconds: float
    highlight: tuple[str, ...] = ()
    not_built: dict[str, str] = field(default_factory=dict)  # arch -> why it has no build
    _executables: dict[str, Any] = field(default_factory=dict, repr=False)
    _exported: dict[str, str] = field(default_factory=dict, repr=False)

    # -- static facts -------------------------------------------------------------------
    @property
    def registers(self) -> int:
        return self.resources.get("REG", 0)

    @property
    def reserved_smem(self) -> int:
        """Shared memory the system reserves per CTA (1 KB on sm_80 and later) once any is used."""
        return SYSTEM_SMEM_RESERVE if self.resources.get("SHARED", 0) >= SYSTEM_SMEM_RESERVE else 0

    @property
    def static_smem(self) -> int:
        """Statically declared shared memory (the cubin's figure less the system reserve)."""
        return self.resources.get("SHARED", 0) - self.reserved_smem

    @property
    def dynamic_smem(self) -> int:
        return max((la.dyn_smem for la in self.launches), default=0)

    @property
    def local_bytes(self) -> int:
        return self.resources.get("LOCAL", 0)

    @property
    def spill_instructions(self) -> int:
        """Local-memory loads and stores in the SASS (spills and stack arrays)."""
        return self.sass_counts.get("LDL", 0) + self.sass_counts.get("STL", 0)

    @property
    def fingerprint(self) -> str:
        """A short hash of the kernel's TIRx script: results recorded for it name this hash."""
        import hashlib

        return hashlib.sha256(self.script().encode()).hexdigest()[:16]

    def script(self) -> str:
        """The TIRx script of the kernel as it was compiled."""
        return self.func.script()

    def facts(self) -> dict[str, Any]:
        """The static facts as plain data (what the report shows and export records)."""
        return {
            "name": self.name, "arch": self.arch, "runs_on": list(self.runs_on),
            "compiler": self.compiler, "registers": self.registers,
            "static_smem": self.static_smem, "dynamic_smem": self.dynamic_smem,
            "reserved_smem": self.reserved_smem,
            "local_bytes": self.local_bytes, "spill_instructions": self.spill_instructions,
            "launch": [la.describe() for la in self.launches],
            "ptx_counts": {k: v for k, v in self.ptx_counts.items() if v},
            "compile_seconds": round(self.compile_seconds, 3),
            "not_built": dict(self.not_built),
        }

    def summary(self) -> str:
        """One line: arch, registers, shared memory, spills."""
        also = [a for a in self.runs_on if a != self.arch]
        extra = f" (+{', '.join(also)})" if also else " only"
        for arch, why in self.not_built.items():
            extra += f"; no {arch} build: {why}"
        spill = "no spills" if self.spill_instructions == 0 else f"{self.spill_instructions} local ld/st"
        reserve = f" (+{self.reserved_smem} B system)" if self.reserved_smem else ""
        return (
            f"{self.name}: compiled for {self.arch}{extra} · {self.registers} regs · smem "
            f"{self.static_smem} B static + {self.dynamic_smem} B dynamic{reserve} · local "
            f"{self.local_bytes} B, {spill}"
        )

    def _count_line(self) -> str:
        keys = [k for k, v in self.ptx_counts.items() if v or k in self.highlight]
        return " · ".join(f"{k} {self.ptx_counts[k]}" for k in keys) or "no counted instructions"

    def __repr__(self) -> str:
        launch = "; ".join(la.describe() for la in self.launches)
        return (
            f"{self.summary()}\n  launch: {launch}\n  PTX (static counts): {self._count_line()}"
            f"\n  {self.compiler} {self.compile_seconds:.2f} s"
        )

    def _repr_html_(self) -> str:
        rows = self.__repr__().split("\n")
        body = "<br>".join(html.escape(r.strip()) for r in rows)
        runs = " ".join(self.runs_on)
        return (f'<div class="gpubook-report" data-kernel="{html.escape(self.name)}" '
                f'data-runs-on="{runs}"><code>{body}</code></div>')

    # -- what runs ----------------------------------------------------------------------
    def executable(self, arch: str) -> Any:
        """The tvm.compile result lowered for `arch` (one of runs_on)."""
        if arch not in self.runs_on:
            raise ValueError(f"{self.name} does not run on {arch}: it runs on {self.runs_on}")
        if arch not in self._executables:
            self._executables[arch] = _compile(self.func, arch)
        return self._executables[arch]

    def export(self, arch: str, path: str | None = None) -> str:
        """Write the module lowered for `arch` as a shared library carrying its CUDA source."""
        if path is None and arch in self._exported and os.path.exists(self._exported[arch]):
            return self._exported[arch]
        if path is None:
            path = os.path.join(tempfile.mkdtemp(prefix="gpubook-"), f"{self.name}-{arch}.so")
        self.executable(arch).export_library(path)
        self._exported.setdefault(arch, path)
        return path


def build(func: Any, name: str | None = None, highlight: tuple[str, ...] = (),
          archs: tuple[str, ...] | None = None) -> Kernel:
    """Lower and compile a TIRx PrimFunc for sm_100a (and sm_90a when portable); no GPU needed.

    `highlight` names PTX counts the report shows even when zero (e.g. ("tcgen05.mma",)).
    `archs=(HOPPER,)` builds for sm_90a only (wgmma kernels, which sm_100a does not have).
    """
    t0 = time.perf_counter()
    if name is None:
        attrs = func.attrs
        name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "kernel"
    if archs is not None and tuple(archs) != (BLACKWELL,):
        if tuple(archs) != (HOPPER,):
            raise ValueError(f"archs must be (BLACKWELL,) or (HOPPER,), not {archs!r}")
        return _build_hopper_only(func, name, highlight, t0)
    host, _ = lower(func, BLACKWELL)
    executables = {BLACKWELL: _compile(func, BLACKWELL), HOPPER: _compile(func, HOPPER)}
    src = executables[BLACKWELL].mod.imports[0].inspect_source()
    hopper_src = executables[HOPPER].mod.imports[0].inspect_source()
    using = toolchain.compiler()
    with ThreadPoolExecutor(max_workers=3) as pool:
        ptx_job = pool.submit(toolchain.compile_source, src, BLACKWELL, "ptx", using)
        cubin_job = pool.submit(toolchain.compile_source, src, BLACKWELL, "cubin", using)
        # Compiled alongside, and required to pass when the kernel claims to be portable.
        hopper_job = pool.submit(toolchain.compile_source, hopper_src, HOPPER, "cubin", using)
        ptx = ptx_job.result().decode(errors="replace").rstrip("\x00")
        cubin = cubin_job.result()
        hopper_error = hopper_job.exception()
    runs_on: tuple[str, ...] = (BLACKWELL,)
    if report.BLACKWELL_ONLY.search(ptx):
        del executables[HOPPER]
    else:
        if hopper_error is not None:  # the Hopper claim is proven at build time, or the build fails
            raise hopper_error
        runs_on = (BLACKWELL, HOPPER)
        local = _local_arch()
        if local is not None and local not in runs_on:
            # A portable kernel may also run on the GPU at hand (e.g. an sm_120a card) if it
            # lowers and assembles for that arch; kernels needing clusters or TMA will not.
            try:
                executables[local] = _compile(func, local)
                toolchain.compile_source(executables[local].mod.imports[0].inspect_source(),
                                         local, "cubin", using)
                runs_on = (BLACKWELL, HOPPER, local)
            except Exception:  # noqa: BLE001 - any failure just means "does not run here"
                executables.pop(local, None)
    sass = toolchain.cuobjdump(cubin, "-sass")
    usage = report.parse_resource_usage(toolchain.cuobjdump(cubin, "--dump-resource-usage"))
    resources: dict[str, int] = {}
    for per_kernel in usage.values():
        for k, v in per_kernel.items():
            resources[k] = max(resources.get(k, 0), v)
    return Kernel(
        name=name, func=func, params=params_of(func), arch=BLACKWELL, runs_on=runs_on,
        compiler=using, source=src, ptx=ptx, cubin=cubin, sass=sass, resources=resources,
        launches=report.parse_launches(host.script()), ptx_counts=report.count_ptx(ptx),
        sass_counts=report.count_sass(sass), compile_seconds=time.perf_counter() - t0,
        highlight=tuple(highlight), _executables=executables,
    )


def _build_hopper_only(func: Any, name: str, highlight: tuple[str, ...], t0: float) -> Kernel:
    """A kernel for sm_90a alone; records why sm_100a has no build (ptxas's refusal)."""
    host, _ = lower(func, HOPPER)
    executables = {HOPPER: _compile(func, HOPPER)}
    src = executables[HOPPER].mod.imports[0].inspect_source()
    using = toolchain.compiler()
    with ThreadPoolExecutor(max_workers=3) as pool:
        ptx_job = pool.submit(toolchain.compile_source, src, HOPPER, "ptx", using)
        cubin_job = pool.submit(toolchain.compile_source, src, HOPPER, "cubin", using)
        bw_src = _compile(func, BLACKWELL).mod.imports[0].inspect_source()
        bw_job = pool.submit(toolchain.compile_source, bw_src, BLACKWELL, "cubin", using)
        ptx = ptx_job.result().decode(errors="replace").rstrip("\x00")
        cubin = cubin_job.result()
        bw_error = bw_job.exception()
    if bw_error is None:
        raise ValueError(f"{name} also compiles for {BLACKWELL}: build it for both archs")
    refusal = next((ln.strip() for ln in str(bw_error).splitlines() if "not supported on .target" in ln),
                   str(bw_error).strip().splitlines()[-1])
    refusal = refusal.split("error   : ")[-1]
    sass = toolchain.cuobjdump(cubin, "-sass")
    usage = report.parse_resource_usage(toolchain.cuobjdump(cubin, "--dump-resource-usage"))
    resources: dict[str, int] = {}
    for per_kernel in usage.values():
        for k, v in per_kernel.items():
            resources[k] = max(resources.get(k, 0), v)
    return Kernel(
        name=name, func=func, params=params_of(func), arch=HOPPER, runs_on=(HOPPER,),
        compiler=using, source=src, ptx=ptx, cubin=cubin, sass=sass, resources=resources,
        launches=report.parse_launches(host.script()), ptx_counts=report.count_ptx(ptx),
        sass_counts=report.count_sass(sass), compile_seconds=time.perf_counter() - t0,
        highlight=tuple(highlight), not_built={BLACKWELL: f"ptxas: {refusal}"},
        _executables=executables,
    )


def _local_arch() -> str | None:
    from .runtime import local_arch

    return local_arch()


def _compile(func: Any, arch: str) -> Any:
    import tvm

    return tvm.compile(tvm.IRModule({"main": func}), target=target(arch), tir_pipeline="tirx")
