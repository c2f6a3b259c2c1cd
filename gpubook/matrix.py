"""The verification matrix: one row per kernel, from the results files that replays wrote."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from .results import load_runs

ARCH_NAMES = {"sm_90a": "sm_90", "sm_100a": "sm_100"}


def rows(directory: Path | str | None = None) -> list[dict[str, Any]]:
    """One row per (chapter, kernel) from the results files of a folder (default results/)."""
    return rows_from(load_runs(directory))


def rows_from(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """One row per (chapter, kernel): the newest check per GPU arch and the newest measurement."""
    merged: dict[tuple[str, str], dict[str, Any]] = {}
    for run in sorted(runs, key=lambda r: r["run"]["date"]):  # newer runs overwrite older ones
        arch = run["run"]["arch"]
        for c in run["cases"]:
            row = merged.setdefault((c["chapter"], c["name"]), {
                "chapter": c["chapter"], "name": c["name"], "runs_on": [],
                "by_arch": {}, "perf": None,
            })
            row["runs_on"] = c.get("runs_on") or row["runs_on"]
            entry = dict(c, run=run["run"])
            if c["kind"] == "check":
                row["by_arch"][arch] = entry
            elif c["status"] == "measured" or row["perf"] is None:
                row["perf"] = entry
    out = []
    for row in merged.values():
        ran = {a: e for a, e in row["by_arch"].items() if e["status"] != "not runnable"}
        row["passed_on"] = {a: e["run"] for a, e in ran.items() if e["status"] in ("passed", "trapped")}
        row["failed"] = [e for e in ran.values() if e["status"] in ("failed", "timeout", "error")]
        newest = sorted(ran.values() or row["by_arch"].values(), key=lambda e: e["run"]["date"])
        row["check"] = newest[-1] if newest else None
        out.append(row)
    return sorted(out, key=lambda r: (r["chapter"], r["name"]))


def tier(row: dict[str, Any]) -> str:
    """The strongest claim the newest results support for one kernel; failures come first."""
    if row["failed"]:
        e = row["failed"][0]
        return f"{e['status'].upper()} on {ARCH_NAMES.get(e['run']['arch'], e['run']['arch'])}"
    if row["check"] and row["check"]["status"] == "trapped":
        arch = row["check"]["run"]["arch"]
        return f"trapped as expected on {ARCH_NAMES.get(arch, arch)}"
    if "sm_100a" in row["passed_on"]:
        return "passed on sm_100"
    if "sm_90a" in row["passed_on"]:
        return "passed on sm_90"
    return "compiled for sm_100a — never run"


def _sanitizer(check: dict[str, Any] | None) -> str:
    if not check or not check.get("sanitizer"):
        return "—"
    return "; ".join(f"{k} {v}" for k, v in check["sanitizer"].items())


def _time(perf: dict[str, Any] | None) -> tuple[str, str]:
    if not perf or perf.get("status") != "measured":
        return "not measured", "—"
    t = f"{perf['ms'] * 1e3:.1f} µs"
    if perf.get("bandwidth"):
        t += f" ({perf['bandwidth'] / 1e12:.2f} TB/s)"
    elif perf.get("flop_rate"):
        t += f" ({perf['flop_rate'] / 1e12:.0f} TFLOP/s)"
    pct = perf.get("percent_of_peak")
    return t, (f"{pct:.0f}%" if pct is not None else "—")


def markdown(table_rows: list[dict[str, Any]]) -> str:
    """The matrix as a Markdown table."""
    head = ("| chapter | kernel | tier | max abs error | time | % of peak | sanitizer | run |\n"
            "|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in table_rows:
        check = r["check"]
        err = "—"
        if check and check.get("max_abs_error") is not None:
            err = f"{check['max_abs_error']:.3g}"
        t, pct = _time(r["perf"])
        src = check or r["perf"]
        run = f"{src['run']['date']}, {src['run']['gpu']}" if src else "—"
        lines.append(f"| {r['chapter']} | `{r['name']}` | {tier(r)} | {err} | {t} | {pct} | "
                     f"{_sanitizer(check)} | {run} |")
    return head + "\n".join(lines)


def never_run(table_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernels that no replay has run anywhere (failures did run, and are reported as such)."""
    return [r for r in table_rows if not r["passed_on"] and not r["failed"]]
