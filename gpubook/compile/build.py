"""Compile a TIRx PrimFunc for an explicit arch, without a GPU, and keep its static facts."""

from __future__ import annotations

import html
import os
import tempfile
import time
from dataclasses import dataclass, field
from typing import Any

from . import hooks, lint, report, toolchain, txbytes
from .pipeline import BLACKWELL, _lower_and_compile, hopper_refusal, lower, target  # noqa: F401 - gb.lower, gb.target
from .signature import Param, params_of

HOPPER = "sm_90a"
# cuobjdump's SHARED figure includes 1 KB per CTA that the system reserves (CUDA C++
# Programming Guide, shared memory of compute capability 8.0+); ptxas -v leaves it out.
SYSTEM_SMEM_RESERVE = 1024


@dataclass
class Kernel:
    """A TIRx kernel compiled for sm_100a (and for sm_90a when it uses no Blackwell-only PTX),
    or for sm_90a only (a Hopper `wgmma` kernel, which ptxas refuses for sm_100a).

    `arch` is the primary build (sm_100a, else sm_90a): `ptx`, `cubin`, `sass` and every
    static fact come from it. `not_built` maps each arch without a build to the reason.
    """

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
    lint_breaks: tuple[str, ...] = ()  # the ordering rules its PTX breaks, each declared with breaks=
    expect_tx: dict[str, Any] = field(default_factory=dict)  # txbytes.analyze's record ({}: none)
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
            "compile_seconds": round(self.compile_seconds, 3), "lint": lint.verdict(self.ptx, self.lint_breaks),
            "not_built": dict(self.not_built), "expect_tx": txbytes.summary(self.expect_tx),
        }

    def summary(self) -> str:
        """One line: arch, registers, shared memory, spills."""
        also = [a for a in self.runs_on if a != self.arch]
        extra = f" (+{', '.join(also)})" if also else " only"
        spill = "no spills" if self.spill_instructions == 0 else f"{self.spill_instructions} local ld/st"
        if BLACKWELL in self.not_built:  # the book's target is missing: say why in the same line
            extra += f" (sm_100a: not built — {self.not_built[BLACKWELL]})"
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
        missing = "".join(f"\n  {a}: not built — {why}" for a, why in self.not_built.items()
                          if a != BLACKWELL)
        return (
            f"{self.summary()}\n  launch: {launch}\n  PTX (static counts): {self._count_line()}"
            f"{missing}{txbytes.report_line(self.expect_tx)}\n  {self.compiler} {self.compile_seconds:.2f} s"
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
          archs: tuple[str, ...] | None = None, expect_tx_mismatch: bool = False, breaks: tuple[str, ...] = ()) -> Kernel:
    """Lower, check every expect_tx (`txbytes.enforced`), compile, lint (exactly `breaks`, `lint.enforced`).

    `highlight` names PTX counts the report shows even when zero (e.g. ("tcgen05.mma",)).
    `archs` picks the targets: None builds sm_100a, plus sm_90a when the PTX uses no
    Blackwell-only feature; `(HOPPER,)` builds sm_90a only, for kernels (`wgmma`) that ptxas
    refuses for sm_100a: the refusal is tried, and its first error line kept as the reason
    (`Kernel.not_built`); `(BLACKWELL,)` skips the sm_90a build of a portable kernel.

    Every call compiles, unless `GPUBOOK_KERNEL_CACHE` names a build cache (see `kernel_cache`).
    """
    if name is None:
        attrs = func.attrs
        name = str(attrs["global_symbol"]) if attrs is not None and "global_symbol" in attrs else "kernel"
    want = _requested(archs)
    cache = kernel_cache(func, want)
    cached = cache.load(func, name, highlight) if cache is not None and cache.mode in ("read", "update") else None
    kernel = lint.enforced(txbytes.enforced(cached or _build(func, name, highlight, archs, want),
                                            planted=expect_tx_mismatch), breaks)
    if cached is None and cache is not None and cache.mode in ("write", "update"):
        cache.store(kernel)
    return hooks.built(kernel)  # every build, a cached one too, goes to the listeners (the manifest)


def _build(func: Any, name: str, highlight: tuple[str, ...], archs: tuple[str, ...] | None,
           want: tuple[str, ...]) -> Kernel:
    t0 = time.perf_counter()
    primary = BLACKWELL if BLACKWELL in want else HOPPER
    other = HOPPER if primary == BLACKWELL else BLACKWELL
    host, device, executable = _lower_and_compile(func, primary)
    executables = {primary: executable}
    src = executables[primary].mod.imports[0].inspect_source()
    using = toolchain.compiler()
    try:
        ptx_bytes, cubin = toolchain.compile_both(src, primary, using)
    except RuntimeError as exc:
        if primary == BLACKWELL and archs is None:
            raise RuntimeError(
                f"{name} does not build for {BLACKWELL}: {toolchain.first_error(str(exc))}. "
                f"A Hopper-only kernel (wgmma) builds with archs=(gb.HOPPER,).\n{exc}"
            ) from None
        raise
    ptx = ptx_bytes.decode(errors="replace").rstrip("\x00")

    def other_build() -> Exception | None:
        """Lower and assemble for the other arch; the exception that refused it, if any."""
        try:
            executables[other] = _compile(func, other)
            toolchain.compile_both(executables[other].mod.imports[0].inspect_source(), other, using)
        except Exception as exc:  # noqa: BLE001 - recorded as the reason the other arch has no build
            executables.pop(other, None)
            return exc
        return None

    runs_on: tuple[str, ...] = (primary,)
    not_built: dict[str, str] = {}
    if primary == HOPPER:
        # A Hopper-only kernel: its refusal for Blackwell is the recorded reason.
        other_error = hopper_refusal(ptx, using) or other_build()
        if other_error is None:
            raise ValueError(
                f"{name} assembles for {BLACKWELL} too: every kernel that can must build for "
                f"{BLACKWELL}; drop archs={tuple(want)!r}"
            )
        not_built[BLACKWELL] = toolchain.first_error(str(other_error))
    else:
        features = report.blackwell_only_features(ptx)
        if features:
            # No Hopper build is tried: the PTX itself says why there is none.
            if HOPPER in want and archs is not None:
                raise ValueError(f"{name} cannot build for {HOPPER}: it uses {', '.join(features)}")
            not_built[HOPPER] = "Blackwell-only PTX: " + ", ".join(features)
        elif HOPPER not in want:
            not_built[HOPPER] = f"not requested (archs={tuple(want)!r})"
        else:
            other_error = other_build()
            if other_error is not None:  # the Hopper claim is proven at build time, or the build fails
                raise other_error
            runs_on = (BLACKWELL, HOPPER)
            local = _local_arch()
            if local is not None and local not in runs_on:
                # A portable kernel may also run on the GPU at hand (e.g. an sm_120a card) if it
                # lowers and assembles for that arch; kernels needing clusters or TMA will not.
                try:
                    executables[local] = _compile(func, local)
                    toolchain.compile_both(executables[local].mod.imports[0].inspect_source(), local, using)
                    runs_on = (BLACKWELL, HOPPER, local)
                except Exception:  # noqa: BLE001 - any failure just means "does not run here"
                    executables.pop(local, None)
    dump = toolchain.cuobjdump(cubin, "--dump-resource-usage", "-sass")  # one run, both listings
    usage = report.parse_resource_usage(dump)
    sass = dump[dump.find("\tcode for"):] if "\tcode for" in dump else dump
    resources: dict[str, int] = {}
    for per_kernel in usage.values():
        for k, v in per_kernel.items():
            resources[k] = max(resources.get(k, 0), v)
    return Kernel(
        name=name, func=func, params=params_of(func), arch=primary, runs_on=runs_on,
        compiler=using, source=src, ptx=ptx, cubin=cubin, sass=sass, resources=resources,
        launches=report.parse_launches(host.script()), ptx_counts=report.count_ptx(ptx),
        sass_counts=report.count_sass(sass), compile_seconds=time.perf_counter() - t0,
        highlight=tuple(highlight), not_built=not_built, _executables=executables,
        expect_tx=txbytes.analyze(host, device),  # each expect_tx against the copies on its barrier
    )


# -- a build cache for test runs -------------------------------------------------------------
CACHE_ENV = "GPUBOOK_KERNEL_CACHE"            # a folder
CACHE_MODE_ENV = "GPUBOOK_KERNEL_CACHE_MODE"  # "write", "read" or "update"
# What a cached build keeps: everything but the call's own name, function and highlight
# (lowered modules are recompiled on demand by Kernel.executable).
_CACHED_FIELDS = ("arch", "runs_on", "compiler", "source", "ptx", "cubin", "sass", "resources",
                  "launches", "ptx_counts", "sass_counts", "compile_seconds", "not_built", "expect_tx")
_SOURCES = ("build.py", "pipeline.py", "report.py", "toolchain.py", "signature.py", "mbarrier.py", "tmem.py", *txbytes.SOURCES)
_DISTRIBUTIONS = ("apache-tvm", "apache-tvm-ffi", "cuda-bindings", "nvidia-cuda-nvrtc",
                  "nvidia-cuda-runtime", "nvidia-cuda-cccl", "nvidia-cuda-cuobjdump")


@dataclass
class KernelCache:
    """One build's entry in a build cache: written by one execution of a chapter, read by a
    later one (the notebooks test of the same run; the next local build of the book)."""

    path: Any  # pathlib.Path of the entry
    mode: str

    def load(self, func: Any, name: str, highlight: tuple[str, ...]) -> Kernel | None:
        import pickle

        try:
            data = pickle.loads(self.path.read_bytes())
        except Exception:  # noqa: BLE001 - an entry that cannot be read (torn, or of another layout) is a miss
            return None
        return Kernel(name=name, func=func, params=params_of(func), highlight=tuple(highlight), **data)

    def store(self, kernel: Kernel) -> None:
        import pickle

        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(f".{os.getpid()}.tmp")
        tmp.write_bytes(pickle.dumps({k: getattr(kernel, k) for k in _CACHED_FIELDS}))
        os.replace(tmp, self.path)


def kernel_cache(func: Any, want: tuple[str, ...]) -> KernelCache | None:
    """The cache entry of this build when `GPUBOOK_KERNEL_CACHE` names a folder, else None.

    Modes (`GPUBOOK_KERNEL_CACHE_MODE`): "write" compiles every kernel and stores it (a test
    run's book build); "read" takes stored builds and compiles what is missing without storing
    it (the notebooks test of the same run); "update" does both (a local build of the book:
    conf.py turns it on in `.kernel_cache/` unless GPUBOOK_EXECUTION=force, so that a chapter
    re-executed after a change compiles only the kernels whose script changed). An entry is
    keyed by the kernel's TIRx script, the archs asked for, the compiler, the local GPU's arch,
    the versions of TVM and the CUDA wheels, and the sources of the gpubook modules that shape
    a build; every cell still runs.
    """
    folder = os.environ.get(CACHE_ENV)
    mode = os.environ.get(CACHE_MODE_ENV, "")
    if not folder:
        return None
    if mode not in ("read", "write", "update"):
        raise ValueError(f"{CACHE_MODE_ENV} must be 'read', 'write' or 'update' when {CACHE_ENV} is set, "
                         f"not {mode!r}")
    import hashlib
    import json
    from pathlib import Path

    key = json.dumps([func.script(), list(want), toolchain.compiler(), _local_arch(), _toolchain_digest()])
    return KernelCache(Path(folder) / f"{hashlib.sha256(key.encode()).hexdigest()}.pickle", mode)


_digest: list[str] = []


def _toolchain_digest() -> str:
    """What else a build depends on: gpubook's build modules and the installed toolchain."""
    if not _digest:
        import hashlib
        import importlib.metadata as md
        from pathlib import Path

        here = Path(__file__).resolve().parent
        h = hashlib.sha256()
        for src in _SOURCES:
            h.update((here / src).read_bytes())
        for dist in _DISTRIBUTIONS:
            try:
                h.update(f"{dist}=={md.version(dist)};".encode())
            except md.PackageNotFoundError:
                h.update(f"{dist} absent;".encode())
        _digest.append(h.hexdigest())
    return _digest[0]


def _requested(archs: tuple[str, ...] | None) -> tuple[str, ...]:
    """The archs a build asks for, checked: None means the default (sm_100a, + sm_90a if portable)."""
    if archs is None:
        return (BLACKWELL, HOPPER)
    if isinstance(archs, str):
        archs = (archs,)
    archs = tuple(archs)
    unknown = [a for a in archs if a not in (BLACKWELL, HOPPER)]
    if not archs or unknown or len(set(archs)) != len(archs):
        raise ValueError(f"archs must name {BLACKWELL} and/or {HOPPER} once each, got {archs!r}")
    return archs


def _local_arch() -> str | None:
    return toolchain.local_arch()


def _compile(func: Any, arch: str) -> Any:
    """The executable of `func` for `arch` (what tvm.compile returns)."""
    return _lower_and_compile(func, arch)[2]
