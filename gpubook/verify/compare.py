"""Inputs, the comparison of an output with its reference, and a run of a kernel compared: what
every check shares, in a notebook, a replay and a simulation."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, NamedTuple, Sequence

from ..compile.signature import PACKED
from ..run import guard, runtime
from .describe import describe_stress

# (rtol, atol) by output dtype: torch.testing's defaults, which chapters may widen with reason.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


class CheckError(AssertionError):
    """A kernel's output differs from the reference beyond tolerance.

    `stress` holds the stress record when the failure came from a stress run.
    """

    stress: dict[str, Any] | None = None


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


# The values of the 16 E2M1 codes (sign in bit 3): how a packed fp4 tensor is compared.
E2M1_VALUES = (0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0)
PACKED_DTYPES = tuple(torch_name for torch_name, _ in PACKED.values())  # PyTorch's sub-byte storage


def _is_packed(t: Any) -> bool:
    return str(t.dtype).removeprefix("torch.") in PACKED_DTYPES


def as_float64(t: Any, device: Any = "cpu") -> Any:
    """A float64 copy of `t` on `device`; a packed E2M1 tensor (M, K / 2) becomes its values
    (M, K), the element in the low four bits of each byte first."""
    import torch

    t = t.detach().to(device)
    if _is_packed(t):
        b = t.contiguous().view(torch.uint8).long()
        grid = torch.tensor(E2M1_VALUES, dtype=torch.float64, device=t.device)
        return torch.stack((grid[b & 0xF], grid[b >> 4]), dim=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])
    return t.to(torch.float64)


def from_bytes(param: Any, array: Any) -> Any:
    """A NumPy output as the tensor a GPU run leaves: one carried as bytes (float8, packed E2M1)
    becomes a tensor of the parameter's PyTorch dtype and shape (`param` None: as it is)."""
    import numpy as np
    import torch

    if param is None or array.dtype != np.uint8 or param.torch_dtype == "uint8":
        return torch.from_numpy(array)
    raw = torch.from_numpy(np.ascontiguousarray(array).reshape(-1).copy())
    return raw.view(getattr(torch, param.torch_dtype)).reshape(param.torch_shape)


class Errors(NamedTuple):
    """How far an output is from its reference: the largest absolute and relative differences,
    and the largest difference as a fraction of its element's whole allowance
    (|out - ref| / (atol + rtol |ref|), elementwise; 1 is the edge of the tolerance)."""

    max_abs_error: float
    max_rel_error: float
    max_error_over_allowed: float


def over_allowed(diff: Any, allowed: Any) -> float:
    """max(|err| / allowance) over the elements: 0 where an element matches exactly (even with a
    zero allowance), inf for a difference where nothing is allowed, or for NaN."""
    import torch

    if not diff.numel():
        return 0.0
    ratio = torch.where(diff == 0, torch.zeros_like(diff), diff / allowed)  # x / 0 = inf
    return float(torch.nan_to_num(ratio, nan=float("inf")).max())


def compare(name: str, out: Any, expected: Any, rtol: float, atol: float) -> Errors:
    """Raise CheckError unless |out - expected| <= atol + rtol*|expected| everywhere (NaN fails).

    Returns the Errors (max abs error, max rel error, max error over its allowance). Works on
    CPU tensors; packed E2M1 tensors compare by their values.
    """
    import torch

    o = as_float64(out)
    e = as_float64(expected)
    if o.shape != e.shape:
        raise CheckError(f"{name}: output shape {tuple(o.shape)} != reference shape {tuple(e.shape)}")
    diff = (o - e).abs()
    allowed = atol + rtol * e.abs()
    bad = ~(diff <= allowed)  # NaN in either side lands here
    abs_err = float(torch.nan_to_num(diff, nan=float("inf")).max()) if diff.numel() else 0.0
    rel = diff / e.abs().clamp_min(1e-30)
    rel_err = float(torch.nan_to_num(rel, nan=float("inf")).max()) if rel.numel() else 0.0
    frac = over_allowed(diff, allowed)
    if bool(bad.any()):
        idx = bad.nonzero()[:5].tolist()
        shown = "; ".join(
            f"{tuple(i)}: got {o[tuple(i)].item():.6g}, expected {e[tuple(i)].item():.6g}" for i in idx
        )
        raise CheckError(
            f"{name}: {int(bad.sum())} of {bad.numel()} elements differ from the reference "
            f"(rtol={rtol:g}, atol={atol:g}); max abs error {abs_err:.6g}; the worst element is "
            f"{frac:.3g} times its allowance atol + rtol |ref|.\n"
            f"  first mismatches: {shown}"
        )
    return Errors(abs_err, rel_err, frac)


# What a packed E2M1 output holds before the run: every code is a value (E2M1 has no NaN), so the
# poison is -6 in both halves of each byte, the format's most negative value.
PACKED_POISON = 0xFF


def _poison(t: Any) -> None:
    if _is_packed(t):
        import torch

        t.view(torch.uint8).fill_(PACKED_POISON)
    elif t.is_floating_point():
        t.fill_(float("nan"))
    else:
        t.fill_(-0x5A5A5A5A if t.element_size() >= 4 else -0x5A)


def shuffled(t: Any, seed: int) -> Any:
    """The same values in a seeded random order: a fresh input with the original's value range."""
    import torch

    g = torch.Generator().manual_seed(seed)
    flat = t.detach().to("cpu").contiguous().reshape(-1)
    if _is_packed(t):  # no indexing on packed E2M1: shuffle its bytes, pairs of elements
        flat = flat.view(torch.uint8)
    out = flat[torch.randperm(flat.numel(), generator=g)]
    return out.view(t.dtype).reshape(t.shape).contiguous()


@dataclass
class Outcome:
    """What one run of a check established: the errors of the single launch, and the stress run."""

    max_abs_error: float
    max_rel_error: float
    stress: dict[str, Any] | None = None
    max_error_over_allowed: float | None = None  # max |err| / (atol + rtol |ref|) over the outputs


def _guarded(launcher: Any, args: Sequence[Any]) -> list[Any]:
    """The arguments on the launch device, each inside sentinel margins (gpubook.guard); None
    (an output that was not shipped) becomes an uninitialised guarded tensor."""
    out = []
    for p, a in zip(launcher.params, args):
        if a is None:
            out.append(guard.allocate(p.name, p.torch_shape, p.torch_dtype, runtime.DEVICE))
        else:
            out.append(guard.guarded_copy(p.name, a, runtime.DEVICE))
    return out


def run_and_compare(launcher: Any, args: Sequence[Any], outputs: Sequence[int],
                    expected: Sequence[Any], tols: Sequence[Sequence[float]], stress: int = 0,
                    variants: Sequence[tuple[Sequence[Any], Sequence[Any]]] = ()) -> Outcome:
    """The one run path of checks, in a notebook and in a replay.

    Copies `args` (any device; None for an output that was not shipped) to the launch device,
    each inside guard zones, poisons the outputs, launches, waits, checks every guard zone and
    compares each output. Then, with `stress`, runs the stress launches over `variants`.
    Raises CheckError on any failure: out-of-bounds writes first, then mismatches.
    """
    guards = _guarded(launcher, args)
    dev_args = [g.view for g in guards]
    for i in outputs:
        _poison(dev_args[i])
    launcher(*dev_args)
    runtime.synchronize()
    problems = [f"{launcher.name}: out-of-bounds write: {v}" for v in guard.check_all(guards)]
    errs = []
    for i, e, t in zip(outputs, expected, tols):
        try:
            errs.append(compare(launcher.name, dev_args[i], e, t[0], t[1]))
        except CheckError as err:
            problems.append(str(err))
    if problems:
        raise CheckError("\n".join(problems))
    outcome = Outcome(max(e[0] for e in errs), max(e[1] for e in errs),
                      max_error_over_allowed=max(e[2] for e in errs))
    if stress:
        outcome.stress = stress_run(launcher, variants, outputs, tols, stress)
        if outcome.stress["failures"] or outcome.stress.get("out_of_bounds"):
            err = CheckError(f"{launcher.name}: {describe_stress(outcome.stress)}")
            err.stress = outcome.stress
            raise err
    return outcome


def stress_run(launcher: Any, variants: Sequence[tuple[Sequence[Any], Sequence[Any]]],
               outputs: Sequence[int], tols: Sequence[Sequence[float]], launches: int) -> dict[str, Any]:
    """Launch `launches` times cycling through `variants` ((args, expected) pairs), poisoning
    the outputs before each launch and comparing every output on the device; the host waits
    once, at the end, and then checks every guard zone.

    Returns {"launches", "failures", "variants", "first_failure"}, plus "out_of_bounds" (a
    list of guard-zone violations) when a launch wrote outside its tensors.
    """
    import torch

    if not variants:
        raise ValueError(f"{launcher.name}: a stress run needs input variants")
    dev = runtime.DEVICE
    sets = []
    all_guards = []
    for args, expected in variants:
        guards = _guarded(launcher, args)
        all_guards += guards
        limits = []
        for i, e, (rtol, atol) in zip(outputs, expected, tols):
            e64 = as_float64(e, dev)
            limits.append((i, e64, atol + rtol * e64.abs()))
        sets.append(([g.view for g in guards], limits))
    bad = torch.zeros(launches, dtype=torch.int64, device=dev)
    worst = torch.zeros(launches, dtype=torch.float64, device=dev)
    inf = float("inf")
    for n in range(launches):
        dev_args, limits = sets[n % len(sets)]
        for i, _, _ in limits:
            _poison(dev_args[i])
        launcher(*dev_args)
        for i, e64, limit in limits:
            diff = (as_float64(dev_args[i], dev) - e64).abs()
            bad[n] += (~(diff <= limit)).sum()  # NaN lands here
            worst[n] = torch.maximum(worst[n], torch.nan_to_num(diff, nan=inf).max())
    runtime.synchronize()
    failed = (bad > 0).nonzero().flatten().tolist()
    first = None
    if failed:
        n = failed[0]
        total = sum(e.numel() for _, e, _ in sets[n % len(sets)][1])
        first = (f"launch {n + 1} (variant {n % len(sets)}): {int(bad[n])} of {total} output "
                 f"elements differ, max abs error {float(worst[n]):.3g}")
    rec: dict[str, Any] = {"launches": launches, "failures": len(failed), "variants": len(sets),
                           "first_failure": first}
    oob = guard.check_all(all_guards)
    if oob:
        rec["out_of_bounds"] = sorted(set(oob))
    return rec
