"""How a check states what was found elsewhere: a replay's record, a simulation, a stress run."""

from __future__ import annotations

import re
from typing import Any


# The verification matrix (appendix A), relative to a chapter page of the built book.
MATRIX_PAGE = "A-verification-matrix.html"


def gpu_name(name: str) -> str:
    """A GPU as a reader names it: 'NVIDIA H200' -> 'H200'."""
    return name.removeprefix("NVIDIA ").strip()


def a_gpu(name: str) -> str:
    """'an H200', 'a B200': the article as the name is read aloud."""
    g = gpu_name(name)
    return f"an {g}" if g[:1] in "AEFHILMNORSX" else f"a {g}"


def describe_allowance(fraction: float | None) -> str:
    """'max error 31% of the allowance' (the allowance is atol + rtol |ref| of each element), or
    'max error 0 (exact)'; '' when the fraction is unknown."""
    if fraction is None:
        return ""
    if fraction == 0:
        return "max error 0 (exact)"
    pct = 100 * fraction
    return f"max error {pct:.2g}% of the allowance" if pct < 10 else f"max error {pct:.0f}% of the allowance"


def describe_tolerances(tols: Any) -> str:
    """'atol 1e-05 + rtol 1.3e-06·|ref|' for (rtol, atol) pairs, one per output ('; ' between
    distinct ones); '' when none is known."""
    seen: list[str] = []
    for rtol, atol in tols or []:
        t = f"atol {atol:.3g} + rtol {rtol:.3g}·|ref|"
        if t not in seen:
            seen.append(t)
    return "; ".join(seen)


def describe_error(rec: dict[str, Any], tols: Any = None) -> str:
    """A record's error: as a fraction of the allowance where the record has it, else (records
    written before it was kept) the absolute error beside both parts of the allowance; ''
    without an error."""
    if rec.get("max_error_over_allowed") is not None:
        return describe_allowance(rec["max_error_over_allowed"])
    if rec.get("max_abs_error") is None:
        return ""
    if rec["max_abs_error"] == 0:
        return "max error 0 (exact)"
    shown = f"max abs error {rec['max_abs_error']:.3g}"
    allowance = describe_tolerances(rec.get("tolerances") or tols)
    return shown + (f" (allowance {allowance})" if allowance else " (allowance atol + rtol·|ref| not recorded)")


def _sanitizers(rec: dict[str, Any]) -> str:
    san = rec.get("sanitizer") or {}
    if san and all(v == "clean" for v in san.values()):
        return f"{' and '.join(san)} clean"
    return ", ".join(f"{k} {v}" for k, v in san.items())


def replay_verdict(name: str, rec: dict[str, Any], tols: Any = None) -> str:
    """The first line of a check a replay judged: 'PASSED vadd on an H200 (replay of 2026-11-30):
    max error 31% of the allowance, memcheck and racecheck clean; stress: ...' — or TRAPPED /
    RACE FOUND as expected, FAILED with its first line, NOT JUDGED."""
    run, status = rec["run"], rec["status"]
    where = f"{' ' + name if name else ''} on {a_gpu(run['gpu'])} (replay of {run['date']})"
    msg = ((rec.get("message") or "").strip().splitlines() or [""])[0][:200]
    if status == "passed":
        head, detail = f"PASSED{where}", describe_error(rec, tols)
    elif status in ("trapped", "race found"):       # the verdict a broken kernel must draw
        head, detail = f"{status.upper()}{where}, as expected", ""
    else:
        head, detail = f"{status.upper()}{where}", msg
    parts = [p for p in (detail, _sanitizers(rec)) if p]
    s = head + (": " + ", ".join(parts) if parts else "")
    if rec.get("stress"):
        s += f"; {describe_stress(rec['stress'])}"
    return s


def describe_record(rec: dict[str, Any], tols: Any = None) -> str:
    """One line for a replayed check, without the kernel's name: 'passed on an H200 (replay of
    2026-11-30): max error 0 (exact), memcheck and racecheck clean; stress: ...'."""
    line = replay_verdict("", rec, tols)
    if rec["status"] in ("passed", "trapped", "race found"):
        return rec["status"] + line[len(rec["status"]):]
    return line


def simulated_clusters(rec: dict[str, Any]) -> tuple[int, int] | None:
    """(clusters simulated, clusters in the launch) of a simulation that kept only some clusters
    resident; None for one of the whole grid. Older records, which kept no cluster count, give
    it from the checkers' scope ('528 of 2432 warps: the 132 resident clusters')."""
    cov = rec.get("coverage") or {}
    if cov.get("clusters") is not None and cov.get("of"):
        return int(cov["clusters"]), int(cov["of"])
    n = rec.get("resident")
    if n is None:
        return None
    for tool in (rec.get("tools") or {}).values():
        m = re.match(r"(\d+) of (\d+) warps", tool.get("scope") or "")
        if m and int(m.group(1)):
            return n, n * int(m.group(2)) // int(m.group(1))
    return n, 0


def _simulation_scope(rec: dict[str, Any]) -> str:
    found = simulated_clusters(rec)
    if found is None:
        return ""
    n, total = found
    if total and total > n:
        return (f"simulated {n} of {total} clusters (the other {total - n} never start: their tiles "
                f"reach the output through cluster launch control, and synccheck and racecheck see "
                f"only the {n}); ")
    if total:
        return ""
    return f"simulated {n} resident cluster{'s' if n != 1 else ''} of a launch whose size was not recorded; "


SIM_HEADS = {"simulated": "SIMULATED", "caught": "CAUGHT IN SIMULATION", "missed": "MISSED IN SIMULATION",
             "failed": "FAILED IN SIMULATION", "error": "SIMULATION ERROR"}


def describe_simulation(rec: dict[str, Any], name: str | None = None, lead: bool = False) -> str:
    """One line for a simulated check: 'simulated on the CPU (NumSim, tirx-harness 0.1.2.post2,
    2026-12-01) — never run on a GPU: matches PyTorch, max error 15% of the allowance;
    synccheck clean; racecheck clean' (or what the tools found). `lead`: the line that opens a
    check's verdict ('SIMULATED <name> on the CPU ...'). A simulation of some of the launch's
    clusters says how many of how many."""
    run = rec["run"]
    where = f"on the CPU (NumSim, {run.get('simulator')}, {run['date']})"
    status = rec["status"]
    head = (f"{SIM_HEADS.get(status, status.upper())} {name + ' ' if name else ''}" if lead
            else ("simulated " if status == "simulated" else f"simulation {status.upper()} "))
    tools = rec.get("tools") or {}
    parts = []
    num = tools.get("numbers", {})
    if num.get("verdict") == "match":
        err = describe_error(dict(rec, max_abs_error=rec.get("max_abs_error", 0)))
        parts.append("matches PyTorch" + (f", {err}" if err else ""))
    elif num:
        parts.append(f"numbers {num.get('verdict')}")
    for tool in ("synccheck", "racecheck"):
        parts.append(f"{tool} {tools[tool].get('verdict')}" if tool in tools else f"{tool} not run")
    scope = _simulation_scope(rec)
    if status == "simulated":
        return f"{head}{where} — never run on a GPU: {scope}" + "; ".join(parts)
    if status == "caught":
        return (f"{head}{where}, as expected — never run on a GPU: {scope}"
                + _shortened(rec.get("message") or "", 240))
    return f"{head}{where} — never run on a GPU: {scope}" + _shortened(rec.get("message") or "; ".join(parts), 300)


def _shortened(text: str, limit: int) -> str:
    """`text` cut at a word boundary before `limit` characters, with an ellipsis when cut."""
    text = " ".join(text.split())
    if len(text) <= limit:
        return text
    return text[:limit].rsplit(" ", 1)[0] + " …"


def describe_stress(rec: dict[str, Any]) -> str:
    """One line for a stress record: launches, variants, failures (and the first one)."""
    s = (f"stress: {rec['launches']} launches over {rec['variants']} input variants, "
         f"{rec['failures']} failed")
    if rec.get("first_failure"):
        s += f"; first: {rec['first_failure']}"
    if rec.get("out_of_bounds"):
        s += "; out-of-bounds write: " + "; ".join(rec["out_of_bounds"])
    return s


_SIM_PLACE = re.compile(r"kernel:\d+/warp:(\d+)/seq:\d+/source:op:(\d+)/loops:\[[^\]]*\]/lane:(\d+)")
_SIM_BYTES = re.compile(r"allocation#(\d+):\[(\d+), (\d+)\)")


def readable_finding(message: str) -> str:
    """A simulator finding with its thread paths and byte ranges written as words (warp 0, lane 0,
    op 161; allocation 0, bytes [17408, 17410)), which a table can wrap between."""
    message = _SIM_BYTES.sub(lambda m: f"allocation {m[1]}, bytes [{m[2]}, {m[3]})", message)
    return _SIM_PLACE.sub(lambda m: f"warp {m[1]}, lane {m[3]}, op {m[2]}", message)


# -- the cells of appendix A's tables ------------------------------------------------------------
def record_sanitizer(check: dict[str, Any] | None) -> str:
    if not check or not check.get("sanitizer"):
        return "—"
    return "; ".join(f"{k} {v}" for k, v in check["sanitizer"].items())


def record_time(perf: dict[str, Any] | None) -> tuple[str, str]:
    if not perf or perf.get("status") != "measured":
        return "not measured", "—"
    t = f"{perf['ms'] * 1e3:.1f} µs"
    if perf.get("bandwidth"):
        t += f" ({perf['bandwidth'] / 1e12:.2f} TB/s)"
    elif perf.get("flop_rate"):
        t += f" ({perf['flop_rate'] / 1e12:.0f} TFLOP/s)"
    pct = perf.get("percent_of_peak")
    return t, (f"{pct:.0f}%" if pct is not None else "—")


def sanitizer_short(check: dict[str, Any] | None) -> str:
    if not check or not check.get("sanitizer"):
        return ""
    found = check["sanitizer"]
    if all(v == "clean" for v in found.values()):
        return f"{' and '.join(found)} clean"
    return "; ".join(f"{k}: {v}" for k, v in found.items())


def speedups(perf: dict[str, Any] | None) -> dict[str, float]:
    """How many times faster than each PyTorch baseline timed in the same run the kernel was
    (baseline time / kernel time), by baseline name; a record of one baseline gives one."""
    if not perf or perf.get("status") != "measured" or not perf.get("ms"):
        return {}
    base = perf.get("baselines") or (
        {perf["baseline"]: perf["baseline_ms"]} if perf.get("baseline") and perf.get("baseline_ms") else {})
    return {b: ms / perf["ms"] for b, ms in base.items() if ms}


def speed(perf: dict[str, Any] | None) -> str:
    t, pct = record_time(perf)
    if t == "not measured":
        return t
    out = f"{t}, {pct} of peak" if pct != "—" else t
    if perf.get("baselines"):  # several baselines timed alongside: each one's ratio
        out += " · " + ", ".join(f"{r:.2f}× `{b}`" for b, r in speedups(perf).items())
    return out
