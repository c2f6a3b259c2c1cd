"""Time kernels with CUDA events (warm-up, L2 flush, median) against the hardware peaks."""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from typing import Any, Sequence

from . import record
from . import runtime
from .baselines import BASELINES, baseline_names  # noqa: F401  (re-exported)
from .baselines import baseline as baseline_fn
from ..facts.hardware import PEAK_LABELS, gpu_for, peak_kind
from .inputs import FP8_DTYPES, flop_dtype, random_args  # noqa: F401 - the timed cases' inputs
from .timer import (  # noqa: F401 - the timing loop, where chapters and appendix B look it up
    FLUSH_BYTES, FLUSHES, flusher, time_fn, time_interleaved, time_samples)


def _recorded_baselines(rec: dict[str, Any]) -> dict[str, float]:
    """A record's baselines by name: its 'baselines' map, or (files written before several
    baselines were timed per case) its one 'baseline' and 'baseline_ms'."""
    if rec.get("baselines"):
        return dict(rec["baselines"])
    if rec.get("baseline") and rec.get("baseline_ms"):
        return {rec["baseline"]: rec["baseline_ms"]}
    return {}


@dataclass
class Timing:
    """A median time and what it moved or computed, against the peak of the GPU it ran on."""

    name: str
    status: str  # "measured" or "not measured"
    gpu: str | None = None
    ms: float | None = None
    bytes: float | None = None
    flops: float | None = None
    baseline_ms: float | None = None
    reason: str | None = None
    recorded: dict[str, Any] | None = None  # the newest replay of this case on a GPU host
    dtype: str | None = None  # what the FLOPs are counted in: picks the FLOP peak
    flush: str = "read"  # how L2 was flushed before each repeat
    samples: list[float] = field(default_factory=list)  # every repeat's time, ms
    baseline_samples: list[float] = field(default_factory=list)
    # Every baseline timed in the same run, by name: median ms and every repeat. The first
    # one is also `baseline_ms` / `baseline_samples`.
    baselines: dict[str, float] = field(default_factory=dict)
    baselines_samples: dict[str, list[float]] = field(default_factory=dict)
    output_check: dict[str, Any] | None = None  # the output at the timed shape vs its baseline
    clocks: dict[str, Any] | None = None  # SM clock and slowdown reasons during the run
    interleaved: bool = False  # kernel and baselines alternated repeat by repeat
    provenance: str | None = None  # how `recorded` relates to this case (results.provenance)
    # The measurement protocol (gpubook.run.protocol): the samples of each process in turn
    # (`reps`: how many each gave), and the one interleaved loop they came from: the samples of
    # two Timings of the same `ladder_run` pair up index by index.
    reps: list[int] = field(default_factory=list)
    ladder: str | None = None
    ladder_run: str | None = None
    spin_us: float | None = None  # the GPU-side wait that kept host time out of each interval
    host_bound: int | None = None  # timed calls the host still queued late (0 when it held)

    @staticmethod
    def from_record(rec: dict[str, Any]) -> "Timing":
        """The Timing a replay recorded (results/*.json) for a performance case."""
        if rec.get("status") == "failed":
            return Timing(rec["name"], "failed", gpu=rec["run"]["gpu"], reason=rec.get("message"),
                          output_check=rec.get("output_check"))
        return Timing(rec["name"], "measured", gpu=rec["run"]["gpu"], ms=rec["ms"],
                      bytes=rec.get("bytes"), flops=rec.get("flops"),
                      baseline_ms=rec.get("baseline_ms"), dtype=rec.get("dtype"),
                      flush=rec.get("flush") or "write",  # results before the read flush
                      samples=list(rec.get("samples") or []),
                      baseline_samples=list(rec.get("baseline_samples") or []),
                      baselines=_recorded_baselines(rec),
                      baselines_samples={k: list(v) for k, v in
                                         (rec.get("baselines_samples") or {}).items()},
                      output_check=rec.get("output_check"), clocks=rec.get("clocks"),
                      interleaved=bool(rec.get("interleaved")), reps=list(rec.get("reps") or []),
                      ladder=rec.get("ladder"), ladder_run=rec.get("ladder_run"),
                      spin_us=rec.get("spin_us"), host_bound=rec.get("host_bound"))

    def speedup(self, baseline: str | None = None) -> float | None:
        """How many times faster than a baseline (the first one by default) the kernel ran."""
        ms = self.baseline_ms if baseline is None else self.baselines.get(baseline)
        return ms / self.ms if ms and self.ms else None

    def within_noise(self, baseline: str | None = None) -> bool | None:
        """Whether the gap to a baseline (the first by default) is smaller than that baseline's own
        spread in the same run (its interquartile range over its median): then the ratio says
        parity, not faster or slower. None without samples of both."""
        b = self.baselines_samples.get(baseline) if baseline else self.baseline_samples
        ms = self.baselines.get(baseline) if baseline else self.baseline_ms
        if not b or len(b) < 4 or not ms or not self.ms:
            return None
        q = statistics.quantiles(b, n=4)
        return abs(self.ms - ms) / ms <= (q[2] - q[0]) / ms

    def best(self) -> "Timing | None":
        """This measurement if made here, else the recorded one from the verification matrix
        (None when there is none, or when the newest replay failed its output check)."""
        if self.status == "measured":
            return self
        if not self.recorded or self.recorded.get("status") == "failed" or self.provenance == "other":
            return None
        return Timing.from_record(self.recorded)

    @property
    def bandwidth(self) -> float | None:
        return self.bytes / (self.ms * 1e-3) if self.bytes and self.ms else None

    @property
    def flop_rate(self) -> float | None:
        return self.flops / (self.ms * 1e-3) if self.flops and self.ms else None

    def percent_of_bandwidth(self) -> float | None:
        """Achieved bytes/s as a percentage of the GPU's HBM peak."""
        if self.gpu is None or self.bandwidth is None:
            return None
        return 100 * self.bandwidth / gpu_for(self.gpu).hbm_bandwidth

    def percent_of_flops(self) -> float | None:
        """Achieved FLOP/s as a percentage of the peak of `dtype` (bf16/fp16 and fp8: tensor
        cores; fp32: the FP32 pipes)."""
        if self.gpu is None or self.flop_rate is None:
            return None
        return 100 * self.flop_rate / gpu_for(self.gpu).peak_flops(self.dtype)

    def percent_of_peak(self) -> float | None:
        """Percentage of the roof that binds: with both bytes and FLOPs, the larger of the two
        percentages (the roofline's attainable rate is the lower roof)."""
        found = [p for p in (self.percent_of_bandwidth(), self.percent_of_flops()) if p is not None]
        return max(found) if found else None

    def peak_label(self) -> str | None:
        """Which peak percent_of_peak() measures against: 'HBM' or a FLOP peak's name."""
        bw, fl = self.percent_of_bandwidth(), self.percent_of_flops()
        if bw is None and fl is None:
            return None
        if fl is not None and (bw is None or fl > bw):
            return PEAK_LABELS[peak_kind(self.dtype)]
        return "HBM"

    def __repr__(self) -> str:
        """The strongest fact first: MEASURED (here, or by the newest replay of this case) or
        FAILED; then what this machine could not do."""
        from . import clocks, outcheck

        def a_gpu(name: str) -> str:  # "an H200", "a B200"
            g = name.removeprefix("NVIDIA ").strip()
            return f"an {g}" if g[:1] in "AEFHILMNORSX" else f"a {g}"

        if self.status == "failed":
            return f"FAILED {self.name}" + (f" on {a_gpu(self.gpu)}" if self.gpu else "") + f": {self.reason}"
        if self.status != "measured":
            here = f"not measured here: {self.reason}"
            rec = self.recorded
            if not rec:
                return f"NOT MEASURED {self.name}: {self.reason}; no GPU measurement of it is recorded yet"
            run = rec["run"]
            shown = repr(Timing.from_record(rec)).split("\n")
            if self.provenance == "other":
                return (f"NOT MEASURED {self.name}: {self.reason}; no replay of this very case yet\n"
                        f"  the same kernel script was timed for another case (other timing setup, output "
                        f"check or toolchain), not this one: {shown[0]} (replay of {run['date']})"
                        + "".join(f"\n  {ln.strip()}" for ln in shown[1:]))
            # the replay's own line, with where and when it ran: 'MEASURED k on an H200 (replay of ...)'
            head, _, body = shown[0].partition(": ")
            lead = f"{head} (replay of {run['date']}): {body}"
            if rec.get("status") == "failed":
                lead += "\n  the newest replay of this kernel failed: no timing of it is reported"
            if self.provenance == "unrecorded":
                lead += "\n  recorded before results named their case and toolchain"
            return "\n".join([lead] + shown[1:] + [f"  {here}"])
        parts = [f"MEASURED {self.name} on {a_gpu(self.gpu or 'a GPU')}: {self.ms * 1e3:.1f} µs"]
        if self.samples:
            procs = f" in {len(self.reps)} processes" if len(self.reps) > 1 else ""
            parts[0] += f" (median of {len(self.samples)}{procs}, {self.flush} flush)"
        else:
            parts[0] += f" ({self.flush} flush)"
        if self.bandwidth:
            parts.append(f"{self.bandwidth / 1e12:.2f} TB/s")
        if self.flop_rate:
            parts.append(f"{self.flop_rate / 1e12:.1f} TFLOP/s")
        pct = self.percent_of_peak()
        if pct is not None:
            parts.append(f"{pct:.0f}% of {self.peak_label()} peak")
        if len(self.baselines) > 1:
            parts.append("PyTorch " + ", ".join(f"{b} {ms * 1e3:.1f} µs"
                                                for b, ms in self.baselines.items()))
        elif self.baseline_ms:
            parts.append(f"PyTorch {self.baseline_ms * 1e3:.1f} µs")
        if self.samples and len(self.samples) == len(self.baseline_samples) > 1:
            from ..facts.stats import compare

            c = compare(self.samples, self.baseline_samples, self.reps or None)
            word = {"parity": "at parity", "faster": "faster", "slower": "slower"}[c.verdict]
            parts.append(f"{c.times()} the first baseline's speed, paired in one loop: {word}")
        elif self.baseline_ms and self.within_noise():
            parts.append("parity: the gap is within the baseline's own spread")
        lines = [" · ".join(parts)]
        if self.output_check:
            lines.append("  " + outcheck.describe(self.output_check))
        if self.clocks:
            lines.append("  " + ("interleaved with its baselines; " if self.interleaved and self.baselines else "")
                         + clocks.describe(self.clocks))
        return "\n".join(lines)


def bench(kernel: Any, bytes: float | None = None, flops: float | None = None,
          baseline: str | Sequence[str] | None = None, name: str | None = None,
          dtype: str | None = None, flush: str = "read", warmup: int = 10,
          repeat: int = 50, tolerance: Any = None, reference: Any = None,
          unchecked: str | None = None, ladder: str | None = None,
          fixed: dict[str, list[Any]] | None = None, outputs: Sequence[int] | None = None) -> Timing:
    """Time a kernel on random inputs of its own shapes; report bandwidth or FLOP rate vs peak.

    `baseline` names one PyTorch baseline or several (a tuple): each is timed in the same run
    as the kernel, interleaved with it (`Timing.baselines`); the first is `Timing.baseline_ms`.
    `dtype` names what `flops` are counted in (bf16/fp16 and fp8: tensor-core peaks; fp32: the
    FP32 pipes); by default the kernel's narrowest floating-point parameter. `flush` is 'read'
    (default), 'write' or 'none' (see `flusher`).

    Before timing, the kernel's output (its last parameter) at the timed shape is compared with
    the output of `reference` (a name of gpubook.run.outcheck.REFERENCES, or {"op": name, **kw})
    or, without one, of the first baseline, within `tolerance` ('exact', (atol, rtol) or a named
    bound: see gpubook.run.outcheck). A mismatch raises OutputMismatch and nothing is timed. A
    kernel whose output means nothing to compare says why in `unchecked`.

    `ladder` names the loop the replay times this kernel in, with every other kernel of the
    chapter timed at the same shape under the same name and all their baselines, repeated in
    several processes (gpubook.run.protocol); without one the kernel is a ladder of its own.

    `fixed` gives the values of inputs that random ones would not make valid (by parameter
    name: a variable-length batch's offsets); the case records them for the GPU host.

    `outputs` names a kernel's outputs by parameter index when it has several (O and the LSE):
    its `reference` then returns one tensor per output, and `tolerance` is a list, one each.
    """
    from . import outcheck

    name = name or kernel.name
    names = baseline_names(baseline)
    baseline = names[0] if len(names) == 1 else tuple(names) if names else None
    if flush not in FLUSHES:
        raise ValueError(f"flush must be one of {', '.join(FLUSHES)}, not {flush!r}")
    if flops and dtype is None:
        dtype = flop_dtype(kernel.params)
    if dtype is not None:
        peak_kind(dtype)  # an unknown dtype fails here, not after the run
    ref = outcheck.reference_spec(reference)
    if unchecked is None:
        if tolerance is None:
            raise ValueError(f"{name}: a timed kernel's output is checked at the timed shape: give a "
                             "tolerance ('exact', (atol, rtol) or a named bound), or say why not with unchecked=")
        if ref is None and not names:
            raise ValueError(f"{name}: nothing to compare the output with: name a baseline or a reference")
        if outputs and (ref is None or len(tolerance) != len(outputs)):
            raise ValueError(f"{name}: outputs {tuple(outputs)} need a reference and a tolerance each")
        tol = [outcheck.tolerance_spec(t) for t in tolerance] if outputs else outcheck.tolerance_spec(tolerance)
    elif tolerance is not None:
        raise ValueError(f"{name}: a tolerance and unchecked= exclude each other")
    meta = {"bytes": bytes, "flops": flops, "baseline": names[0] if names else None,
            "dtype": dtype, "flush": flush, "warmup": warmup, "repeat": repeat,
            "interleaved": True}
    if unchecked is None:
        meta.update(tolerance=tol, reference=ref)
    else:
        meta["unchecked"] = unchecked
    if len(names) > 1:
        meta["baselines"] = names
    if ladder:
        meta["ladder"] = ladder
    if fixed:
        meta["fixed"] = {k: [int(x) if float(x).is_integer() else float(x) for x in v] for k, v in fixed.items()}
    if outputs:
        meta["outputs"] = [int(i) for i in outputs]
    record.record_perf(kernel, name, meta)
    why = runtime.why_not_here(kernel.runs_on)
    if why is not None:
        from ..facts.results import newest, provenance

        # The newest replay of exactly this case (script, timing setup, check and toolchain), else
        # of the script, measured or failed: a newer failure is not hidden behind an older timing.
        digest, tc = record.perf_digest(kernel, meta), record.toolchain_identity()
        where = dict(chapter=record.current_chapter(), fingerprint=kernel.fingerprint,
                     statuses=("measured", "failed"))
        rec = newest(name, "perf", case_digest=digest, toolchain=tc, **where) or newest(name, "perf", **where)
        return Timing(name, "not measured", bytes=bytes, flops=flops, reason=why, recorded=rec,
                      dtype=dtype, flush=flush, provenance=provenance(rec, digest, tc))
    arch = runtime.local_arch()
    launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
    t = measure(launcher, name, bytes=bytes, flops=flops, baseline=baseline, dtype=dtype,
                flush=flush, warmup=warmup, repeat=repeat, tolerance=meta.get("tolerance"),
                reference=ref, unchecked=unchecked, fixed=meta.get("fixed"), outputs=meta.get("outputs"))
    if t.status == "failed":
        raise outcheck.OutputMismatch(f"{name}: {t.reason}")
    return t


def measure(launcher: Any, name: str, bytes: float | None = None, flops: float | None = None,
            baseline: str | Sequence[str] | None = None, dtype: str | None = None,
            flush: str = "read", warmup: int = 10, repeat: int = 50, tolerance: Any = None,
            reference: Any = None, unchecked: str | None = None,
            fixed: dict[str, list[Any]] | None = None, outputs: Sequence[int] | None = None) -> Timing:
    """Check, then time a loaded kernel and its PyTorch baselines, interleaved, on random inputs:
    the one timing path of notebooks and replays. The output check runs first (see `bench`);
    a failed one returns a Timing of status 'failed' and times nothing. The SM clock and its
    slowdown reasons are sampled during the run (gpubook.run.clocks)."""
    import torch

    from . import clocks, outcheck

    names = baseline_names(baseline)
    args = random_args(launcher.params, device=runtime.DEVICE, fixed=fixed)
    check = check_output(launcher, args, names, tolerance, reference, unchecked, outputs=outputs)
    if check.get("passed") is False:
        return Timing(name, "failed", gpu=runtime.local_gpu_name(), bytes=bytes, flops=flops,
                      dtype=dtype, flush=flush, reason=outcheck.describe(check), output_check=check)
    report: dict[str, Any] = {}
    sampler = clocks.Sampler(torch.cuda.current_device() if torch.cuda.is_available() else 0)
    fns = {"kernel": lambda: launcher(*args)}
    fns.update({f"baseline:{b}": (lambda f=baseline_fn(b): f(*args)) for b in names})
    times = time_interleaved(fns, warmup, repeat, flush, sample=sampler.take, report=report)
    samples = times["kernel"]
    base = {b: times[f"baseline:{b}"] for b in names}
    first = base[names[0]] if names else []
    return Timing(name, "measured", gpu=runtime.local_gpu_name(), ms=statistics.median(samples),
                  bytes=bytes, flops=flops,
                  baseline_ms=statistics.median(first) if first else None, dtype=dtype,
                  flush=flush, samples=samples, baseline_samples=first,
                  baselines={b: statistics.median(v) for b, v in base.items()},
                  baselines_samples=base, output_check=check or None, clocks=sampler.summary(),
                  interleaved=True, reps=[len(samples)], spin_us=report.get("spin_us"),
                  host_bound=(report.get("host_bound") or {}).get("kernel"))


def check_output(launcher: Any, args: Sequence[Any], names: Sequence[str], tolerance: Any,
                 reference: Any, unchecked: str | None, cache: dict[str, Any] | None = None,
                 outputs: Sequence[int] | None = None) -> dict[str, Any]:
    """The output check of a timed case on its timed inputs `args` (see `bench`): the kernel's
    output (or `outputs`, with a tolerance each), poisoned first, against its reference's or
    first baseline's. `cache` keeps the expected output between kernels timed on the same
    inputs. Returns the record (empty when nothing is compared, {"unchecked": why} when the
    case says why not)."""
    import torch

    from . import outcheck

    if unchecked:
        return {"unchecked": unchecked}
    if tolerance is None:
        return {}
    where = list(outputs) if outputs else [len(args) - 1]
    inputs = [a for i, a in enumerate(args) if i not in where]
    for i in where:  # poisoned: an element the kernel never writes is a mismatch
        args[i].fill_(float("nan") if args[i].dtype.is_floating_point else torch.iinfo(args[i].dtype).min)
    launcher(*args)
    runtime.synchronize()
    got = [args[i].clone() for i in where]
    spec = outcheck.reference_spec(reference)
    against = spec["op"] if spec is not None else names[0]
    key = repr(sorted(spec.items())) if spec is not None else f"baseline:{against}"
    cache = {} if cache is None else cache
    if key not in cache:
        if spec is not None:
            params = {k: v for k, v in spec.items() if k != "op"}
            cache[key] = outcheck.REFERENCES[spec["op"]](*inputs, **params)
        else:
            fresh = torch.empty_like(args[-1])
            res = baseline_fn(against)(*inputs, fresh)
            cache[key] = res if isinstance(res, torch.Tensor) else fresh
    expected = list(cache[key]) if outputs else [cache[key]]
    specs = [outcheck.tolerance_spec(t) for t in (tolerance if outputs else [tolerance])]
    check = outcheck.compare_outputs(got, expected, specs, inputs, against, where if outputs else None)
    del got
    return check
