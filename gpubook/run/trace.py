"""Record small output tensors of a kernel (a schedule trace, a timeline) on a GPU and keep them.

`trace(kernel, args, outputs=...)` runs the kernel on the given inputs where a GPU can run it;
otherwise it exports a case of kind "trace" (modules, every input tensor, the outputs to keep)
that `python -m gpubook replay` runs on a GPU host. The replay restores the inputs before each
launch, launches a few times, times the launches with CUDA events and stores the selected
outputs of the last launch in the results file, under the case's "trace" key:

    {"kind": "trace", "status": "measured", "ms": median ms, "repeat": n,
     "trace": {param name: {"shape": [...], "dtype": "int64", "data": [flat values]}}}

A trace is data to look at, not a correctness check: run `check` on the same kernel for that.
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from . import record
from . import runtime
from ..compile.signature import validate

MAX_VALUES = 65536  # a trace is for small tensors: results files stay readable


@dataclass
class Trace:
    """The kept outputs of one traced run: recorded here, recorded by a replay, or neither."""

    name: str
    status: str  # "recorded" or "not recorded"
    gpu: str | None = None
    ms: float | None = None
    tensors: dict[str, Any] = field(default_factory=dict)
    reason: str | None = None
    recorded: dict[str, Any] | None = None  # the replay's record when the data came from one

    @property
    def available(self) -> bool:
        """True when there is data to look at, from this machine or from a replay."""
        return bool(self.tensors)

    @property
    def source(self) -> str:
        """Where the data came from, in words."""
        if self.status == "recorded":
            return f"recorded on {self.gpu} by this notebook"
        if self.recorded:
            run = self.recorded["run"]
            return f"recorded on {run['gpu']} by the replay of {run['date']}"
        return "not recorded"

    def __getitem__(self, key: str) -> Any:
        return self.tensors[key]

    def __repr__(self) -> str:
        shapes = ", ".join(f"{k} {tuple(v.shape)}" for k, v in self.tensors.items())
        timed = f", median {self.ms * 1e3:.1f} µs per launch" if self.ms else ""
        if self.available:
            return f"TRACE {self.name}: {shapes}, {self.source}{timed}"
        return (f"NOT RECORDED {self.name} here: {self.reason}\n"
                "  no replay of this kernel (this exact script) has recorded a trace yet")


def _to_json(t: Any) -> dict[str, Any]:
    t = t.detach().to("cpu").contiguous()
    if t.numel() > MAX_VALUES:
        raise ValueError(f"a trace keeps at most {MAX_VALUES} values; this output has {t.numel()}")
    return {"shape": list(t.shape), "dtype": str(t.dtype).removeprefix("torch."),
            "data": t.reshape(-1).tolist()}


def _from_json(d: dict[str, Any]) -> Any:
    import torch

    return torch.tensor(d["data"], dtype=getattr(torch, d["dtype"])).reshape(d["shape"])


def run(launcher: Any, saved: Sequence[Any], params: Sequence[Any], outputs: Sequence[int],
        repeat: int) -> dict[str, Any]:
    """Launch `repeat` times on GPU copies of `saved` (restored before each launch).

    Returns {"ms": median launch time, "repeat": n, "trace": {name: json tensor}} for the
    outputs of the last launch.
    """
    import torch

    args = [torch.empty_like(a, device=runtime.DEVICE) for a in saved]
    times = []
    for _ in range(repeat):
        for a, s in zip(args, saved):
            a.copy_(s)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        launcher(*args)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return {"ms": statistics.median(times), "repeat": repeat,
            "trace": {params[i].name: _to_json(args[i]) for i in outputs}}


def record_case(kernel: Any, name: str, args: Sequence[Any], outputs: Sequence[int],
                repeat: int) -> Path | None:
    """When exporting, save a trace case: modules, every input tensor, what to keep."""
    if not record.exporting("trace", name):
        return None
    import torch

    d = record._case_dir("trace", name)
    torch.save({"args": [a.contiguous() for a in args]}, d / "tensors.pt")
    record._write_common(d, kernel, {"kind": "trace", "name": name, "outputs": list(outputs),
                                     "repeat": repeat})
    return d


def replay_case(case_dir: Path, meta: dict[str, Any], launcher: Any) -> dict[str, Any]:
    """Run an exported trace case on this GPU: the fields its results record adds."""
    import torch

    saved = torch.load(case_dir / "tensors.pt")["args"]
    out = run(launcher, saved, meta["param_objs"], meta["outputs"], meta.get("repeat", 10))
    out["status"] = "measured"
    return out


def trace(kernel: Any, args: Sequence[Any], outputs: Sequence[int] = (-1,),
          name: str | None = None, repeat: int = 10) -> Trace:
    """Run `kernel(*args)` where a GPU can, keep `outputs`; else use a replay's record if any.

    `args` are CPU tensors in parameter order, inputs and outputs alike, restored before
    every launch (so a kernel that keeps state in its inputs starts from the same state).
    """
    name = name or kernel.name
    validate(name, kernel.params, args, device=None)
    outputs = [i % len(args) for i in outputs]
    record_case(kernel, name, args, outputs, repeat)
    why = runtime.why_not_here(kernel.runs_on)
    if why is None:
        arch = runtime.local_arch()
        launcher = runtime.load(kernel.export(arch), name, kernel.params, arch)
        res = run(launcher, [a.contiguous() for a in args], kernel.params, outputs, repeat)
        tensors = {k: _from_json(v) for k, v in res["trace"].items()}
        return Trace(name, "recorded", gpu=runtime.local_gpu_name(), ms=res["ms"], tensors=tensors)
    from ..facts.results import latest

    rec = latest(name, "trace", chapter=record.current_chapter(), fingerprint=kernel.fingerprint)
    tensors = {k: _from_json(v) for k, v in rec["trace"].items()} if rec and rec.get("trace") else {}
    return Trace(name, "not recorded", ms=rec.get("ms") if rec else None, tensors=tensors,
                 reason=why, recorded=rec)
