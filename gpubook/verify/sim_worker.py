"""Run one exported case through NumSim, synccheck and racecheck (tirx-harness), on the CPU.

This file runs in the simulator's own interpreter (Python 3.12+, `requirements-sim.txt`):
it imports apache-tvm, NumPy and tirx-harness only — never PyTorch, never the rest of
gpubook — and is started by path by `gpubook.simulate`, which prepares its inputs and judges
its outputs with the same comparison as every GPU check.

    python sim_worker.py CASE_DIR WORK_DIR --tools numbers,synccheck,racecheck [--resident N]

Reads `CASE_DIR/kernel.json` (the PrimFunc as exported) and `WORK_DIR/inputs.npz` with
`WORK_DIR/inputs.json` (each parameter's dtype); writes `WORK_DIR/outputs.npz` and
`WORK_DIR/report.json`, the latter rewritten after each tool so that a run stopped by a
timeout keeps what the earlier tools found.

With `--resident N`, every tool runs the launch with only its first N clusters resident (a
CTA is a cluster of one): NumSim's cluster launch control then hands each of the other
clusters to a resident one that asks, so a resident cluster computes several tiles. Without
it, every cluster of the grid is resident and a `try_cancel` never succeeds.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from pathlib import Path

FINDINGS_KEPT = 8  # findings kept per tool in the report (the count is always kept)


def _inputs(work: Path) -> dict:
    import ml_dtypes
    import numpy as np

    spec = json.loads((work / "inputs.json").read_text())
    data = np.load(work / "inputs.npz")
    out = {}
    for name, dtype in spec["dtypes"].items():
        a = data[name]
        if dtype == "bfloat16":  # carried as its bits: NumPy has no bfloat16 of its own
            a = a.view(ml_dtypes.bfloat16)
        elif dtype.startswith("float8_"):  # and the float8 formats as their bytes
            a = a.view(getattr(ml_dtypes, dtype))
        elif dtype == "float4_e2m1fn":  # packed E2M1, two to a byte (low nibble first): NumSim
            a = np.ascontiguousarray(a, dtype=np.uint8)  # takes a buffer of them as its uint8 bytes
        out[name] = a
    return out


def _finding(f: dict) -> dict:
    keep = {k: f.get(k) for k in ("status", "kind", "message")}
    details = f.get("details") or {}
    for k in ("reason", "cause", "access_pair", "hint"):
        if k in details:
            keep[k] = str(details[k])[:600]
    keep["message"] = str(keep.get("message") or "")[:1200]
    return keep


def _subset(resident: int | None):
    """The execution subset of the first `resident` clusters, or None for the whole grid."""
    if resident is None:
        return None
    from tirx_harness.numsim.api import ExecutionSubset

    return ExecutionSubset(cluster_ids=tuple(range(resident)))


def _checker(tool: str, func, inputs: dict, resident: int | None = None) -> dict:
    import tirx_harness

    if resident is None:
        report = getattr(tirx_harness, tool)(func, inputs)
    else:  # the public entry points take no subset; these are what they call, with one
        from tirx_harness.numsim import checkers

        run = checkers._run_synccheck if tool == "synccheck" else checkers._run_racecheck
        report = run(func, inputs, subset=_subset(resident))
    d = report.to_dict()
    findings = d.get("findings") or []
    entry: dict = {}
    if resident is not None:
        # A checker run on a subset always adds one note that it did not see the whole grid
        # (reason "subset_execution"): here that is the point, since the other clusters never
        # start — their tiles are taken through cluster launch control. The note becomes the
        # analysis' scope; any other finding, or another reason for incompleteness, stays.
        scope = [f for f in findings if f.get("kind") == "analysis_incomplete"
                 and (f.get("details") or {}).get("reason") == "subset_execution"]
        findings = [f for f in findings if f not in scope]
        if scope:
            det = scope[0]["details"]
            entry["scope"] = (f"{det.get('selected_warp_count')} of {det.get('total_warp_count')} warps: "
                              f"the {resident} resident cluster{'s' if resident != 1 else ''}")
            if d["verdict"] == "incomplete" and not findings:
                d["verdict"] = "clean"
    entry.update({"verdict": d["verdict"], "findings": len(findings),
                  "kept": [_finding(f) for f in findings[:FINDINGS_KEPT]],
                  "text": report.format()[:6000] if hasattr(report, "format") else ""})
    return entry


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser()
    p.add_argument("case", type=Path)
    p.add_argument("work", type=Path)
    p.add_argument("--tools", default="numbers,synccheck,racecheck")
    p.add_argument("--workers", type=int, default=2)
    p.add_argument("--resident", type=int, default=None, help="clusters resident (default: all)")
    args = p.parse_args(argv)

    import numpy as np
    import tvm

    import tirx_harness
    from tirx_harness import numsim

    report: dict = {"simulator": f"tirx-harness {tirx_harness.__version__}",
                    "python": sys.version.split()[0], "tools": {}}
    out_path = args.work / "report.json"

    def save() -> None:
        out_path.write_text(json.dumps(report, indent=1))

    func = tvm.ir.load_json((args.case / "kernel.json").read_text())
    inputs = _inputs(args.work)
    outputs = json.loads((args.work / "inputs.json").read_text())["outputs"]
    for tool in args.tools.split(","):
        t0 = time.time()
        try:
            if tool == "numbers":
                module = numsim.transpile(func)
                res = numsim.Engine(max_workers=args.workers).run(module, dict(inputs),
                                                                   subset=_subset(args.resident))
                arrays = {}
                for name in outputs:
                    a = np.asarray(res.outputs[name])
                    if a.dtype.name == "bfloat16":
                        a = a.astype(np.float32)
                    elif a.dtype.itemsize == 1 and a.dtype.kind not in "iub":  # float8 and E2M1: bytes
                        a = a.view(np.uint8)
                    arrays[name] = a
                np.savez(args.work / "outputs.npz", **arrays)
                diags = [d for d in res.diagnostics if d.get("status") == "review"]
                entry = {"verdict": "review" if diags else "clean", "findings": len(diags),
                         "kept": [_finding(d) for d in diags[:FINDINGS_KEPT]]}
            else:
                entry = _checker(tool, func, dict(inputs), args.resident)
        except Exception as err:  # the tool could not run this kernel: never a pass
            entry = {"verdict": "unable", "findings": 0, "kept": [],
                     "error": f"{type(err).__name__}: {err}"[:3000],
                     "traceback": traceback.format_exc()[-3000:]}
        entry["seconds"] = round(time.time() - t0, 2)
        report["tools"][tool] = entry
        save()
    return 0


if __name__ == "__main__":
    sys.exit(main())
