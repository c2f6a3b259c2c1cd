"""Measure what promotion buys on a GPU: the relative error of cuBLASLt's FP8 GEMM with the
tensor core's fast accumulation and with its default (promoted) accumulation, against fp64.

`measure` computes D = A Bᵀ for A (M x K) and B (N x K) in E4M3, for each K, three ways:
torch._scaled_mm with use_fast_accum=True (the tensor core sums all of K), with
use_fast_accum=False (cuBLASLt adds the tensor core's partial sums into fp32 as it goes), and,
where this torch and cuBLASLt offer it, with blockwise scales (1 x 128 for A, 128 x 128 for B,
all 1: the partial sum of every 128 of K promoted with its scales, as chapter 12H's step 2 and
DeepGEMM do); every scale is 1 and D is fp32, so no rounding but the accumulation's is left.
The reference is the same E4M3 values multiplied in fp64. The inputs are uniform in [0, 1)
rounded to E4M3, drawn on the CPU from one seed, so that every partial sum grows and the bits
a short accumulator drops never cancel.

A record is written as JSON, one file per run, to results/promotion/<date>-<letter>-<gpu>.json,
a, b, ... in the order of the day's runs (its own folder: every results/*.json is read as a
verification replay):
{"format": 1,
 "run": {"gpu": "NVIDIA H100 80GB HBM3", "capability": "9.0", "date": "YYYY-MM-DD", "time": "HH:MM:SS" (UTC),
         "torch": "...", "cuda": "...", "seconds": float},
 "inputs": {"M": int, "N": int, "ks": [int, ...], "seed": int, "distribution": str,
            "scales": 1.0, "out_dtype": "float32", "reference": str},
 "series": {"fast" | "promoted" | "blockwise": {"k": [...], "max": [...], "median": [...],
            "mean": [...]}},
 "skipped": {"blockwise": "why"} (only when a series could not run)}
"""

from __future__ import annotations

import json
import re
import time
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable, Sequence

from ..facts.paths import RESULTS

PROMOTION_DIR = RESULTS / "promotion"
KS = (1024, 2048, 4096, 8192, 12288, 16384)
SHAPE = (2048, 2048)
DISTRIBUTION = "uniform in [0, 1), rounded to E4M3 (torch.float8_e4m3fn)"
FORMAT = 1
SERIES = ("fast", "promoted", "blockwise")


def inputs(M: int, N: int, K: int, seed: int = 0) -> tuple[Any, Any]:
    """A (M x K) and B (N x K) in E4M3, uniform in [0, 1) before rounding, drawn on the CPU."""
    import torch

    g = torch.Generator().manual_seed(seed)
    a = torch.rand(M, K, generator=g).to(torch.float8_e4m3fn)
    b = torch.rand(N, K, generator=g).to(torch.float8_e4m3fn)
    return a, b


def _scaled_mm(kind: str) -> Callable[[Any, Any], Any]:
    """D = A Bᵀ in fp32 through torch._scaled_mm, all scales 1, the accumulation `kind` names."""
    import torch

    def run(a: Any, b: Any) -> Any:
        one = torch.ones((), device=a.device)
        if kind == "blockwise":
            M, K = a.shape
            N = b.shape[0]
            sa = torch.ones(K // 128, M, device=a.device).t()              # M x K/128, M-major
            sb = torch.ones(N // 128, K // 128, device=a.device).t()      # K/128 x N/128
            return torch._scaled_mm(a, b.t(), scale_a=sa, scale_b=sb, out_dtype=torch.float32)
        return torch._scaled_mm(a, b.t(), scale_a=one, scale_b=one, out_dtype=torch.float32,
                                use_fast_accum=(kind == "fast"))
    return run


def errors(d: Any, ref: Any) -> dict[str, float]:
    """Max, median and mean of |D - ref| / |ref| over the outputs whose reference is not zero."""
    d, ref = d.double(), ref.double()
    nz = ref != 0
    rel = ((d - ref).abs()[nz] / ref.abs()[nz]).flatten()
    return {"max": float(rel.max()), "median": float(rel.median()), "mean": float(rel.mean())}


def measure(ks: Sequence[int] = KS, shape: tuple[int, int] = SHAPE, seed: int = 0,
            device: str = "cuda", series: Sequence[str] = SERIES) -> dict[str, Any]:
    """The record's "series" and "skipped": per K, the relative errors of each accumulation."""
    import torch

    M, N = shape
    a_all, b_all = inputs(M, N, max(ks), seed)
    a_all, b_all = a_all.to(device), b_all.to(device)
    out: dict[str, dict[str, list[float]]] = {s: {"k": [], "max": [], "median": [], "mean": []} for s in series}
    skipped: dict[str, str] = {}
    for k in sorted(ks):
        a, b = a_all[:, :k].contiguous(), b_all[:, :k].contiguous()
        ref = a.double() @ b.double().t()   # exact: every product a multiple of 2^-18, every sum < 2^14
        for s in series:
            if s in skipped:
                continue
            try:
                d = _scaled_mm(s)(a, b)
            except (RuntimeError, NotImplementedError, TypeError, ValueError) as e:
                skipped[s] = f"{type(e).__name__}: {str(e).splitlines()[0][:300]}"
                continue
            for key, v in errors(d, ref).items():
                out[s][key].append(v)
            out[s]["k"].append(k)
        if device != "cpu":
            torch.cuda.synchronize()
    return {"series": {s: v for s, v in out.items() if s not in skipped}, "skipped": skipped}


def record(ks: Sequence[int] = KS, shape: tuple[int, int] = SHAPE, seed: int = 0,
           device: str = "cuda") -> dict[str, Any]:
    """A whole record: the run's facts, the inputs and `measure`'s series."""
    import torch

    t0 = time.monotonic()
    m = measure(ks, shape, seed, device)
    on_gpu, now = device != "cpu", datetime.now(timezone.utc)
    cap = torch.cuda.get_device_capability() if on_gpu else None
    run = {"gpu": torch.cuda.get_device_name() if on_gpu else "cpu",
           "capability": f"{cap[0]}.{cap[1]}" if cap else None,
           "date": now.strftime("%Y-%m-%d"), "time": now.strftime("%H:%M:%S"),
           "torch": torch.__version__, "cuda": torch.version.cuda,
           "seconds": round(time.monotonic() - t0, 2)}
    doc = {"format": FORMAT, "run": run,
           "inputs": {"M": shape[0], "N": shape[1], "ks": sorted(ks), "seed": seed,
                      "distribution": DISTRIBUTION, "scales": 1.0, "out_dtype": "float32",
                      "reference": "the same E4M3 values multiplied in fp64"},
           "series": m["series"]}
    if m["skipped"]:
        doc["skipped"] = m["skipped"]
    return doc


def gpu_slug(name: str) -> str:
    """'NVIDIA H100 80GB HBM3' -> 'h100': the GPU's model in a file name."""
    m = re.search(r"\b([A-Z]{1,2}\d{2,4}[A-Z]?)\b", name.replace("NVIDIA", ""))
    return (m.group(1) if m else re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")).lower()


def default_path(doc: dict[str, Any], directory: Path | str | None = None) -> Path:
    """results/promotion/<date>-a-<gpu>.json, or the next letter's name when taken."""
    d = Path(directory) if directory is not None else PROMOTION_DIR
    date, gpu = doc["run"]["date"], gpu_slug(doc["run"]["gpu"])
    for letter in "abcdefghijklmnopqrstuvwxyz":
        p = d / f"{date}-{letter}-{gpu}.json"
        if not p.exists():
            return p
    raise FileExistsError(f"too many records of {date} on {gpu} in {d}")


def write(doc: dict[str, Any], path: Path | str | None = None) -> Path:
    """Write a record (to `default_path` unless given); refuses results/ itself, whose every
    .json is read as a verification replay."""
    p = Path(path) if path is not None else default_path(doc)
    if p.resolve().parent == RESULTS.resolve():
        raise ValueError(f"{p}: results/*.json are verification replays; write promotion records "
                         f"to {PROMOTION_DIR.relative_to(RESULTS.parent)}/ (the default)")
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(json.dumps(doc, indent=1) + "\n")
    return p


def validate(doc: dict[str, Any], where: str = "record") -> dict[str, Any]:
    """The record itself, or ValueError naming what it lacks."""
    if doc.get("format") != FORMAT:
        raise ValueError(f"{where}: format {doc.get('format')!r}, expected {FORMAT}")
    for key in ("gpu", "date", "torch"):
        if key not in doc.get("run", {}):
            raise ValueError(f"{where}: run lacks {key!r}")
    for name, s in doc.get("series", {}).items():
        if name not in SERIES or not all(len(s.get(f, ())) == len(s.get("k", ())) for f in ("max", "median")):
            raise ValueError(f"{where}: series {name!r} must be one of {SERIES} with k, max, median alike")
    return doc


def newest(directory: Path | str | None = None) -> dict[str, Any] | None:
    """The newest record of the folder (default results/promotion/), by date, time of day and
    file name, with its file name under "file"; None when there is none."""
    d = Path(directory) if directory is not None else PROMOTION_DIR
    docs = [(validate(json.loads(p.read_text()), p.name), p.name) for p in sorted(d.glob("*.json"))]
    if not docs:
        return None
    doc, name = max(docs, key=lambda x: (x[0]["run"]["date"], x[0]["run"].get("time", ""), x[1]))
    return dict(doc, file=name)


def main(path: Path | None, ks: Sequence[int], size: int, seed: int) -> int:
    """`python -m gpubook promotion`: measure on this machine's GPU and write the record."""
    import torch

    if not torch.cuda.is_available():
        print("promotion: no CUDA GPU here; nothing measured")
        return 2
    doc = record(ks, (size, size), seed)
    missing = [s for s in ("fast", "promoted") if s not in doc["series"]]
    if missing:
        print(f"promotion: nothing written, {' and '.join(missing)} could not run: {doc.get('skipped')}")
        return 1
    out = write(doc, path)
    print(f"promotion: {doc['run']['gpu']}, torch {doc['run']['torch']}, CUDA {doc['run']['cuda']}, "
          f"{doc['run']['seconds']} s")
    for name, s in doc["series"].items():
        print(f"  {name:9s} " + "  ".join(f"K={k}: {mx:.2e}" for k, mx in zip(s["k"], s["max"])))
    for name, why in doc.get("skipped", {}).items():
        print(f"  {name:9s} skipped: {why}")
    print(f"promotion: wrote {out}")
    return 0
