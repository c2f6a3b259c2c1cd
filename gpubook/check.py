"""Run a kernel on seeded inputs and compare it with a PyTorch reference, or say why it did not run."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from . import guard, runtime
from .signature import validate

STRICT_ENV = "GPUBOOK_STRICT"
# Set (the test session sets it for its book build): a Blackwell-only check without a good
# simulation of its exact kernel script (results/*-numsim.json) is an error, not a NOT RUN.
REQUIRE_SIMULATED_ENV = "GPUBOOK_REQUIRE_SIMULATED"

# (rtol, atol) by output dtype: torch.testing's defaults, which chapters may widen with reason.
TOLERANCES: dict[str, tuple[float, float]] = {
    "float64": (1e-7, 1e-7),
    "float32": (1.3e-6, 1e-5),
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
}


STRESS_VARIANTS = 8  # input variants a stress run cycles through


class CheckError(AssertionError):
    """A kernel's output differs from the reference beyond tolerance.

    `stress` holds the stress record when the failure came from a stress run.
    """

    stress: dict[str, Any] | None = None


class NotRunError(RuntimeError):
    """Strict mode: a check could not run on this machine."""


class NotSimulatedError(RuntimeError):
    """GPUBOOK_REQUIRE_SIMULATED: a Blackwell-only kernel has no good simulation of its script."""


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
    stress: dict[str, Any] | None = None  # {"launches", "failures", "variants", "first_failure"}
    stress_planned: int = 0  # launches asked for (exported for a GPU run when none is here)
    recorded: dict[str, Any] | None = None  # the newest replay of this exact kernel (results/)
    simulated: dict[str, Any] | None = None  # the newest CPU simulation of it (results/*-numsim)
    not_simulated: str | None = None  # why a Blackwell-only kernel has no simulation, when declared

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def lines(self) -> list[str]:
        """The verdict, then indented detail lines (what __repr__ and the HTML show)."""
        if self.passed:
            out = [f"PASS {self.kernel} on {self.gpu} ({self.arch}): max abs error "
                   f"{self.max_abs_error:.3g}, max rel error {self.max_rel_error:.3g}"]
            if self.stress:
                out.append(describe_stress(self.stress))
            return out
        out = [f"NOT RUN {self.kernel}: {self.reason}"]
        if self.recorded is not None:
            out.append(f"same kernel replayed: {describe_record(self.recorded)}")
        else:
            out.append("no replay of this exact kernel is recorded yet")
        if self.simulated is not None:
            out.append(describe_simulation(self.simulated))
        elif self.not_simulated:
            out.append(f"not simulated: {self.not_simulated}")
        if self.stress_planned and not (self.recorded or {}).get("stress"):
            out.append(f"stress test of {self.stress_planned} launches: not run either")
        out.append(f"static facts: {self.facts}")
        return out

    def __repr__(self) -> str:
        first, *rest = self.lines()
        if self.recorded is not None:
            rest[0] += f" (appendix A, {MATRIX_PAGE})"
        return "\n".join([first] + [f"  {ln}" for ln in rest])

    def _repr_html_(self) -> str:
        first, *rest = (html.escape(ln) for ln in self.lines())
        if self.recorded is not None:
            rest[0] += f' — <a href="{MATRIX_PAGE}">appendix A</a>'
        body = "<br>".join([first] + [f"&nbsp;&nbsp;{ln}" for ln in rest])
        return f'<div class="gpubook-report gpubook-check"><code>{body}</code></div>'


# The verification matrix (appendix A), relative to a chapter page of the built book.
MATRIX_PAGE = "A-verification-matrix.html"


def describe_record(rec: dict[str, Any]) -> str:
    """One line for a replayed check: 'passed on NVIDIA H200, 2026-11-30, max abs error 0,
    memcheck and racecheck clean; stress: ...' (or the failure and its first line)."""
    run = rec["run"]
    if rec["status"] == "passed":
        s = f"passed on {run['gpu']}, {run['date']}"
        if rec.get("max_abs_error") is not None:
            s += f", max abs error {rec['max_abs_error']:.3g}"
    elif rec["status"] in ("trapped", "race found"):      # the verdict a broken kernel must draw
        s = f"{rec['status']} on {run['gpu']}, {run['date']}, as expected"
    else:
        s = f"{rec['status'].upper()} on {run['gpu']}, {run['date']}"
        msg = (rec.get("message") or "").strip().splitlines()
        if msg:
            s += f": {msg[0][:200]}"
    san = rec.get("sanitizer") or {}
    if san and all(v == "clean" for v in san.values()):
        s += f", {' and '.join(san)} clean"
    elif san:
        s += ", " + ", ".join(f"{k} {v}" for k, v in san.items())
    if rec.get("stress"):
        s += f"; {describe_stress(rec['stress'])}"
    return s


def describe_simulation(rec: dict[str, Any]) -> str:
    """One line for a simulated check: 'simulated on the CPU (NumSim, tirx-harness 0.1.2.post2,
    2026-12-01): matches PyTorch, max abs error 0.000122 (atol 0.001, rtol 0); synccheck clean;
    racecheck clean — not run on a B200' (or what the tools found)."""
    run = rec["run"]
    where = f"simulated on the CPU (NumSim, {run.get('simulator')}, {run['date']})"
    tools = rec.get("tools") or {}
    parts = []
    num = tools.get("numbers", {})
    if num.get("verdict") == "match":
        tol = ", ".join(f"atol {a:.3g}, rtol {r:.3g}" for r, a in rec.get("tolerances") or [])
        parts.append(f"matches PyTorch, max abs error {rec.get('max_abs_error', 0):.3g}"
                     + (f" ({tol})" if tol else ""))
    elif num:
        parts.append(f"numbers {num.get('verdict')}")
    for tool in ("synccheck", "racecheck"):
        parts.append(f"{tool} {tools[tool].get('verdict')}" if tool in tools else f"{tool} not run")
    status = rec["status"]
    if status == "simulated":
        return f"{where}: " + "; ".join(parts) + " — not run on a B200"
    if status == "caught":
        return (f"{where}: the fault was caught, as expected — {_shortened(rec.get('message') or '', 240)}"
                " — not run on a B200")
    return f"{where}: {status.upper()} — {_shortened(rec.get('message') or '; '.join(parts), 300)}"


def _shortened(text: str, limit: int) -> str:
    """`text` cut at a word boundary before `limit` characters, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def describe_stress(rec: dict[str, Any]) -> str:
    """One line for a stress record: launches, variants, failures (and the first one)."""
    s = (f"stress: {rec['launches']} launches over {rec['variants']} input variants, "
         f"{rec['failures']} failed")
    if rec.get("first_failure"):
        s += f"; first: {rec['first_failure']}"
    if rec.get("out_of_bounds"):
        s += "; out-of-bounds write: " + "; ".join(rec["out_of_bounds"])
    return s


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


def shuffled(t: Any, seed: int) -> Any:
    """The same values in a seeded random order: a fresh input with the original's value range."""
    import torch

    g = torch.Generator().manual_seed(seed)
    flat = t.detach().to("cpu").reshape(-1)
    return flat[torch.randperm(flat.numel(), generator=g)].reshape(t.shape).contiguous()


def make_variants(name: str, params: Sequence[Any], args: Sequence[Any], outputs: Sequence[int],
                  ref: Callable[..., Any], variants: int | Callable[[int], Sequence[Any]]
                  ) -> list[tuple[list[Any], list[Any]]]:
    """Input variants for a stress run and their expected outputs, computed on the CPU.

    `variants` is a count (each floating-point input is shuffled with a new seed; integer and
    index tensors are kept) or a callable seed -> args for inputs with structure.
    """
    count = variants if isinstance(variants, int) else STRESS_VARIANTS
    if count < 1:
        raise ValueError(f"{name}: a stress run needs at least one input variant")
    out = []
    for v in range(count):
        seed = 1000 + v
        if callable(variants):
            new = [a.to("cpu") for a in variants(seed)]
            validate(name, params, new, device=None)
        else:
            new = [a if i in outputs or not a.is_floating_point() else shuffled(a, seed)
                   for i, a in enumerate(args)]
        out.append(([None if i in outputs else a.contiguous() for i, a in enumerate(new)],
                    _expected(name, ref, new, outputs)))
    return out


def _expected(name: str, ref: Callable[..., Any], args: Sequence[Any], outputs: Sequence[int]) -> list[Any]:
    import torch

    with torch.no_grad():
        expected = ref(*[a.clone() for a in args])
    if not isinstance(expected, (tuple, list)):
        expected = [expected]
    if len(expected) != len(outputs):
        raise ValueError(f"{name}: ref returned {len(expected)} tensors for {len(outputs)} outputs")
    return [e.detach().to("cpu").contiguous() for e in expected]


@dataclass
class Case:
    """A check made ready to run anywhere: inputs, expected outputs, tolerances, stress variants."""

    kernel: Any
    name: str
    args: list[Any]
    outputs: list[int]
    expected: list[Any]
    tols: list[tuple[float, float]]
    stress: int = 0
    variants: list[tuple[list[Any], list[Any]]] = field(default_factory=list)

    def record(self, **extra: Any) -> Any:
        """Export the case when exporting (see gpubook.export.record_check); else do nothing."""
        from . import export

        return export.record_check(self.kernel, self.name, self.args, self.expected, self.outputs,
                                   self.tols, stress=self.stress, variants=self.variants, **extra)


def prepare(kernel: Any, args: Sequence[Any], ref: Callable[..., Any], outputs: Sequence[int] = (-1,),
            rtol: float | None = None, atol: float | None = None, name: str | None = None,
            stress: int = 0, variants: int | Callable[[int], Sequence[Any]] = STRESS_VARIANTS) -> Case:
    """Validate a check's call and compute, on the CPU, everything a GPU run of it needs."""
    name = name or kernel.name
    validate(name, kernel.params, args, device=None)
    outputs = [i % len(args) for i in outputs]
    expected = _expected(name, ref, args, outputs)
    tols = [tolerance(kernel.params[i].dtype, rtol, atol) for i in outputs]
    stress = int(stress)
    if stress < 0:
        raise ValueError(f"{name}: stress must be a number of launches, got {stress}")
    stress_variants = make_variants(name, kernel.params, args, outputs, ref, variants) if stress else []
    return Case(kernel, name, list(args), outputs, expected, tols, stress, stress_variants)


def check(
    kernel: Any,
    args: Sequence[Any],
    ref: Callable[..., Any],
    outputs: Sequence[int] = (-1,),
    rtol: float | None = None,
    atol: float | None = None,
    name: str | None = None,
    stress: int = 0,
    variants: int | Callable[[int], Sequence[Any]] = STRESS_VARIANTS,
    expect: str | None = None,
    expect_output: str | None = None,
    not_simulated: str | None = None,
) -> CheckResult:
    """Compare `kernel(*args)` with `ref(*args)` on the GPU, or report that it could not run.

    `args` are CPU tensors in the kernel's parameter order (outputs included: their contents
    are overwritten); `ref` takes the same tensors and returns the expected output(s), one per
    index in `outputs`. Raises CheckError on a mismatch, KernelCallError on a bad call.

    `stress=N` adds a stress run: N launches cycling through `variants` input variants
    (default 8: every floating-point input shuffled with a new seed; or a callable
    seed -> args), outputs poisoned before each launch and every output compared.

    `expect="trap"` marks a deliberately broken kernel that must end in a device trap whose
    output matches the regex `expect_output`: it never runs in this process (a trap ends the
    CUDA context), only in a child process of `python -m gpubook replay`, which records it as
    'trapped'.

    A Blackwell-only kernel (no sm_90a build) that cannot run here also shows its newest CPU
    simulation (`python -m gpubook simulate`) of exactly this kernel script; `not_simulated`
    says why one has none by design (the reason is printed), and with GPUBOOK_REQUIRE_SIMULATED
    set, a Blackwell-only kernel with neither a good simulation ("simulated", or "caught" for
    a kernel that must trap or race) nor that reason raises NotSimulatedError.

    `expect="unsafe"` marks a kernel that breaks a PTX ordering rule on purpose (a missing
    tcgen05 fence, say): no run judges it, only the static rules; it is recorded so that the
    simulator's verdict on it (caught or missed) can be shown.

    `expect="race"` marks a kernel with a deliberate shared-memory race: only compute-sanitizer's
    racecheck can judge it, so it never runs here either; `python -m gpubook replay --sanitize`
    records it as 'race found' when racecheck reports a hazard (one matching the regex
    `expect_output`, when given), 'failed' when racecheck is clean, and 'not judged' without
    `--sanitize`.
    """
    if expect not in (None, "trap", "race", "unsafe"):
        raise ValueError(f"{name or kernel.name}: expect must be None, 'trap', 'race' or 'unsafe', "
                         f"got {expect!r}")
    case = prepare(kernel, args, ref, outputs, rtol, atol, name, stress, variants)
    name, outputs, expected, tols = case.name, case.outputs, case.expected, case.tols
    stress, stress_variants = case.stress, case.variants
    if expect in ("trap", "race", "unsafe"):
        case.record(expect=expect, expect_message=expect_output)
    else:
        case.record()

    why = runtime.why_not_here(kernel.runs_on)
    if expect in ("trap", "race", "unsafe"):
        need = " or ".join(kernel.runs_on)
        where = "" if why is None else f" ({why})"
        if expect == "trap":
            what = ("it is expected to trap, so only `python -m gpubook replay` runs it, in a child "
                    "process, and requires the trap"
                    + (f" and a report matching /{expect_output}/" if expect_output else ""))
        elif expect == "race":
            what = ("it is expected to race, so only `python -m gpubook replay --sanitize` judges it, "
                    "and requires compute-sanitizer's racecheck to report a hazard"
                    + (f" matching /{expect_output}/" if expect_output else ""))
        else:
            what = ("it breaks a PTX ordering rule on purpose, so a run that passes would prove "
                    "nothing: the static rules (gpubook.lint) judge it at build time")
        from . import export, results

        rec = results.newest(name, "check", chapter=export.current_chapter(),
                             fingerprint=kernel.fingerprint, statuses=results.RAN_EXPECTED)
        sim = _simulation(kernel, name, not_simulated)
        return CheckResult(name, "not run", facts=kernel.summary(), recorded=rec, simulated=sim,
                           not_simulated=not_simulated,
                           reason=f"compiled for {need} — not run here{where}: {what}")
    if why is not None:
        need = " or ".join(kernel.runs_on)
        from . import export, results

        rec = results.newest(name, "check", chapter=export.current_chapter(),
                             fingerprint=kernel.fingerprint)
        sim = _simulation(kernel, name, not_simulated)
        result = CheckResult(
            name, "not run", reason=f"compiled for {need} — not run: {why}", facts=kernel.summary(),
            stress_planned=stress, recorded=rec, simulated=sim, not_simulated=not_simulated,
        )
        if strict():
            raise NotRunError(f"{STRICT_ENV} is set and {name} did not run: {result.reason}")
        return result
    arch = runtime.local_arch()
    launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
    outcome = run_and_compare(launcher, args, outputs, expected, tols, stress=stress,
                              variants=stress_variants)
    return CheckResult(name, "passed", arch=arch, gpu=runtime.local_gpu_name(),
                       max_abs_error=outcome.max_abs_error, max_rel_error=outcome.max_rel_error,
                       stress=outcome.stress)


def require_simulated() -> bool:
    return os.environ.get(REQUIRE_SIMULATED_ENV, "") not in ("", "0", "false", "no")


def _simulation(kernel: Any, name: str, not_simulated: str | None) -> dict[str, Any] | None:
    """The newest simulation of this exact Blackwell-only kernel (None for a portable one)."""
    if "sm_90a" in kernel.runs_on or "sm_100a" not in kernel.runs_on:
        return None
    from . import export, results
    from .simulate import good

    sim = results.newest_simulation(name, chapter=export.current_chapter(),
                                    fingerprint=kernel.fingerprint)
    if require_simulated() and not_simulated is None and (sim is None or not good(sim)):
        found = "none is recorded" if sim is None else f"the newest is {sim['status']}"
        raise NotSimulatedError(
            f"{REQUIRE_SIMULATED_ENV} is set and {export.current_chapter()}/{name} (fingerprint "
            f"{kernel.fingerprint}) has no good simulation: {found}. Run `python -m gpubook export "
            f"DIR chapters/{export.current_chapter()}.md` and `python -m gpubook simulate DIR`.")
    return sim


@dataclass
class Outcome:
    """What one run of a check established: the errors of the single launch, and the stress run."""

    max_abs_error: float
    max_rel_error: float
    stress: dict[str, Any] | None = None


def _guarded(launcher: Any, args: Sequence[Any]) -> list[Any]:
    """The arguments on the launch device, each inside sentinel margins (gpubook.guard); None
    (an output that was not shipped) becomes an uninitialised guarded tensor."""
    out = []
    for p, a in zip(launcher.params, args):
        if a is None:
            out.append(guard.allocate(p.name, p.shape, p.dtype, runtime.DEVICE))
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
    outcome = Outcome(max(e[0] for e in errs), max(e[1] for e in errs))
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
            e64 = e.to(dev, torch.float64)
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
            diff = (dev_args[i].to(torch.float64) - e64).abs()
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
