"""Replay exported cases on a GPU host: load, run, compare, time, optionally under compute-sanitizer.

Needs only PyTorch, apache-tvm-ffi and the TVM runtime libraries (TVM_LIBRARY_PATH), plus
nvcc to compile each module's CUDA source for the local GPU when it loads.
"""

from __future__ import annotations

import datetime as _dt
import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from .signature import Param

SANITIZER_TOOLS = ("memcheck", "racecheck")
CASE_KEYS = ("case", "chapter", "name", "kind", "runs_on", "fingerprint")


def load_case(case_dir: Path) -> dict[str, Any]:
    """A case's metadata, with its parameters as Param objects under 'param_objs'."""
    meta = json.loads((case_dir / "case.json").read_text())
    meta["param_objs"] = [Param.from_json(p) for p in meta["params"]]
    meta["case"] = case_dir.name
    return meta


def run_case(case_dir: Path, timing: bool = True) -> dict[str, Any]:
    """Run one case in this process and return its result record (raises nothing on mismatch)."""
    import torch

    from . import runtime
    from .bench import BASELINES, Timing, random_args, time_fn
    from .check import CheckError, run_and_compare
    from .hardware import gpu_for

    meta = load_case(case_dir)
    arch = runtime.local_arch()
    rec: dict[str, Any] = {k: meta.get(k) for k in CASE_KEYS}
    rec.update(bytes=meta.get("bytes"), flops=meta.get("flops"), baseline=meta.get("baseline"))
    if arch not in meta["runs_on"]:
        rec.update(status="not runnable", message=f"not runnable on {arch}")
        return rec
    so = case_dir / f"module-{arch}.so"
    launcher = runtime.load(str(so), meta["name"], meta["param_objs"], arch)
    if meta["kind"] == "trace":  # outputs kept in the results file: gpubook/trace.py
        from .trace import replay_case

        rec.update(replay_case(case_dir, meta, launcher))
        return rec
    if meta["kind"] == "check":
        data = torch.load(case_dir / "tensors.pt")
        args = [
            torch.empty(p.shape, dtype=getattr(torch, p.dtype), device=runtime.DEVICE) if a is None
            else a.to(runtime.DEVICE) for p, a in zip(meta["param_objs"], data["args"])
        ]
        try:
            abs_err, rel_err = run_and_compare(launcher, args, meta["outputs"], data["expected"],
                                               meta["tolerances"])
        except CheckError as err:
            rec.update(status="failed", message=str(err))
            return rec
        rec.update(status="passed", max_abs_error=abs_err, max_rel_error=rel_err)
        return rec
    if not timing:
        rec.update(status="skipped", message="timing disabled")
        return rec
    args = random_args(meta["param_objs"])
    ms = time_fn(lambda: launcher(*args))
    base = meta.get("baseline")
    base_ms = time_fn(lambda: BASELINES[base](*args)) if base else None
    t = Timing(meta["name"], "measured", gpu=runtime.local_gpu_name(), ms=ms,
                     bytes=meta.get("bytes"), flops=meta.get("flops"), baseline_ms=base_ms)
    gpu_for(t.gpu)  # fails loudly for a GPU the hardware table does not know
    rec.update(status="measured", ms=ms, baseline_ms=base_ms, bandwidth=t.bandwidth,
               flop_rate=t.flop_rate, percent_of_peak=t.percent_of_peak())
    return rec


def _child(case_dir: Path, out_json: Path, timing: bool, timeout: float,
           wrapper: list[str] | None = None) -> tuple[dict[str, Any] | None, str, bool]:
    """Run one case in a child process; returns (record or None, output, timed out)."""
    cmd = [sys.executable, "-m", "gpubook", "replay-case", str(case_dir), "--json", str(out_json)]
    if not timing:
        cmd.append("--no-timing")
    cmd = (wrapper or []) + cmd
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, str(out)[-4000:], True
    out = proc.stdout + proc.stderr
    rec = json.loads(out_json.read_text()) if out_json.exists() else None
    if rec is None:
        return None, out[-4000:], False
    return rec, out, False


def _sanitizer_errors(out: str) -> int | None:
    """Errors (racecheck: errors plus warnings) in compute-sanitizer's summary, None if absent."""
    m = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", out)
    if m:
        return int(m.group(1)) + int(m.group(2))
    m = re.search(r"ERROR SUMMARY: (\d+) errors?", out)
    return int(m.group(1)) if m else None


def _sanitize(case_dir: Path, work: Path, timeout: float) -> dict[str, str]:
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return {tool: "not available" for tool in SANITIZER_TOOLS}
    verdicts = {}
    for tool in SANITIZER_TOOLS:
        out_json = work / f"{case_dir.name}.{tool}.json"
        wrapper = [exe, "--tool", tool, "--error-exitcode", "0", "--target-processes", "all"]
        rec, out, timed_out = _child(case_dir, out_json, False, timeout * 10, wrapper)
        n = _sanitizer_errors(out)
        if timed_out:
            verdicts[tool] = "timeout"
        elif n is None or rec is None:
            tail = out.strip().splitlines()[-1][:200] if out.strip() else "no output"
            verdicts[tool] = f"did not finish: {tail}"
        elif n == 0:
            verdicts[tool] = "clean"
        else:
            first = next((ln for ln in out.splitlines() if "=========" in ln and "rror" in ln), "")
            verdicts[tool] = f"{n} errors: {first.strip('= ')[:200]}"
    return verdicts


def replay(export_dir: Path, results: Path | None, sanitize: bool, timeout: float,
           only: str | None = None) -> int:
    """Replay every case under export_dir/cases; write the results file; return the exit code."""
    from . import runtime

    arch = runtime.local_arch()
    if arch is None:
        print("replay: no CUDA GPU visible", file=sys.stderr)
        return 2
    import torch

    work = export_dir / "work"
    work.mkdir(exist_ok=True)
    records = []
    for case_dir in sorted(p for p in (export_dir / "cases").iterdir() if p.is_dir()):
        if only and not re.search(only, case_dir.name):
            continue
        out_json = work / f"{case_dir.name}.json"
        out_json.unlink(missing_ok=True)
        rec, out, timed_out = _child(case_dir, out_json, True, timeout)
        if rec is None:
            meta = load_case(case_dir)
            rec = {k: meta.get(k) for k in CASE_KEYS}
            rec.update(status="timeout" if timed_out else "error",
                       message=(f"stopped after {timeout:g} s" if timed_out else out.strip()[-1500:]))
        if sanitize and rec["status"] == "passed":
            rec["sanitizer"] = _sanitize(case_dir, work, timeout)
        records.append(rec)
        print(_line(rec), flush=True)
    run = {
        "gpu": torch.cuda.get_device_name(0), "arch": arch,
        "date": _dt.date.today().isoformat(), "torch": torch.__version__,
        "sanitizer": list(SANITIZER_TOOLS) if sanitize else [],
    }
    doc = {"format": 1, "run": run, "cases": records}
    if results is not None:
        results.parent.mkdir(parents=True, exist_ok=True)
        results.write_text(json.dumps(doc, indent=1) + "\n")
    print(summary(doc))
    return exit_code(records)


def exit_code(records: list[dict[str, Any]]) -> int:
    """1 if any case failed, hung, broke, or drew a sanitizer complaint; else 0."""
    bad = [r for r in records if r["status"] in ("failed", "timeout", "error")]
    dirty = [r for r in records
             if r.get("sanitizer")
             and any(v not in ("clean", "not available") for v in r["sanitizer"].values())]
    return 1 if bad or dirty else 0


def _line(rec: dict[str, Any]) -> str:
    s = f"{rec['status'].upper():>13}  {rec['chapter']} / {rec['name']} ({rec['kind']})"
    if rec.get("max_abs_error") is not None:
        s += f"  max abs err {rec['max_abs_error']:.3g}"
    if rec.get("ms") is not None:
        s += f"  {rec['ms'] * 1e3:.1f} us"
        if rec.get("percent_of_peak") is not None:
            s += f" ({rec['percent_of_peak']:.0f}% of peak)"
    if rec.get("sanitizer"):
        s += "  sanitizer " + ", ".join(f"{k}: {v}" for k, v in rec["sanitizer"].items())
    if rec.get("message") and rec["status"] not in ("passed", "measured"):
        s += "\n      " + rec["message"].replace("\n", "\n      ")
    return s


def summary(doc: dict[str, Any]) -> str:
    """Counts by status, never counting 'not runnable' as passed."""
    counts: dict[str, int] = {}
    for r in doc["cases"]:
        counts[r["status"]] = counts.get(r["status"], 0) + 1
    run = doc["run"]
    parts = ", ".join(f"{v} {k}" for k, v in sorted(counts.items()))
    return f"replay on {run['gpu']} ({run['arch']}), {run['date']}: {parts}"


def main_case(case_dir: str, out_json: str, timing: bool) -> int:
    rec = run_case(Path(case_dir), timing=timing)
    Path(out_json).write_text(json.dumps(rec))
    return 0
