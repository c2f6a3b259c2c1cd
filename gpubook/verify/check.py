"""Run a kernel on seeded inputs and compare it with a PyTorch reference, or say why it did not run."""

from __future__ import annotations

import html
import os
from dataclasses import dataclass, field
from typing import Any, Callable, Sequence

from ..run import guard
from ..run import runtime
from .compare import (  # noqa: F401 - check's names, as a check's reader looks them up
    TOLERANCES, CheckError, Outcome, _guarded, _poison, compare, run_and_compare, seeded,
                      shuffled, stress_run, tolerance)
from .describe import (  # noqa: F401 - describe_simulation: appendix D reads it here
    MATRIX_PAGE, a_gpu, describe_error, describe_record, describe_simulation, describe_stress, replay_verdict)
from ..facts.results import PROVENANCE_NOTE
from ..compile.signature import validate

STRICT_ENV = "GPUBOOK_STRICT"
# Set (the test session sets it for its book build): a Blackwell-only check without a good
# simulation of its exact kernel script (results/*-numsim.json) is an error, not a NOT RUN.
REQUIRE_SIMULATED_ENV = "GPUBOOK_REQUIRE_SIMULATED"

STRESS_VARIANTS = 8  # input variants a stress run cycles through


class NotRunError(RuntimeError):
    """Strict mode: a check could not run on this machine."""


class NotSimulatedError(RuntimeError):
    """GPUBOOK_REQUIRE_SIMULATED: a Blackwell-only kernel has no good simulation of its script."""


@dataclass
class CheckResult:
    """What a check established, strongest fact first: passed (or failed) on a GPU, here or in
    a replay of this kernel; simulated on the CPU; or not run anywhere yet — then what this
    machine could not do, and why."""

    kernel: str
    status: str  # "passed" or "not run" (here: a replay's or a simulation's verdict is recorded apart)
    arch: str | None = None
    gpu: str | None = None
    max_abs_error: float | None = None
    max_rel_error: float | None = None
    reason: str | None = None  # why it did not run here ("no GPU on this machine (compiled for ...)")
    facts: str = ""
    stress: dict[str, Any] | None = None  # {"launches", "failures", "variants", "first_failure"}
    stress_planned: int = 0  # launches asked for (exported for a GPU run when none is here)
    recorded: dict[str, Any] | None = None  # the newest replay of this exact kernel (results/)
    provenance: str | None = None  # results.provenance: "this case", "unrecorded" or "other"
    simulated: dict[str, Any] | None = None  # the newest CPU simulation of it (results/*-numsim)
    not_simulated: str | None = None  # why a Blackwell-only kernel has no simulation, when declared
    max_error_over_allowed: float | None = None  # max |err| / (atol + rtol |ref|), elementwise
    tolerances: list[tuple[float, float]] | None = None  # (rtol, atol) per output

    @property
    def passed(self) -> bool:
        return self.status == "passed"

    def _replayed(self) -> bool:
        """A replay of this very case (or of one recorded before cases were named) leads."""
        return self.recorded is not None and self.provenance != "other"

    def lines(self) -> list[str]:
        """The verdict, then indented detail lines (what __repr__ and the HTML show): the
        strongest fact first, then what this machine could not do."""
        if self.passed:
            err = describe_error({"max_error_over_allowed": self.max_error_over_allowed,
                                  "max_abs_error": self.max_abs_error}, self.tolerances)
            out = [f"PASSED {self.kernel} here, on {a_gpu(self.gpu or 'a GPU')} ({self.arch}): {err}"]
            if self.stress:
                out.append(describe_stress(self.stress))
            return out
        out: list[str] = []
        if self._replayed():
            note = PROVENANCE_NOTE.get(self.provenance or "", "")
            out.append(replay_verdict(self.kernel, self.recorded, self.tolerances) + note)
            out.append(f"not run here: {self.reason}")
            if self.simulated is not None:
                out.append("also " + describe_simulation(self.simulated))
        elif self.simulated is not None:
            out.append(describe_simulation(self.simulated, self.kernel, lead=True))
            out.append(f"not run here: {self.reason}")
        elif self.recorded is not None:
            out.append(f"NOT RUN {self.kernel}: {self.reason}; no replay of this very check yet")
        else:
            out.append(f"NOT RUN {self.kernel}: {self.reason}; no record of this kernel yet")
        if self.recorded is not None and not self._replayed():
            out.append("the same kernel script was replayed for another case (other inputs, tolerance, "
                       f"stress runs or toolchain), so not this check: {describe_record(self.recorded)}")
        if self.simulated is None and self.not_simulated:
            out.append(f"not simulated: {self.not_simulated}")
        if self.stress_planned and not (self.recorded or {}).get("stress"):
            out.append(f"stress test of {self.stress_planned} launches: "
                       + ("not in the replay's record, and not run here" if self._replayed() else "not run either"))
        out.append(f"static facts: {self.facts}")
        return out

    def _linked(self, lines: list[str], link: str) -> list[str]:
        """The lines with appendix A named after the one that cites a replay (none without one)."""
        if self.recorded is not None:
            i = 0 if self._replayed() else next(i for i, ln in enumerate(lines) if "replayed for another case" in ln)
            lines[i] += link
        return lines

    def __repr__(self) -> str:
        first, *rest = self._linked(self.lines(), f" (appendix A, {MATRIX_PAGE})")
        return "\n".join([first] + [f"  {ln}" for ln in rest])

    def _repr_html_(self) -> str:
        escaped = [html.escape(ln) for ln in self.lines()]
        first, *rest = self._linked(escaped, f' — <a href="{MATRIX_PAGE}">appendix A</a>')
        body = "<br>".join([first] + [f"&nbsp;&nbsp;{ln}" for ln in rest])
        return f'<div class="gpubook-report gpubook-check"><code>{body}</code></div>'


def strict() -> bool:
    return os.environ.get(STRICT_ENV, "") not in ("", "0", "false", "no")


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
        """Export the case when exporting (see gpubook.record.record_check); else do nothing."""
        from ..run import record

        return record.record_check(self.kernel, self.name, self.args, self.expected, self.outputs,
                                   self.tols, stress=self.stress, variants=self.variants, **extra)


Tol = float | None | Sequence[float | None]


def per_output(name: str, what: str, value: Tol, n: int) -> list[float | None]:
    """A tolerance given once for every output, or one per output (in the order of `outputs`)."""
    if value is None or isinstance(value, (int, float)):
        return [value] * n
    values = list(value)
    if len(values) != n:
        raise ValueError(f"{name}: {what} gives {len(values)} values for {n} outputs: give one, or one per output")
    return values


def prepare(kernel: Any, args: Sequence[Any], ref: Callable[..., Any], outputs: Sequence[int] = (-1,),
            rtol: Tol = None, atol: Tol = None, name: str | None = None,
            stress: int = 0, variants: int | Callable[[int], Sequence[Any]] = STRESS_VARIANTS) -> Case:
    """Validate a check's call and compute, on the CPU, everything a GPU run of it needs."""
    name = name or kernel.name
    validate(name, kernel.params, args, device=None)
    outputs = [i % len(args) for i in outputs]
    expected = _expected(name, ref, args, outputs)
    tols = [tolerance(kernel.params[i].dtype, r, a) for i, r, a in
            zip(outputs, per_output(name, "rtol", rtol, len(outputs)), per_output(name, "atol", atol, len(outputs)))]
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
    rtol: Tol = None,
    atol: Tol = None,
    name: str | None = None,
    stress: int = 0,
    variants: int | Callable[[int], Sequence[Any]] = STRESS_VARIANTS,
    expect: str | None = None,
    expect_output: str | None = None,
    not_simulated: str | None = None,
    resident: int | None = None,
) -> CheckResult:
    """Compare `kernel(*args)` with `ref(*args)` on the GPU, or report that it could not run.

    `args` are CPU tensors in the kernel's parameter order (outputs included: their contents
    are overwritten); `ref` takes the same tensors and returns the expected output(s), one per
    index in `outputs`; `rtol` and `atol` apply to every output, or, as sequences, one to each
    output in the order of `outputs`. Raises CheckError on a mismatch, KernelCallError on a bad call.

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

    `resident=N` is for kernels that schedule with cluster launch control: the CPU simulation
    keeps only the launch's first N clusters resident (a CTA without a cluster is a cluster of
    one), so each of the other clusters' tiles is computed only if a resident cluster cancels
    its launch and takes it — the path a B200 takes once the grid outgrows the SMs, and one a
    simulation with every cluster resident never exercises. Only a simulation with the same N
    counts for this check. A GPU decides residency itself; the replay ignores N.

    `expect="unsafe"` marks a kernel that breaks a PTX ordering rule on purpose (a missing
    tcgen05 fence, say): no run judges it, only the static rules; it is recorded so that the
    simulator's verdict on it (caught or missed) can be shown.

    `expect="race"` marks a kernel with a deliberate shared-memory race: only compute-sanitizer's
    racecheck can judge it, so it never runs here either; `python -m gpubook replay --sanitize`
    records it as 'race found' when racecheck reports a hazard (one matching the regex
    `expect_output`, when given), 'failed' when racecheck is clean, and 'not judged' without
    `--sanitize`.
    """
    if resident is not None and (isinstance(resident, bool) or not isinstance(resident, int) or resident < 1):
        raise ValueError(f"{name or kernel.name}: resident must be a positive number of clusters, got {resident!r}")
    if expect not in (None, "trap", "race", "unsafe"):
        raise ValueError(f"{name or kernel.name}: expect must be None, 'trap', 'race' or 'unsafe', "
                         f"got {expect!r}")
    case = prepare(kernel, args, ref, outputs, rtol, atol, name, stress, variants)
    name, outputs, expected, tols = case.name, case.outputs, case.expected, case.tols
    stress, stress_variants = case.stress, case.variants
    if expect in ("trap", "race", "unsafe"):
        case.record(expect=expect, expect_message=expect_output, resident=resident)
    else:
        case.record(resident=resident)

    why = runtime.why_not_here(kernel.runs_on)
    need = " or ".join(kernel.runs_on)
    if expect in ("trap", "race", "unsafe"):
        where = f"compiled for {need}" + ("" if why is None else f"; {why}")
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
        from ..run import record
        from ..facts import results

        rec, how = _replay(case, results.RAN_EXPECTED)
        sim = _simulation(kernel, name, not_simulated, resident)
        return CheckResult(name, "not run", facts=kernel.summary(), recorded=rec, provenance=how, simulated=sim,
                           not_simulated=not_simulated, tolerances=tols, reason=f"{what} ({where})")
    if why is not None:
        from ..run import record
        from ..facts import results

        rec, how = _replay(case, results.RAN)
        sim = _simulation(kernel, name, not_simulated, resident)
        result = CheckResult(
            name, "not run", reason=f"{why} (compiled for {need})", facts=kernel.summary(),
            stress_planned=stress, recorded=rec, provenance=how, simulated=sim, not_simulated=not_simulated,
            tolerances=tols,
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
                       stress=outcome.stress, max_error_over_allowed=outcome.max_error_over_allowed,
                       tolerances=tols)


def _replay(case: Case, statuses: tuple[str, ...]) -> tuple[dict[str, Any] | None, str | None]:
    """The newest replay of this very case (same script, inputs, tolerance, stress and toolchain),
    else the newest of the same script, with how it relates to this case (results.provenance)."""
    from ..facts import results
    from ..run import record

    digest = record.check_digest(case.kernel, case.args, case.expected, case.outputs, case.tols,
                                 case.stress, case.variants)
    tc = record.toolchain_identity()
    where = dict(chapter=record.current_chapter(), fingerprint=case.kernel.fingerprint, statuses=statuses)
    rec = results.newest(case.name, "check", case_digest=digest, toolchain=tc, **where) \
        or results.newest(case.name, "check", **where)
    return rec, results.provenance(rec, digest, tc)


def require_simulated() -> bool:
    return os.environ.get(REQUIRE_SIMULATED_ENV, "") not in ("", "0", "false", "no")


def _simulation(kernel: Any, name: str, not_simulated: str | None,
                resident: int | None = None) -> dict[str, Any] | None:
    """The newest simulation of this exact Blackwell-only kernel (None for a portable one), with
    `resident` clusters resident (None: all of them)."""
    if "sm_90a" in kernel.runs_on or "sm_100a" not in kernel.runs_on:
        return None
    from ..run import record
    from ..facts import results
    from .simulate import good

    sim = results.newest_simulation(name, chapter=record.current_chapter(),
                                    fingerprint=kernel.fingerprint, resident=resident)
    if require_simulated() and not_simulated is None and (sim is None or not good(sim)):
        found = "none is recorded" if sim is None else f"the newest is {sim['status']}"
        raise NotSimulatedError(
            f"{REQUIRE_SIMULATED_ENV} is set and {record.current_chapter()}/{name} (fingerprint "
            f"{kernel.fingerprint}) has no good simulation: {found}. Run `python -m gpubook export "
            f"DIR chapters/{record.current_chapter()}.md` and `python -m gpubook simulate DIR`.")
    return sim
