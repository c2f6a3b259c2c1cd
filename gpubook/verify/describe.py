"""How a check states what was found elsewhere: a replay's record, a simulation, a stress run."""

from __future__ import annotations

import re
from typing import Any


# The verification matrix (appendix A), relative to a chapter page of the built book.
MATRIX_PAGE = "A-verification-matrix.html"


def describe_record(rec: dict[str, Any]) -> str:
    """One line for a replayed check: 'passed on NVIDIA H200, 2026-11-30, max abs error 0,
    memcheck and racecheck clean; stress: ...' (or the failure and its first line)."""
    run = rec["run"]
    if rec["status"] == "passed":
        s = f"passed on {run['gpu']}, {run['date']}"
        if rec.get("max_abs_error") is not None:
            s += f", max abs error {rec['max_abs_error']:.3g}"
    elif rec["status"] in ("trapped", "race found"):      # the verdict a broken kernel must draw
        s = f"{rec['status']} on {run['gpu']}, {run['date']}, as expected"
    else:
        s = f"{rec['status'].upper()} on {run['gpu']}, {run['date']}"
        msg = (rec.get("message") or "").strip().splitlines()
        if msg:
            s += f": {msg[0][:200]}"
    san = rec.get("sanitizer") or {}
    if san and all(v == "clean" for v in san.values()):
        s += f", {' and '.join(san)} clean"
    elif san:
        s += ", " + ", ".join(f"{k} {v}" for k, v in san.items())
    if rec.get("stress"):
        s += f"; {describe_stress(rec['stress'])}"
    return s


def describe_simulation(rec: dict[str, Any]) -> str:
    """One line for a simulated check: 'simulated on the CPU (NumSim, tirx-harness 0.1.2.post2,
    2026-12-01): matches PyTorch, max abs error 0.000122 (atol 0.001, rtol 0); synccheck clean;
    racecheck clean — not run on a B200' (or what the tools found)."""
    run = rec["run"]
    where = f"simulated on the CPU (NumSim, {run.get('simulator')}, {run['date']})"
    if rec.get("resident") is not None:
        n = rec["resident"]
        where += (f" with {n} cluster{'s' if n != 1 else ''} resident, the others' tiles taken "
                  "through cluster launch control")
    tools = rec.get("tools") or {}
    parts = []
    num = tools.get("numbers", {})
    if num.get("verdict") == "match":
        tol = ", ".join(f"atol {a:.3g}, rtol {r:.3g}" for r, a in rec.get("tolerances") or [])
        parts.append(f"matches PyTorch, max abs error {rec.get('max_abs_error', 0):.3g}"
                     + (f" ({tol})" if tol else ""))
    elif num:
        parts.append(f"numbers {num.get('verdict')}")
    for tool in ("synccheck", "racecheck"):
        parts.append(f"{tool} {tools[tool].get('verdict')}" if tool in tools else f"{tool} not run")
    status = rec["status"]
    if status == "simulated":
        return f"{where}: " + "; ".join(parts) + " — not run on a B200"
    if status == "caught":
        return (f"{where}: the fault was caught, as expected — {_shortened(rec.get('message') or '', 240)}"
                " — not run on a B200")
    return f"{where}: {status.upper()} — {_shortened(rec.get('message') or '; '.join(parts), 300)}"


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
