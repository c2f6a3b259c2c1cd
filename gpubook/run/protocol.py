"""The measurement protocol: every kernel of a ladder and every baseline they name, timed
round-robin in one interleaved loop, the whole loop repeated in independent processes.

A chapter names a ladder with `gb.bench(..., ladder="full")`: all the kernels it times at one
shape under that name. The replay (gpubook.verify.replay) loads them together in one process,
checks each one's output at the timed shape against the same reference, then times them and
the union of their baselines in one `time_interleaved` loop, so that iteration i timed every one
of them once, back to back, on the same inputs; it repeats that in `repeats` processes
(default 3). `merge` joins the processes' records: each kernel's samples, process after
process, aligned index by index with every other member's, and one sample list per baseline,
shared by every member — the box, the table and the figure of a chapter then show one cuBLAS or
cuDNN number. gpubook.facts.stats turns them into medians, paired ratios and their intervals.

A timed case without a ladder is a ladder of one: its own baselines, repeated the same way.
"""

from __future__ import annotations

import statistics
from typing import Any, Sequence

from . import runtime
from .baselines import baseline_names
from .baselines import baseline as baseline_fn

REPEATS = 3  # independent processes per ladder, at least


def ladder_key(meta: dict[str, Any]) -> tuple[str, str]:
    """The loop a timed case belongs to: (chapter, ladder name), or its own name without one."""
    return meta.get("chapter") or "", meta.get("ladder") or f"case:{meta['name']}"


def _signature(meta: dict[str, Any]) -> list[tuple[Any, Any]]:
    return [(tuple(p["shape"]), p["dtype"]) for p in meta["params"]] + sorted((meta.get("fixed") or {}).items())


def members_agree(metas: Sequence[dict[str, Any]]) -> None:
    """Kernels timed in one loop share its flush, warm-up and repeats. Raises ValueError naming
    the first that differs."""
    first = metas[0]
    for m in metas[1:]:
        for key, what in ((lambda x: x.get("flush", "read"), "flush"),
                          (lambda x: x.get("repeat", 50), "repeats"), (lambda x: x.get("warmup", 10), "warm-up")):
            if key(m) != key(first):
                raise ValueError(f"ladder {first.get('ladder')!r}: {m['name']} differs from {first['name']} "
                                 f"in its {what}: {key(m)} against {key(first)}")


def baselines_of(metas: Sequence[dict[str, Any]]) -> list[str]:
    """Every baseline any member names, each once, in the order first named."""
    out: list[str] = []
    for m in metas:
        for b in baseline_names(m.get("baselines") or m.get("baseline")):
            if b not in out:
                out.append(b)
    return out


def measure_ladder(members: Sequence[tuple[Any, dict[str, Any]]]) -> dict[str, dict[str, Any]]:
    """One process's run of a ladder: `members` are (launcher, case metadata). Members with the
    same parameters (shapes and dtypes) share one set of random inputs, and each baseline is
    timed once per such set; every member's output is checked first; the members that pass and
    the baselines are then timed in one interleaved loop. Returns a record per member name:
    status, its samples, its baselines' samples, the output check, the clocks and the spin."""
    import torch

    from . import clocks
    from .bench import check_output
    from .inputs import random_args

    metas = [m for _, m in members]
    members_agree(metas)
    first = metas[0]
    groups: dict[Any, list[int]] = {}
    for i, m in enumerate(metas):
        groups.setdefault(repr(_signature(m)), []).append(i)
    recs: dict[str, dict[str, Any]] = {}
    fns: dict[str, Any] = {}
    keys: dict[str, dict[str, str]] = {}  # member -> its baselines' keys in the loop
    for g, idx in enumerate(groups.values()):
        args = random_args(members[idx[0]][0].params, device=runtime.DEVICE, fixed=metas[idx[0]].get("fixed"))
        expected: dict[str, Any] = {}
        tag = f"#{g}" if len(groups) > 1 else ""
        for i in idx:
            launcher, meta = members[i]
            own = baseline_names(meta.get("baselines") or meta.get("baseline"))
            check = check_output(launcher, args, own, meta.get("tolerance"), meta.get("reference"),
                                 meta.get("unchecked"), cache=expected, outputs=meta.get("outputs"))
            recs[meta["name"]] = {"output_check": check or None}
            keys[meta["name"]] = {b: f"baseline:{b}{tag}" for b in own}
            if check.get("passed") is False:
                recs[meta["name"]]["status"] = "failed"
                continue
            fns[meta["name"]] = (lambda launcher=launcher, args=args: launcher(*args))
        for b in baselines_of([metas[i] for i in idx]):
            fns[f"baseline:{b}{tag}"] = (lambda f=baseline_fn(b), args=args: f(*args))
        expected.clear()
    if not any(m["name"] in fns for m in metas):
        return recs
    sampler = clocks.Sampler(torch.cuda.current_device() if torch.cuda.is_available() else 0)
    report: dict[str, Any] = {}
    from . import bench  # looked up at call time: tests replace bench.time_interleaved

    times = bench.time_interleaved(fns, first.get("warmup", 10), first.get("repeat", 50),
                                   first.get("flush", "read"), sample=sampler.take, report=report)
    summary, late = sampler.summary(), report.get("host_bound") or {}
    for meta in metas:
        name = meta["name"]
        if name not in fns:
            continue
        recs[name].update(status="measured", samples=times[name],
                          baselines_samples={b: times[k] for b, k in keys[name].items()},
                          clocks=summary, spin_us=report.get("spin_us"),
                          host_bound=late.get(name, 0) + sum(late.get(k, 0) for k in keys[name].values()))
    return recs


def merge(meta: dict[str, Any], runs: Sequence[dict[str, Any] | None], ladder_run: str,
          members: Sequence[str]) -> dict[str, Any]:
    """One member's record from its processes' records (None: a process that returned nothing).
    A failed output check in any process fails the member; otherwise its samples are pooled,
    process after process (`reps` says how many each gave), and its rates are the medians."""
    got = [r for r in runs if r is not None]
    base = {"ladder": meta.get("ladder"), "ladder_run": ladder_run, "ladder_members": list(members)}
    failed = [r for r in got if r.get("status") == "failed"]
    if failed or not got:
        from .outcheck import describe

        check = failed[0].get("output_check") if failed else None
        return dict(base, status="failed" if failed else "error", output_check=check,
                    message=describe(check) if failed else "no process returned a record")
    samples = [x for r in got for x in r["samples"]]
    own = list(got[0]["baselines_samples"])
    pooled = {b: [x for r in got for x in r["baselines_samples"][b]] for b in own}
    ms = statistics.median(samples)
    first = own[0] if own else None
    flops, nbytes = meta.get("flops"), meta.get("bytes")
    checks = [r["output_check"] for r in got if r.get("output_check")]
    worst = max(checks, key=lambda c: c.get("max_error_over_allowed") or 0) if checks else None
    return dict(base, status="measured", ms=ms, samples=samples, reps=[len(r["samples"]) for r in got],
                baseline=first, baseline_ms=statistics.median(pooled[first]) if first else None,
                baseline_samples=pooled[first] if first else [],
                baselines={b: statistics.median(v) for b, v in pooled.items()},
                baselines_samples=pooled, output_check=worst,
                flop_rate=flops / (ms * 1e-3) if flops else None,
                bandwidth=nbytes / (ms * 1e-3) if nbytes else None,
                clocks=got[0].get("clocks"), clocks_runs=[r.get("clocks") for r in got],
                spin_us=max((r.get("spin_us") or 0) for r in got) or None,
                host_bound=sum(r.get("host_bound") or 0 for r in got), interleaved=True)
