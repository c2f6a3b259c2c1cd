"""Read the verification results that `python -m gpubook replay` wrote on GPU hosts.

A results file `results/<date>-<gpu>.json` holds one run (several runs of one date are named
`<date>-a-<gpu>.json`, `<date>-b-<gpu>.json`, ... in the order they ran: runs are ordered by date,
then by file name, and a later run overrides an earlier one):
{"format": 2,
 "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "YYYY-MM-DD", "torch": "...",
         "sanitizer": ["memcheck", "racecheck"] or []},
 "cases": [{"case": slug, "chapter": str, "name": str, "kind": "check" | "perf",
            "fingerprint": str (hash of the kernel's TIRx script),
            "runs_on": [arch, ...],
            "status": "passed" | "failed" | "not runnable" | "timeout" | "error" | "measured"
                      | "failed as expected" | "passed unexpectedly" (the last two: self-tests),
                      | "trapped" (a case marked expect="trap" ended in the expected device trap)
                      | "race found" (a case marked expect="race": racecheck reported the hazard)
                      | "not judged" (a case marked expect="race", replayed without racecheck),
            "max_abs_error": float | null, "max_rel_error": float | null,
            "max_error_over_allowed": float (the largest |err| / (atol + rtol |ref|) over the
                      elements; checks replayed since it was kept), "tolerances": [[rtol, atol], ...],
            "stress": {"launches": int, "failures": int, "variants": int,
                       "first_failure": str | null, "out_of_bounds": [str] (only when any)}
                      (checks with stress=N only),
            "ms": float | null, "bytes": float | null, "flops": float | null,
            "dtype": str | null (what the FLOPs count in), "flush": "read" | "write" | "none",
            "samples": [ms, ...], "baseline_samples": [ms, ...] (every timed repeat),
            "bandwidth": float | null, "flop_rate": float | null, "percent_of_peak": float | null,
            "percent_of_bandwidth": float | null, "percent_of_flops": float | null,
            "baseline": str | null, "baseline_ms": float | null,
            "baselines": {name: ms}, "baselines_samples": {name: [ms, ...]} (only for a bench
                      of several baselines, all timed in the same run; the first is also
                      "baseline"/"baseline_ms"/"baseline_samples"),
            "sanitizer": {"memcheck": "clean" | "<errors>", "racecheck": ...} | null,
            "expect": "fail" (self-test cases) | "trap" | "race",
            "message": str | null}]}
Format 1 files lack stress, samples, flush (their timings used the write flush) and dtype.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from .paths import RESULTS

RESULTS_DIR = RESULTS


def load_runs(directory: Path | str | None = None, simulated: bool = False) -> list[dict[str, Any]]:
    """Every results file of the folder, oldest run first: the GPU runs, or with `simulated`
    the CPU simulations (`python -m gpubook simulate`, whose run names its `simulator`).

    The two never mix: a simulation is not a run on a GPU, whatever it found.
    """
    d = Path(directory) if directory is not None else RESULTS_DIR
    runs = [json.loads(p.read_text()) for p in sorted(d.glob("*.json"))]
    runs = [r for r in runs if bool(r["run"].get("simulator")) == simulated]
    return sorted(runs, key=lambda r: r["run"]["date"])


def cases(directory: Path | str | None = None, simulated: bool = False) -> list[dict[str, Any]]:
    """All cases of all GPU runs (or of all simulations), each with its run's facts under 'run'."""
    return [dict(c, run=r["run"]) for r in load_runs(directory, simulated) for c in r["cases"]]


def latest(name: str, kind: str = "perf", chapter: str | None = None,
           fingerprint: str | None = None,
           directory: Path | str | None = None) -> dict[str, Any] | None:
    """The newest case of that kernel name and kind that ran (passed or measured), or None.

    With `fingerprint`, only a run of exactly that kernel script counts.
    """
    found = [
        c for c in cases(directory)
        if c["name"] == name and c["kind"] == kind and c["status"] in ("passed", "measured")
        and (chapter is None or c["chapter"] == chapter)
        and (fingerprint is None or c.get("fingerprint") == fingerprint)
    ]
    return found[-1] if found else None


# Statuses of a case that ran (a replay that could not run it says nothing about it).
RAN = ("passed", "failed", "timeout", "error", "measured")


# ... and of a case expected to trap or race: its judgment is also a run.
RAN_EXPECTED = RAN + ("trapped", "race found", "passed unexpectedly")


def newest(name: str, kind: str = "check", chapter: str | None = None,
           fingerprint: str | None = None,
           directory: Path | str | None = None, statuses: tuple[str, ...] = RAN,
           case_digest: str | None = None, toolchain: dict[str, str] | None = None) -> dict[str, Any] | None:
    """The newest case of that kernel that ran, whatever its verdict (a newer failure is not
    hidden behind an older pass), or None. With `fingerprint`, only that exact kernel script;
    `statuses` are the verdicts that count as a run (RAN_EXPECTED for a case that expects a
    trap or a race)."""
    found = [
        c for c in cases(directory)
        if c["name"] == name and c["kind"] == kind and c["status"] in statuses
        and (chapter is None or c["chapter"] == chapter)
        and (fingerprint is None or c.get("fingerprint") == fingerprint)
        and (case_digest is None or c.get("case_digest") == case_digest)
        and (toolchain is None or c.get("toolchain") == toolchain)
    ]
    return found[-1] if found else None


def provenance(rec: dict[str, Any] | None, case_digest: str, toolchain: dict[str, str] | None) -> str | None:
    """How a record of the same kernel script relates to the case at hand: "this case" (same
    inputs, tolerance and stress, and for a GPU run the same toolchain), "unrecorded" (written
    before records named their case and toolchain) or "other" (another case of the script)."""
    if rec is None:
        return None
    if "case_digest" not in rec:
        return "unrecorded"
    same = rec["case_digest"] == case_digest and (toolchain is None or rec.get("toolchain") == toolchain)
    return "this case" if same else "other"


PROVENANCE_NOTE = {
    "unrecorded": " (recorded before results named the inputs, tolerance and toolchain of their case)",
    "other": "",
}


# Verdicts of a simulated case (gpubook.simulate): "simulated" and "caught" are the good ones.
SIMULATED = ("simulated", "failed", "error", "caught", "missed")


def newest_simulation(name: str, chapter: str | None = None, fingerprint: str | None = None,
                      directory: Path | str | None = None,
                      resident: int | None | str = "any") -> dict[str, Any] | None:
    """The newest simulation of that check (exactly that kernel script with `fingerprint`);
    with `resident` an int or None, only one that kept that many clusters resident (None: all)."""
    found = [
        c for c in cases(directory, simulated=True)
        if c["name"] == name and c["kind"] == "check" and c["status"] in SIMULATED
        and (chapter is None or c["chapter"] == chapter)
        and (fingerprint is None or c.get("fingerprint") == fingerprint)
        and (resident == "any" or c.get("resident") == resident)
    ]
    return found[-1] if found else None
