"""The simulated tier: exported cases run on the CPU in NumSim (tirx-harness), judged like a GPU run.

`python -m gpubook simulate EXPORT_DIR` takes the cases `python -m gpubook export` wrote —
the same inputs, expected outputs and tolerances the H200 replay uses — and, for each
Blackwell-only check (a kernel that has no sm_90a build), runs three tools of tirx-harness
in the simulator's own interpreter (`gpubook/verify/sim_worker.py`, Python 3.12+):

- **numbers**: NumSim executes the kernel for sm_100a on the CPU; its outputs (poisoned with
  NaN before the run, as on a GPU) are compared here with `gpubook.verify.compare.compare`, the
  comparison every GPU check uses, at the case's own tolerances;
- **synccheck**: the barrier protocol (phases overtaken, deadlocks, transaction bytes,
  named/cluster barrier counts, `setmaxnreg`) over the modeled interleavings;
- **racecheck**: unordered conflicting accesses to global, shared and tensor memory,
  missing proxy fences included.

The results file (`results/<date>-numsim.json`) has the replay's format with
``run.simulator`` set; its statuses are "simulated" (every tool ran and agreed), "failed"
(a mismatch or a finding), "error" (a tool could not run the kernel, never a pass), and for
a case that expects a fault (``expect`` trap or race) "caught" or "missed". A simulated
verdict never counts as a run on a GPU: `results.load_runs` leaves these files out unless
asked, and `GPUBOOK_STRICT=1` still demands a B200.
"""

from __future__ import annotations

import datetime as _dt
import json
import math
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any
from ..compile.signature import Param
from ..facts.paths import REPO
from .sim_records import TOOLS

ROOT = REPO
WORKER = Path(__file__).resolve().parent / "sim_worker.py"
SIM_PYTHON_ENV = "GPUBOOK_SIM_PYTHON"
SIM_GPU = "NumSim (CPU)"
SIM_ARCH = "sm_100a"
# A simulated case's verdicts; only "simulated" and "caught" are what a kernel should draw
# (and "missed", for a kernel marked expect="unsafe": a blind spot of the tools, on record).
GOOD = ("simulated", "caught")


def good(rec: dict[str, Any]) -> bool:
    """A simulation whose verdict is what the case asked for."""
    return rec["status"] in GOOD or (rec.get("expect") == "unsafe" and rec["status"] == "missed")


def sim_python() -> str | None:
    """The simulator's interpreter: $GPUBOOK_SIM_PYTHON, else `.venv-sim/bin/python` of the book."""
    exe = os.environ.get(SIM_PYTHON_ENV)
    if exe:
        return exe
    local = ROOT / ".venv-sim" / "bin" / "python"
    return str(local) if local.exists() else None


def blackwell_only(meta: dict[str, Any]) -> bool:
    """A kernel that runs on Blackwell alone (no sm_90a build): the simulated tier's subject."""
    return "sm_100a" in meta.get("runs_on", []) and "sm_90a" not in meta.get("runs_on", [])


def _poisoned(param: Param) -> Any:
    """An output before the run, as PyTorch holds it: NaN, or a sentinel where there is none."""
    import torch

    from .compare import _poison

    t = torch.empty(param.torch_shape, dtype=getattr(torch, param.torch_dtype))
    if t.is_floating_point():  # NaN, and packed E2M1 (which has none) as compare._poison fills it
        _poison(t)
    else:
        t.fill_(-0x5A5A5A5B if t.element_size() >= 4 else -0x5B)
    return t


def _numpy(t: Any) -> Any:
    import torch

    t = t.detach().contiguous().cpu()
    if t.dtype == torch.bfloat16:
        return t.view(torch.int16).numpy().view("uint16")
    if t.element_size() == 1 and t.is_floating_point():   # float8 and packed E2M1: carried as bytes
        return t.view(torch.uint8).numpy()
    return t.numpy()


def write_inputs(data: dict[str, Any], meta: dict[str, Any], work: Path) -> None:
    """The case's arguments (`data`, its tensors.pt) as NumPy arrays for the worker, outputs
    poisoned."""
    import numpy as np

    args = data["args"]
    arrays, dtypes = {}, {}
    outputs = [meta["params"][i]["name"] for i in meta["outputs"]]  # in the order of `expected`
    for i, p in enumerate(meta["params"]):
        if i in meta["outputs"] or args[i] is None:
            t = _poisoned(Param.from_json(p))
        else:
            t = args[i]
        arrays[p["name"]] = _numpy(t)
        dtypes[p["name"]] = p["dtype"]
    np.savez(work / "inputs.npz", **arrays)
    (work / "inputs.json").write_text(json.dumps({"dtypes": dtypes, "outputs": outputs}))


def _finding_line(entry: dict[str, Any]) -> str:
    kept = entry.get("kept") or []
    if entry.get("error"):
        return entry["error"].splitlines()[0][:300]
    if not kept:
        return entry["verdict"]
    f = kept[0]
    head = (f.get("message") or "").strip().splitlines()
    return f"{f.get('kind')}: {head[0][:300] if head else ''}"


def judge(meta: dict[str, Any], tools: dict[str, Any], expected: list[Any],
          actual: dict[str, Any] | None) -> dict[str, Any]:
    """The case's record from the tools' reports and the outputs NumSim computed."""
    from .compare import CheckError, compare, from_bytes

    params = {p["name"]: Param.from_json(p) for p in meta.get("params", [])}
    rec: dict[str, Any] = {"tools": {}}
    problems: list[str] = []
    errors: list[str] = []
    for tool, entry in tools.items():
        verdict = entry["verdict"]
        if tool == "numbers" and verdict != "unable":
            verdict = "review" if entry.get("findings") else "ran"
        rec["tools"][tool] = {"verdict": verdict, "findings": entry.get("findings", 0),
                              "seconds": entry.get("seconds")}
        if entry.get("scope"):  # a run over the resident clusters only (see sim_worker)
            rec["tools"][tool]["scope"] = entry["scope"]
        # "unable": the tool could not run the kernel; "incomplete": it could not certify it.
        # Neither is a finding, and neither is a pass. ("error" is a checker's finding.)
        if entry["verdict"] in ("unable", "incomplete"):
            errors.append(f"{tool} {entry['verdict']}: {_finding_line(entry)}")
            rec["tools"][tool]["message"] = _finding_line(entry)
        elif entry["verdict"] != "clean":
            problems.append(f"{tool}: {_finding_line(entry)}")
            rec["tools"][tool]["message"] = _finding_line(entry)
            rec["tools"][tool]["first"] = (entry.get("kept") or [{}])[0]
    if "numbers" in tools and tools["numbers"]["verdict"] != "unable":
        if actual is None:
            errors.append("numbers: NumSim wrote no outputs")
        else:
            rec["output_digest"] = output_digest(actual)
            abs_err = rel_err = frac = 0.0
            try:
                for k, name in enumerate(actual):
                    rtol, atol = meta["tolerances"][k]
                    a, r, f = compare(name, from_bytes(params.get(name), actual[name]), expected[k], rtol, atol)
                    abs_err, rel_err, frac = max(abs_err, a), max(rel_err, r), max(frac, f)
                rec.update(max_abs_error=abs_err, max_rel_error=rel_err, max_error_over_allowed=frac)
                rec["tools"]["numbers"]["verdict"] = "match"
            except CheckError as err:
                problems.append(f"numbers: {str(err).splitlines()[0]}")
                rec["tools"]["numbers"]["verdict"] = "mismatch"
                rec["tools"]["numbers"]["message"] = str(err)[:1500]
    rec["tolerances"] = meta["tolerances"]
    expect = meta.get("expect")
    if expect in ("trap", "race", "unsafe"):
        rec["expect"] = expect
        if problems:
            rec.update(status="caught", message="; ".join(problems + errors))
        elif errors:
            rec.update(status="error", message="; ".join(errors))
        elif expect == "unsafe":  # a blind spot of the tools, shown as such: the static rules judge it
            rec.update(status="missed", message="every tool ran clean on a kernel that breaks a "
                       "PTX ordering rule: a blind spot of the simulator, covered by gpubook.lint")
        else:
            rec.update(status="missed", message="every tool ran clean on a kernel that must fail")
    elif errors:
        rec.update(status="error", message="; ".join(errors + problems))
    elif problems:
        rec.update(status="failed", message="; ".join(problems))
    else:
        rec.update(status="simulated", message=None)
    return rec


def launch_clusters(meta: dict[str, Any]) -> int | None:
    """The clusters of a case's launch (a CTA outside a cluster is a cluster of one), from the
    build's launch facts ('grid 608 · block 128 · cluster 2'); None when it has not one launch."""
    import re

    launches = (meta.get("facts") or {}).get("launch") or []
    if len(launches) != 1:
        return None
    dims = {k: re.search(rf"{k} ([\d×]+)", launches[0]) for k in ("grid", "cluster")}
    if dims["grid"] is None:
        return None
    size = {k: math.prod(int(x) for x in m.group(1).split("×")) if m else 1 for k, m in dims.items()}
    return size["grid"] // size["cluster"]


def coverage(meta: dict[str, Any]) -> dict[str, Any]:
    """What part of the launch a simulation with `resident` clusters ran: {"partial": bool,
    "clusters": N, "of": M} (M None where the launch could not be read). The clusters past
    the first N never start; the tiles they would have taken reach the output only through
    cluster launch control, which the comparison of every output then checks."""
    n, total = int(meta["resident"]), launch_clusters(meta)
    return {"partial": total is None or n < total, "clusters": min(n, total) if total else n, "of": total}


def output_digest(actual: dict[str, Any]) -> str:
    """A digest of what the simulated kernel wrote (every output's name, dtype, shape and bytes):
    what a later simulation of the same kernel on the same inputs must reproduce bit for bit,
    whatever reference it is compared with."""
    import hashlib

    import numpy as np

    h = hashlib.sha256()
    for name in sorted(actual):
        a = np.ascontiguousarray(actual[name])
        h.update(f"{name}:{a.dtype.str}:{a.shape};".encode())
        h.update(a.tobytes())
    return h.hexdigest()[:16]


def simulate_case(case_dir: Path, tools: tuple[str, ...] = TOOLS, timeout: float = 1800.0,
                  workers: int = 2, python: str | None = None) -> dict[str, Any]:
    """Simulate one exported case; return its result record (never raises on a finding)."""
    import numpy as np
    import torch

    from .replay import CASE_KEYS, load_case

    meta = load_case(case_dir)
    rec: dict[str, Any] = {k: meta.get(k) for k in CASE_KEYS}
    exe = python or sim_python()
    if exe is None:
        rec.update(status="not simulated", message=f"no simulator interpreter (set {SIM_PYTHON_ENV} "
                   "or make .venv-sim from requirements-sim.txt)")
        return rec
    if not (case_dir / "kernel.json").exists():
        rec.update(status="not simulated", message="exported without kernel.json: export it again")
        return rec
    work = Path(tempfile.mkdtemp(prefix="gpubook-sim-"))
    try:
        data = torch.load(case_dir / "tensors.pt")
        write_inputs(data, meta, work)
        cmd = [exe, str(WORKER), str(case_dir), str(work), "--tools", ",".join(tools),
               "--workers", str(workers)]
        if meta.get("resident") is not None:  # the first N clusters resident, the rest stolen by CLC
            cmd += ["--resident", str(meta["resident"])]
        env = dict(os.environ)
        env.pop("PYTHONPATH", None)
        t0 = time.time()
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env,
                                  start_new_session=True)
            out, timed_out = proc.stdout + proc.stderr, False
        except subprocess.TimeoutExpired as exc:
            out, timed_out = str(exc.stdout or ""), True
        report_path = work / "report.json"
        report = json.loads(report_path.read_text()) if report_path.exists() else {"tools": {}}
        for tool in tools:  # what the worker never reported did not run
            if tool not in report["tools"]:
                why = (f"timed out after {timeout:.0f} s" if timed_out
                       else (out.strip().splitlines() or ["the worker died"])[-1][:300])
                report["tools"][tool] = {"verdict": "unable", "error": why, "findings": 0}
        actual = None
        if (work / "outputs.npz").exists():
            z = np.load(work / "outputs.npz")
            actual = {k: z[k] for k in z.files}
        rec.update(judge(meta, report["tools"], data["expected"], actual))
        rec["simulator"] = report.get("simulator")
        if meta.get("resident") is not None:
            rec["resident"] = meta["resident"]
            rec["coverage"] = coverage(meta)
        rec["seconds"] = round(time.time() - t0, 1)
        return rec
    finally:
        shutil.rmtree(work, ignore_errors=True)


def selected(export_dir: Path, only: str | None = None, all_archs: bool = False) -> list[Path]:
    """The check cases of an export that the simulated tier covers: by default the Blackwell-only
    kernels and the kernels that must trap, race or break a rule; `all_archs` adds the rest."""
    import re

    out = []
    for d in sorted((export_dir / "cases").iterdir()):
        if not (d / "case.json").exists():
            continue
        meta = json.loads((d / "case.json").read_text())
        if meta.get("kind") != "check" or meta.get("expect") == "fail":
            continue
        # Blackwell-only kernels, and every kernel broken on purpose (what the tools make of it is
        # shown in appendix D, whatever the arch)
        if not all_archs and not blackwell_only(meta) and not meta.get("expect"):
            continue
        if only and not re.search(only, d.name):
            continue
        out.append(d)
    return out


def results_path(directory: Path | None = None, date: str | None = None) -> Path:
    """`results/<date>-numsim.json`, or `<date>-b-numsim.json`, ... when that date has one."""
    d = directory or (ROOT / "results")
    date = date or _dt.date.today().isoformat()
    p = d / f"{date}-numsim.json"
    letter = ord("b")
    while p.exists():
        p = d / f"{date}-{chr(letter)}-numsim.json"
        letter += 1
    return p


def simulator_version(python: str | None = None) -> str | None:
    exe = python or sim_python()
    if exe is None:
        return None
    proc = subprocess.run([exe, "-c", "import tirx_harness; print(tirx_harness.__version__)"],
                          capture_output=True, text=True)
    return f"tirx-harness {proc.stdout.strip()}" if proc.returncode == 0 else None


def summary_table(cases: list[dict[str, Any]]) -> str:
    """A plain-text table of the run: one line per case with each tool's verdict."""
    rows = [("case", "status", "numbers", "synccheck", "racecheck", "max abs err", "of allowance", "clusters", "s")]
    for c in cases:
        t = c.get("tools", {})
        err, frac, cov = c.get("max_abs_error"), c.get("max_error_over_allowed"), c.get("coverage") or {}
        rows.append((c["case"], c["status"], *(t.get(k, {}).get("verdict", "-") for k in TOOLS),
                     "-" if err is None else f"{err:.3g}", "-" if frac is None else f"{100 * frac:.0f}%",
                     f"{cov['clusters']} of {cov['of'] or '?'}" if cov.get("partial") else "all",
                     str(c.get("seconds", "-"))))
    widths = [max(len(str(r[i])) for r in rows) for i in range(len(rows[0]))]
    return "\n".join("  ".join(str(v).ljust(w) for v, w in zip(r, widths)) for r in rows)


def simulate(export_dir: Path, results: Path | None = None, only: str | None = None,
             tools: tuple[str, ...] = TOOLS, timeout: float = 1800.0, jobs: int = 1,
             workers: int = 2, all_archs: bool = False, merge: Path | None = None) -> int:
    """Simulate the selected cases of an export, write the results file, print a summary.

    Returns 1 when a case failed, could not be simulated, or a broken kernel went uncaught.
    `merge` names an earlier results file whose cases are kept unless simulated again.
    """
    from concurrent.futures import ThreadPoolExecutor

    export_dir = Path(export_dir)
    exe = sim_python()
    version = simulator_version(exe)
    if version is None:
        print(f"simulate: no usable simulator interpreter ({exe or 'none found'}); set "
              f"{SIM_PYTHON_ENV} or make .venv-sim from requirements-sim.txt", file=sys.stderr)
        return 2
    cases = selected(export_dir, only, all_archs)
    out = results or results_path()
    kept: list[dict[str, Any]] = []
    if merge is not None and merge.exists():
        names = {c.name for c in cases}
        kept = [c for c in json.loads(merge.read_text())["cases"] if c["case"] not in names]
    run = {"gpu": SIM_GPU, "arch": SIM_ARCH, "date": _dt.date.today().isoformat(),
           "simulator": version, "tools": list(tools), "sanitizer": []}
    done: list[dict[str, Any]] = []
    print(f"simulate: {len(cases)} cases with {version} ({', '.join(tools)}), {jobs} at a time",
          flush=True)
    t_all = time.time()
    order = {c.name: i for i, c in enumerate(cases)}

    def one(d: Path) -> dict[str, Any]:
        rec = simulate_case(d, tools, timeout, workers, exe)
        done.append(rec)
        print(f"simulate: [{len(done)}/{len(cases)}] {d.name}: {rec['status']}"
              f" ({rec.get('seconds', 0)} s)" + (f" — {rec['message'][:200]}" if rec.get("message") else ""),
              flush=True)
        payload = {"format": 2, "run": run,
                   "cases": kept + sorted(done, key=lambda c: order.get(c["case"], 0))}
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps(payload, indent=1))
        return rec

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        list(pool.map(one, cases))
    done.sort(key=lambda c: order[c["case"]])
    print(summary_table(done))
    bad = [c for c in done if not good(c)]
    print(f"simulate: {len(done) - len(bad)} of {len(done)} as expected in {time.time() - t_all:.0f} s; "
          f"results in {out}")
    return 1 if bad else 0
