"""Replay exported cases on a GPU host: load, run, compare, time, optionally under compute-sanitizer.

Needs only PyTorch, apache-tvm-ffi and the TVM runtime libraries (TVM_LIBRARY_PATH), plus
nvcc to compile each module's CUDA source for the local GPU when it loads.
"""

from __future__ import annotations

import datetime as _dt
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

from ..compile.signature import Param
from ..run.protocol import REPEATS
from .verdicts import (  # noqa: F401 - the verdicts, where a replay's reader looks them up
    CASE_KEYS, MAX_RACE_LINES, MAX_REPORT_LINES, TRAP_ERRORS, distinct_reports, judge_race, judge_trap,
                       race_reports, sanitizer_verdict)

SANITIZER_TOOLS = ("memcheck", "racecheck")
# 2: stress records, per-repeat samples, flush and dtype of perf cases, self-test statuses.
RESULTS_FORMAT = 2
# Statuses that make a replay fail; "failed as expected" is a self-test doing its job.
BAD_STATUSES = ("failed", "timeout", "error", "passed unexpectedly")
UNSAFE_MESSAGE = ("breaks a PTX ordering rule on purpose: a run that passes proves nothing about it, "
                  "so no GPU run judges it; gpubook.lint judges it at build time")


def load_case(case_dir: Path) -> dict[str, Any]:
    """A case's metadata, with its parameters as Param objects under 'param_objs'."""
    from ..run.record import FORMAT_VERSION

    meta = json.loads((case_dir / "case.json").read_text())
    if meta.get("format", 1) > FORMAT_VERSION:
        raise RuntimeError(f"{case_dir.name} was exported in format {meta['format']}; this gpubook "
                           f"reads up to format {FORMAT_VERSION}: update it on this host")
    meta["param_objs"] = [Param.from_json(p) for p in meta["params"]]
    meta["case"] = case_dir.name
    return meta


def run_case(case_dir: Path, timing: bool = True, stress: bool = True) -> dict[str, Any]:
    """Run one case in this process and return its result record (raises nothing on mismatch).

    `timing=False` skips performance cases; `stress=False` skips a check's stress launches
    (the compute-sanitizer runs check one launch).
    """
    import torch

    from ..run import runtime
    from ..run.bench import measure
    from .compare import CheckError, run_and_compare
    from ..facts.hardware import gpu_for

    meta = load_case(case_dir)
    arch = runtime.local_arch()
    rec: dict[str, Any] = {k: meta.get(k) for k in CASE_KEYS}
    rec.update(bytes=meta.get("bytes"), flops=meta.get("flops"), baseline=meta.get("baseline"))
    if meta["kind"] == "perf":
        rec.update(dtype=meta.get("dtype"), flush=meta.get("flush", "read"))
    if meta.get("expect") == "fail":
        rec["expect"] = "fail"
    if arch not in meta["runs_on"]:
        rec.update(status="not runnable", message=f"not runnable on {arch}")
        return rec
    so = case_dir / f"module-{arch}.so"
    launcher = runtime.load(str(so), meta["name"], meta["param_objs"], arch)
    if meta["kind"] == "trace":  # outputs kept in the results file: gpubook/run/trace.py
        from ..run.trace import replay_case

        rec.update(replay_case(case_dir, meta, launcher))
        return rec
    if meta["kind"] == "check":
        data = torch.load(case_dir / "tensors.pt")
        n_stress = meta.get("stress", 0) if stress else 0
        variants = [(v["args"], v["expected"]) for v in data.get("variants", [])]
        try:
            outcome = run_and_compare(launcher, data["args"], meta["outputs"], data["expected"],
                                      meta["tolerances"], stress=n_stress, variants=variants)
        except CheckError as err:
            rec.update(status="failed", message=str(err), tolerances=[list(t) for t in meta["tolerances"]])
            if err.stress is not None:
                rec["stress"] = err.stress
            if meta.get("expect") == "fail" and (meta.get("expect_message") or "") in str(err):
                rec["status"] = "failed as expected"
            return rec
        # the error as a fraction of the whole allowance (atol + rtol |ref|, elementwise), and
        # the allowance itself, so that a reader never weighs the absolute error against atol alone
        rec.update(status="passed", max_abs_error=outcome.max_abs_error,
                   max_rel_error=outcome.max_rel_error,
                   max_error_over_allowed=outcome.max_error_over_allowed,
                   tolerances=[list(t) for t in meta["tolerances"]])
        if outcome.stress is not None:
            rec["stress"] = outcome.stress
        if meta.get("expect") == "fail":
            rec.update(status="passed unexpectedly",
                       message=f"a self-test that must fail ({meta.get('expect_message')}) passed")
        return rec
    if not timing:
        rec.update(status="skipped", message="timing disabled")
        return rec
    t = measure(launcher, meta["name"], baseline=meta.get("baselines") or meta.get("baseline"),
                flush=meta.get("flush", "read"), warmup=meta.get("warmup", 10), repeat=meta.get("repeat", 50),
                **{k: meta.get(k) for k in ("bytes", "flops", "dtype", "tolerance", "reference", "unchecked",
                                            "fixed", "outputs")})
    gpu_for(t.gpu)  # fails loudly for a GPU the hardware table does not know
    if t.output_check is not None:
        rec["output_check"] = t.output_check
    elif meta.get("tolerance") is None:  # a case exported before timed outputs were checked
        rec["output_check"] = {"unchecked": "the case names no tolerance"}
    if t.status == "failed":
        rec.update(status="failed", message=t.reason)
        return rec
    rec.update(status="measured", ms=t.ms, baseline_ms=t.baseline_ms, bandwidth=t.bandwidth,
               flop_rate=t.flop_rate, percent_of_peak=t.percent_of_peak(),
               percent_of_bandwidth=t.percent_of_bandwidth(), percent_of_flops=t.percent_of_flops(),
               samples=t.samples, baseline_samples=t.baseline_samples, clocks=t.clocks,
               interleaved=t.interleaved, within_noise=t.within_noise())
    if meta.get("baselines"):
        rec.update(baselines=t.baselines, baselines_samples=t.baselines_samples)
    return rec


def _child(case_dir: Path, out_json: Path, timing: bool, timeout: float,
           wrapper: list[str] | None = None,
           stress: bool = True) -> tuple[dict[str, Any] | None, str, bool]:
    """Run one case in a child process; returns (record or None, output, timed out)."""
    cmd = [sys.executable, "-m", "gpubook", "replay-case", str(case_dir), "--json", str(out_json)]
    if not timing:
        cmd.append("--no-timing")
    if not stress:
        cmd.append("--no-stress")
    cmd = (wrapper or []) + cmd
    try:
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout,
                              start_new_session=True)
    except subprocess.TimeoutExpired as exc:
        out = (exc.stdout or b"") if isinstance(exc.stdout, bytes) else (exc.stdout or "")
        return None, str(out)[-4000:], True
    out = proc.stdout + proc.stderr
    rec = json.loads(out_json.read_text()) if out_json.exists() else None
    if rec is None:  # keep the head too: a device printf report comes before the traceback
        return None, (out if len(out) <= 8000 else out[:4000] + "\n…\n" + out[-4000:]), False
    return rec, out, False


def _sanitize(case_dir: Path, work: Path, timeout: float,
              outputs: dict[str, tuple[str, bool, bool]] | None = None) -> dict[str, str]:
    """Each tool's verdict on one launch of the case. `outputs`, when given, receives each
    tool's (output, finished, timed out), for judging a case that expects a race."""
    exe = shutil.which("compute-sanitizer")
    if exe is None:
        return {tool: "not available" for tool in SANITIZER_TOOLS}
    verdicts = {}
    for tool in SANITIZER_TOOLS:
        out_json = work / f"{case_dir.name}.{tool}.json"
        out_json.unlink(missing_ok=True)
        wrapper = [exe, "--tool", tool, "--error-exitcode", "0", "--target-processes", "all"]
        rec, out, timed_out = _child(case_dir, out_json, False, timeout * 10, wrapper, stress=False)
        verdicts[tool] = sanitizer_verdict(out, rec, timed_out)
        if outputs is not None:
            outputs[tool] = (out, rec is not None, timed_out)
    return verdicts


def replay(export_dir: Path, results: Path | None, sanitize: bool, timeout: float,
           only: str | None = None, jobs: int = 1, repeats: int | None = None) -> int:
    """Replay every case under export_dir/cases; write the results file; return the exit code.

    Check cases (and their sanitizer runs) go through `jobs` child processes at a time; timed
    cases run afterwards on an otherwise idle GPU, a ladder at a time (gpubook.run.protocol):
    each ladder's loop runs in `repeats` child processes, one after the other. The results file
    is rewritten after every case, so a replay stopped part-way still leaves what it established.
    """
    from concurrent.futures import ThreadPoolExecutor

    from ..run import runtime

    arch = runtime.local_arch()
    if arch is None:
        print("replay: no CUDA GPU visible", file=sys.stderr)
        return 2
    import torch

    work = export_dir / "work"
    work.mkdir(exist_ok=True)
    os.environ.setdefault(runtime.CUBIN_CACHE_ENV, str(work / "cubins"))  # one compile per module
    cases = [p for p in sorted((export_dir / "cases").iterdir()) if p.is_dir()
             and (not only or re.search(only, p.name))]
    checks = [c for c in cases if load_case(c)["kind"] == "check"]
    timed = [c for c in cases if c not in checks]
    run = {
        "gpu": torch.cuda.get_device_name(0), "arch": arch,
        "date": _dt.date.today().isoformat(), "torch": torch.__version__,
        "sanitizer": list(SANITIZER_TOOLS) if sanitize else [],
        "repeats": max(1, repeats or REPEATS),
    }
    from ..run import environment

    run.update(libraries=environment.libraries(), **environment.gpu_facts())
    # Exported modules carry CUDA source, compiled here as they load: by this host's compiler,
    # with the book's ptxas options (the cases' "toolchain" is the exporting machine's).
    from ..compile import toolchain

    run["loaded_with"] = toolchain.identity()
    done: dict[str, dict[str, Any]] = {}

    def write() -> dict[str, Any]:
        doc = {"format": RESULTS_FORMAT, "run": run,
               "cases": [done[c.name] for c in cases if c.name in done]}
        if results is not None:
            results.parent.mkdir(parents=True, exist_ok=True)
            results.write_text(json.dumps(doc, indent=1) + "\n")
        return doc

    def one(case_dir: Path) -> dict[str, Any]:
        meta = load_case(case_dir)
        if meta.get("expect") == "unsafe":  # breaks an ordering rule on purpose: no run judges it
            rec = {k: meta.get(k) for k in CASE_KEYS}
            rec.update(status="not judged", expect="unsafe", message=UNSAFE_MESSAGE)
            return rec
        out_json = work / f"{case_dir.name}.json"
        out_json.unlink(missing_ok=True)
        rec, out, timed_out = _child(case_dir, out_json, True, timeout)
        if meta.get("expect") == "trap":
            return judge_trap(meta, rec, out, timed_out, timeout)
        if rec is None:
            rec = {k: meta.get(k) for k in CASE_KEYS}
            rec.update(status="timeout" if timed_out else "error",
                       message=(f"stopped after {timeout:g} s" if timed_out else out.strip()[-1500:]))
        if meta.get("expect") == "race":
            if rec["status"] in ("timeout", "error", "not runnable"):
                return rec
            if not sanitize:
                return judge_race(meta, rec, None, why_not="the replay ran without --sanitize")
            outputs: dict[str, tuple[str, bool, bool]] = {}
            verdicts = _sanitize(case_dir, work, timeout, outputs)
            if "racecheck" not in outputs:
                return judge_race(meta, rec, None, why_not="compute-sanitizer is not on PATH")
            race_out, finished, race_timed_out = outputs["racecheck"]
            res = judge_race(meta, rec, race_out, finished=finished, timed_out=race_timed_out)
            res["sanitizer"] = verdicts
            return res
        if sanitize and rec["status"] in ("passed", "failed as expected"):
            rec["sanitizer"] = _sanitize(case_dir, work, timeout)
        return rec

    def finish(case_dir: Path, rec: dict[str, Any]) -> None:
        done[case_dir.name] = rec
        print(_line(rec), flush=True)
        write()

    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:
        for case_dir, rec in zip(checks, pool.map(one, checks)):
            finish(case_dir, rec)
    runnable = [c for c in timed if arch in load_case(c)["runs_on"]]
    with ThreadPoolExecutor(max_workers=max(1, jobs)) as pool:  # compile every timed module first, in parallel
        list(pool.map(lambda c: subprocess.run(
            [sys.executable, "-m", "gpubook", "replay-ladder", "--load-only", "--json", str(work / f"{c.name}.load.json"),
             str(c)], capture_output=True, timeout=timeout), runnable))
    for group in ladders(timed):
        for case_dir, rec in zip(group, time_ladder(group, work, timeout, run["repeats"], run)):
            finish(case_dir, rec)
    doc = write()
    records = doc["cases"]
    print(summary(doc))
    return exit_code(records)


# How a device trap surfaces in the child: the CUDA error the next synchronisation raises.
def exit_code(records: list[dict[str, Any]]) -> int:
    """1 if any case failed, hung, broke, or drew a sanitizer complaint (a case that expects
    a race must draw racecheck's: its status says whether it did); else 0. A case 'not
    judged' (a race case replayed without --sanitize) fails nothing and passes nothing."""
    bad = [r for r in records if r["status"] in BAD_STATUSES]
    dirty = [r for r in records
             if r.get("sanitizer") and r["status"] != "failed as expected"
             and any(v not in ("clean", "not available") for tool, v in r["sanitizer"].items()
                     if not (tool == "racecheck" and r.get("expect") == "race"))]
    return 1 if bad or dirty else 0


def _line(rec: dict[str, Any]) -> str:
    s = f"{rec['status'].upper():>13}  {rec['chapter']} / {rec['name']} ({rec['kind']})"
    if rec.get("max_abs_error") is not None:
        s += f"  max abs err {rec['max_abs_error']:.3g}"
    if rec.get("ms") is not None:
        s += f"  {rec['ms'] * 1e3:.1f} us"
        if rec.get("percent_of_peak") is not None:
            s += f" ({rec['percent_of_peak']:.0f}% of peak)"
    if rec.get("stress"):
        st = rec["stress"]
        s += f"  stress {st['failures']}/{st['launches']} failed"
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


def ladders(timed: list[Path]) -> list[list[Path]]:
    """The timed cases grouped by the loop that times them together (protocol.ladder_key), in
    the order each ladder first appears."""
    from ..run.protocol import ladder_key

    groups: dict[tuple[str, str], list[Path]] = {}
    for c in timed:
        groups.setdefault(ladder_key(load_case(c)), []).append(c)
    return list(groups.values())


def time_ladder(group: list[Path], work: Path, timeout: float, repeats: int,
                run: dict[str, Any]) -> list[dict[str, Any]]:
    """Each case's record of a ladder timed in `repeats` child processes, merged."""
    import uuid

    from ..run.bench import Timing
    from ..run.protocol import members_agree, merge

    metas = [load_case(c) for c in group]
    if any(run["arch"] not in m["runs_on"] for m in metas):  # time those that run here
        here = [c for c, m in zip(group, metas) if run["arch"] in m["runs_on"]]
        timed = dict(zip(here, time_ladder(here, work, timeout, repeats, run))) if here else {}
        return [timed.get(c) or dict({k: m.get(k) for k in CASE_KEYS}, status="not runnable",
                                     message=f"not runnable on {run['arch']}") for c, m in zip(group, metas)]
    try:
        members_agree(metas)
    except ValueError as err:
        return [dict({k: m.get(k) for k in CASE_KEYS}, status="error", message=str(err)) for m in metas]
    names = [m["name"] for m in metas]
    per_case: dict[str, list[dict[str, Any] | None]] = {n: [] for n in names}
    errors = []
    for rep in range(repeats):
        out_json = work / f"ladder-{group[0].name}-{rep}.json"
        out_json.unlink(missing_ok=True)
        cmd = [sys.executable, "-m", "gpubook", "replay-ladder", "--json", str(out_json), *map(str, group)]
        try:
            proc = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout * len(group),
                                  start_new_session=True)
            out = proc.stdout + proc.stderr
        except subprocess.TimeoutExpired:
            out = f"stopped after {timeout * len(group):g} s"
        got = json.loads(out_json.read_text()) if out_json.exists() else {}
        if not got:
            errors.append(out.strip()[-1500:])
        for n in names:
            per_case[n].append(got.get(n))
    ladder_run = f"{run['date']} {run['gpu']} {uuid.uuid4().hex[:12]}"
    recs = []
    for meta in metas:
        rec: dict[str, Any] = {k: meta.get(k) for k in CASE_KEYS}
        rec.update(bytes=meta.get("bytes"), flops=meta.get("flops"), dtype=meta.get("dtype"),
                   flush=meta.get("flush", "read"))
        rec.update(merge(meta, per_case[meta["name"]], ladder_run, names))
        if rec["status"] == "error" and errors:
            rec["message"] = errors[-1]
        if rec["status"] == "measured":
            t = Timing.from_record(dict(rec, run=run))
            rec.update(percent_of_peak=t.percent_of_peak(), percent_of_bandwidth=t.percent_of_bandwidth(),
                       percent_of_flops=t.percent_of_flops(), within_noise=t.within_noise())
        recs.append(rec)
    return recs


def main_ladder(case_dirs: list[str], out_json: str, load_only: bool = False) -> int:
    """One process's run of a ladder (gpubook.run.protocol.measure_ladder): each case's record.
    `load_only` loads the modules, which compiles them into the replay's cubin cache, and stops."""
    from ..run import runtime
    from ..run.protocol import measure_ladder

    arch = runtime.local_arch()
    members = []
    for d in case_dirs:
        meta = load_case(Path(d))
        so = Path(d) / f"module-{arch}.so"
        members.append((runtime.load(str(so), meta["name"], meta["param_objs"], arch), meta))
    Path(out_json).write_text(json.dumps({} if load_only else measure_ladder(members)))
    return 0


def main_case(case_dir: str, out_json: str, timing: bool, stress: bool = True) -> int:
    rec = run_case(Path(case_dir), timing=timing, stress=stress)
    Path(out_json).write_text(json.dumps(rec))
    return 0
