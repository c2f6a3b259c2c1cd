"""Run a kernel on seeded inputs and compare it with a PyTorch reference, or say why it did not run."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any, Callable, Sequence

from . import runtime
from .signature import validate

STRICT_ENV = "GPUBOOK_STRICT"

# (rtol, atol) by output dtype: torch.testing's defaults, which chapters may widen with reason.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


class CheckError(AssertionError):
    """A kernel's output differs from the reference beyond tolerance."""


class NotRunError(RuntimeError):
    """Strict mode: a check could not run on this machine."""


@dataclass
class CheckResult:
    """What a check established: passed on a GPU, or compiled but not run (and why)."""

    kernel: str
    status: str  # "passed" or "not run"
    arch: str | None = None
    gpu: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    reason: str | None = None
    facts: str = ""

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def __repr__(self) -> str:
        if self.passed:
            return (
                f"PASS {self.kernel} on {self.gpu} ({self.arch}): max abs error "
                f"{self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g}"
            )
        return f"NOT RUN {self.kernel}: {self.reason}\n  static facts: {self.facts}"


def seeded(shape: Sequence[int], dtype: str = "float32", seed: int = 0, kind: str = "randn") -> Any:
    """A CPU tensor of reproducible values: 'randn', 'uniform' in [-1, 1), 'arange' or 'randint'."""
    import torch

    g = torch.Generator().manual_seed(seed)
    dt = getattr(torch, dtype)
    if kind == "arange":
        n = 1
        for s in shape:
            n *= s
        return torch.arange(n, dtype=torch.float64).reshape(tuple(shape)).to(dt)
    if kind == "randint":
        return torch.randint(-8, 8, tuple(shape), generator=g).to(dt)
    if kind == "uniform":
        return (torch.rand(tuple(shape), generator=g, dtype=torch.float64) * 2 - 1).to(dt)
    return torch.randn(tuple(shape), generator=g, dtype=torch.float64).to(dt)


def tolerance(dtype: str, rtol: float | None = None, atol: float | None = None) -> tuple[float, float]:
    """(rtol, atol) for comparing an output of `dtype`; explicit values win."""
    base = TOLERANCES.get(dtype, (0.0, 0.0))  # integer outputs must match exactly
    return (base[0] if rtol is None else rtol, base[1] if atol is None else atol)


def compare(name: str, out: Any, expected: Any, rtol: float, atol: float) -> tuple[float, float]:
    """Raise CheckError unless |out - expected| <= atol + rtol*|expected| everywhere (NaN fails).

    Returns (max abs error, max rel error). Works on CPU tensors.
    """
    import torch

    o = out.detach().to("cpu", torch.float64)
    e = expected.detach().to("cpu", torch.float64)
    if o.shape != e.shape:
        raise CheckError(f"{name}: output shape {tuple(o.shape)} != reference shape {tuple(e.shape)}")
    diff = (o - e).abs()
    bad = ~(diff <= atol + rtol * e.abs())  # NaN in either side lands here
    abs_err = float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0
    rel = diff / e.abs().clamp_min(1e-30)
    rel_err = float(torch.nan_to_num(rel, nan=float("inf")).max()) if rel.numel() else 0.0
    if bool(bad.any()):
        idx = bad.nonzero()[:5].tolist()
        shown = "; ".join(
            f"{tuple(i)}: got {o[tuple(i)].item():.6g}, expected {e[tuple(i)].item():.6g}" for i in idx
        )
        raise CheckError(
            f"{name}: {int(bad.sum())} of {bad.numel()} elements differ from the reference "
            f"(rtol={rtol:g}, atol={atol:g}); max abs error {abs_err:.6g}.\n"
            f"  first mismatches: {shown}"
        )
    return abs_err, rel_err


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0", "false", "no")


def _poison(t: Any) -> None:
    if t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(-0x5A5A5A5A if t.element_size() >= 4 else -0x5A)


def check(
    kernel: Any,
    args: Sequence[Any],
    ref: Callable[..., Any],
    outputs: Sequence[int] = (-1,),
    rtol: float | None = None,
    atol: float | None = None,
    name: str | None = None,
    stress: int = 0,
) -> CheckResult:
    """Compare `kernel(*args)` with `ref(*args)` on the GPU, or report that it could not run.

    `args` are CPU tensors in the kernel's parameter order (outputs included: their contents
    are overwritten); `ref` takes the same tensors and returns the expected output(s), one per
    index in `outputs`. Raises CheckError on a mismatch, KernelCallError on a bad call.
    """
    import torch

    name = name or kernel.name
    validate(name, kernel.params, args, device=None)
    outputs = [i % len(args) for i in outputs]
    with torch.no_grad():
        expected = ref(*[a.clone() for a in args])
    if not isinstance(expected, (tuple, list)):
        expected = [expected]
    if len(expected) != len(outputs):
        raise ValueError(f"{name}: ref returned {len(expected)} tensors for {len(outputs)} outputs")
    tols = [tolerance(kernel.params[i].dtype, rtol, atol) for i in outputs]
    from . import export

    export.record_check(kernel, name, args, expected, outputs, tols, stress=stress)

    why = runtime.why_not_here(kernel.runs_on)
    if why is not None:
        need = " or ".join(kernel.runs_on)
        result = CheckResult(
            name, "not run", reason=f"compiled for {need} — not run: {why}", facts=kernel.summary()
        )
        if strict():
            raise NotRunError(f"{STRICT_ENV} is set and {name} did not run: {result.reason}")
        return result
    arch = runtime.local_arch()
    launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
    abs_err, rel_err = run_and_compare(launcher, [a.to(runtime.DEVICE) for a in args],
                                       outputs, expected, tols)
    return CheckResult(name, "passed", arch=arch, gpu=runtime.local_gpu_name(),
                       max_abs_error=abs_err, max_rel_error=rel_err)


def run_and_compare(launcher: Any, args: Sequence[Any], outputs: Sequence[int],
                    expected: Sequence[Any], tols: Sequence[Sequence[float]]) -> tuple[float, float]:
    """Poison the outputs, launch, wait, compare each output; (max abs, max rel) or CheckError."""
    for i in outputs:
        _poison(args[i])
    launcher(*args)
    runtime.synchronize()
    errs = [compare(launcher.name, args[i], e, t[0], t[1]) for i, e, t in zip(outputs, expected, tols)]
    return max(e[0] for e in errs), max(e[1] for e in errs)
