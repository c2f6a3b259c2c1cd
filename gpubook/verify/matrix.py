"""The verification matrix: every kernel the chapters build (results/manifest/kernels.json),
each with what the results files that replays and simulations wrote say of it.

A check case may carry a stress record, ``"stress": {"launches": N, "failures": k,
"variants": V}`` (the kernel launched N times over V seeded inputs, outputs poisoned and
compared each time), and ``runs_on`` names the archs a kernel was built for: a Hopper kernel
built for ``["sm_90a"]`` alone has no sm_100a form.

A record belongs to a built kernel when it names the kernel's chapter and the fingerprint of its
TIRx script (a check or a timing may name its case otherwise than the build: one build can have
several cases). Records of scripts no chapter builds any more are `earlier_rows`.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..facts.paths import CHAPTERS
from ..facts.results import load_runs
from .describe import describe_allowance as _allowance, describe_error, gpu_name as _gpu, readable_finding as _readable
from .describe import simulated_clusters
from .describe import record_sanitizer as _sanitizer, sanitizer_short as _sanitizer_short
from .describe import record_time as _time, speed as _speed, speedups  # noqa: F401 - speedups is API
from . import manifest

def _error(rec: dict[str, Any]) -> str:
    """describe.describe_error, its '|ref|' written so that a table cell keeps it whole."""
    return describe_error(rec).replace("|ref|", "abs(ref)")


ARCH_NAMES = {"sm_90a": "sm_90", "sm_100a": "sm_100"}
HOPPER_ONLY = "sm_90a only — wgmma has no sm_100a form"


def rows(directory: Path | str | None = None) -> list[dict[str, Any]]:
    """One row per (chapter, kernel) from the results files of a folder (default results/):
    the GPU runs, with each Blackwell kernel's newest CPU simulation under 'simulated'."""
    return rows_from(load_runs(directory), load_runs(directory, simulated=True))


def _add_simulations(merged: dict[tuple[str, str], dict[str, Any]],
                     sims: list[dict[str, Any]]) -> None:
    for run in sorted(sims, key=lambda r: r["run"]["date"]):
        for c in run["cases"]:
            if c["kind"] != "check":
                continue
            row = merged.setdefault((c["chapter"], c["name"]), {
                "chapter": c["chapter"], "name": c["name"], "runs_on": c.get("runs_on") or [],
                "by_arch": {}, "perf": None,
            })
            row["simulated"] = dict(c, run=run["run"])


def rows_from(runs: list[dict[str, Any]], sims: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """One row per (chapter, kernel): the newest check per GPU arch and the newest measurement,
    and the newest simulation of `sims` (CPU runs, which never count as a GPU run)."""
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
    _add_simulations(merged, list(sims))
    out = []
    for row in merged.values():
        row.setdefault("simulated", None)
        ran = {a: e for a, e in row["by_arch"].items() if e["status"] != "not runnable"}
        row["passed_on"] = {a: e["run"] for a, e in ran.items()
                            if e["status"] in ("passed", "trapped", "race found") and not stress_failures(e)}
        row["failed"] = [e for e in ran.values()
                         if e["status"] in ("failed", "timeout", "error") or stress_failures(e)]
        newest = sorted(ran.values() or row["by_arch"].values(), key=lambda e: e["run"]["date"])
        row["check"] = newest[-1] if newest else None
        out.append(row)
    return sorted(out, key=lambda r: (r["chapter"], r["name"]))


def kernel_rows(directory: Path | str | None = None, manifest_path: Path | str | None = None) -> list[dict[str, Any]]:
    """One row per case of every kernel the chapters build, in book order (a kernel no record
    names has one empty row): `rows_from` of the records of its script, each row with its
    manifest entry under 'build' and its archs from the build."""
    return kernel_rows_from(manifest.load(manifest_path), load_runs(directory), load_runs(directory, simulated=True))


def kernel_rows_from(built: dict[str, list[dict[str, Any]]], runs: list[dict[str, Any]],
                     sims: list[dict[str, Any]] = ()) -> list[dict[str, Any]]:
    """`kernel_rows` of a manifest (chapter -> builds) and of GPU runs and simulations."""
    owner = manifest.owner(built)
    gpu, cpu = manifest.split_runs(runs, owner), manifest.split_runs(list(sims), owner)
    out = []
    for chapter, kernels in built.items():
        for i, k in enumerate(kernels):
            found = rows_from(gpu.get((chapter, i), []), cpu.get((chapter, i), []))
            if not found:  # nothing recorded of this script
                found = [{"chapter": chapter, "name": k["name"], "by_arch": {}, "perf": None, "simulated": None,
                          "passed_on": {}, "failed": [], "check": None}]
            for r in sorted(found, key=lambda r: r["name"] != k["name"]):  # the build's own name first
                out.append(dict(r, build=k, runs_on=list(k["runs_on"])))
    return out


def earlier_rows(directory: Path | str | None = None, manifest_path: Path | str | None = None) -> list[dict[str, Any]]:
    """Rows of the records whose script no chapter builds now (an earlier shape or version of a
    kernel, or a chapter's kernel since removed), never counted as a kernel of the book."""
    owner = manifest.owner(manifest.load(manifest_path))
    gpu = manifest.split_runs(load_runs(directory), owner).get(None, [])
    return rows_from(gpu, manifest.split_runs(load_runs(directory, simulated=True), owner).get(None, []))


OUTCOMES = ("failed", "matched", "as expected", "timed", "not judged", "never run")


def outcome(row: dict[str, Any]) -> str:
    """What GPUs did with one row, one of OUTCOMES (strongest first): a failure; a check that
    matched PyTorch; a broken kernel's trap or race, found as expected; a timing without a
    comparison; a launch nothing judged (an expected race replayed without racecheck); nothing."""
    oc = timed_check(row)
    if row["failed"] or (oc and not oc.get("passed")):
        return "failed"
    statuses = {row["by_arch"][a]["status"] for a in row["passed_on"]}
    if "passed" in statuses or oc:
        return "matched"
    if statuses:
        return "as expected"
    return "timed" if timed(row) else "not judged" if ran(row) else "never run"


def kernels(table_rows: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    """The rows grouped by kernel (one build: its chapter, name and script), in order."""
    groups: dict[Any, list[dict[str, Any]]] = {}
    for r in table_rows:
        b = r.get("build") or {}
        groups.setdefault((r["chapter"], b.get("name", r["name"]), b.get("fingerprint")), []).append(r)
    return list(groups.values())


def kernel_outcome(rs: list[dict[str, Any]]) -> str:
    """A kernel's outcome: the strongest of its rows'."""
    return min((outcome(r) for r in rs), key=OUTCOMES.index)


def counts(table_rows: list[dict[str, Any]]) -> dict[str, int]:
    """How many kernels: in all ('kernels'), by outcome, and of those never run the ones whose
    simulation matched PyTorch with both checkers clean ('simulated')."""
    groups = kernels(table_rows)
    out = {"kernels": len(groups), **{o: 0 for o in OUTCOMES}, "simulated": 0}
    for rs in groups:
        o = kernel_outcome(rs)
        out[o] += 1
        if o == "never run" and any((r.get("simulated") or {}).get("status") == "simulated" for r in rs):
            out["simulated"] += 1
    return out


def stress_failures(entry: dict[str, Any] | None) -> int:
    """Launches of the stress run that disagreed with the expected output (0 without one)."""
    stress = (entry or {}).get("stress") or {}
    return int(stress.get("failures") or 0)


def hopper_only(row: dict[str, Any]) -> bool:
    """A kernel built for sm_90a alone (a wgmma kernel): it has no sm_100a form."""
    return list(row.get("runs_on") or []) == ["sm_90a"]


def _on(entry: dict[str, Any]) -> str:
    """Where a record ran: 'H100 (sm_90)', the GPU by name and its arch."""
    arch = ARCH_NAMES.get(entry["run"]["arch"], entry["run"]["arch"])
    return f"{_gpu(entry['run']['gpu'])} ({arch})"


def tier(row: dict[str, Any]) -> str:
    """The strongest claim the newest results support for one kernel, naming the GPU that ran
    it; failures come first."""
    if row["failed"]:
        e = row["failed"][0]
        if e["status"] == "passed":  # the single check passed, the stress run did not
            s = e["stress"]
            return f"FAILED under stress on {_on(e)} ({s['failures']} of {s['launches']} launches)"
        return f"{e['status'].upper()} on {_on(e)}"
    if row["check"] and row["check"]["status"] in ("trapped", "race found"):
        what = "trapped" if row["check"]["status"] == "trapped" else "racecheck found the race"
        return f"{what} as expected on {_on(row['check'])}"
    if row["check"] and row["check"].get("expect") == "unsafe" and not row["passed_on"]:
        return "breaks a PTX ordering rule on purpose — judged by the lint at build, never run on a GPU"
    if row["check"] and row["check"]["status"] == "not judged" and not row["passed_on"]:
        return f"expected race not judged on {_on(row['check'])} (replayed without racecheck)"
    for arch in ("sm_100a", "sm_90a"):
        if arch in row["passed_on"]:
            return f"passed on {_on(dict(row['by_arch'][arch]))}"
    if timed(row):
        where = _on(row["perf"])
        oc = timed_check(row)
        if oc:
            return (f"matched PyTorch at its timed shape on {where}" if oc.get("passed") else
                    f"OUTPUT WRONG at its timed shape on {where}")
        return f"timed on {where}, not compared (no check of this build)"
    if hopper_only(row):
        return "compiled for sm_90a — never run"
    sim = row.get("simulated")
    found = simulated_clusters(sim) if sim else None
    part = ", {} of {} clusters".format(*found) if found and found[1] > found[0] else ""
    if sim and sim["status"] == "simulated":
        return f"simulated for sm_100a (NumSim{part}) — never run on a GPU"
    if sim and sim["status"] == "caught":
        return f"fault caught in simulation (NumSim{part}) — never run on a GPU"
    if sim:
        return f"simulation {sim['status'].upper()} — never run on a GPU"
    return f"compiled for {' and '.join(row.get('runs_on') or ['sm_100a'])} — never run"


def simulation(row: dict[str, Any]) -> str:
    """The newest CPU simulation in words ("—" for a kernel without one)."""
    sim = row.get("simulated")
    if not sim:
        return "—"
    tools = sim.get("tools") or {}
    parts = [f"{sim['status']}", f"{sim['run']['date']}, {sim['run'].get('simulator')}"]
    if sim.get("max_abs_error") is not None:
        parts.append(_error(sim))
    found = simulated_clusters(sim)
    if found and found[1] > found[0]:
        parts.append(f"simulated {found[0]} of {found[1]} clusters (the rest through cluster launch control; "
                     "the checkers saw only those)")
    checkers = [f"{t} {tools[t]['verdict'] if t in tools else 'not run'}" for t in ("synccheck", "racecheck")]
    if checkers:
        parts.append(", ".join(checkers))
    if sim["status"] not in ("simulated",) and sim.get("message"):
        parts.append(_readable(sim["message"])[:160].replace("|", "/"))
    return " · ".join(parts)


def stress(row: dict[str, Any]) -> str:
    """The stress run of the newest check, in words ("—" where the replay ran none)."""
    s = (row.get("check") or {}).get("stress")
    if not s:
        return "—"
    return (f"{s['launches']} launches over {s['variants']} input variants: "
            f"{s['failures']} {'failure' if s['failures'] == 1 else 'failures'}")


def markdown(table_rows: list[dict[str, Any]]) -> str:
    """The matrix as a Markdown table."""
    head = ("| chapter | kernel | tier | max error | time | % of peak | sanitizer | run |\n"
            "|---|---|---|---|---|---|---|---|\n")
    lines = []
    for r in table_rows:
        check = r["check"]
        err = "—"
        if check and (check.get("max_abs_error") is not None or check.get("max_error_over_allowed") is not None):
            err = _error(check)
        t, pct = _time(r["perf"])
        src = check or r["perf"]
        run = f"{src['run']['date']}, {src['run']['gpu']}" if src else "—"
        lines.append(f"| {r['chapter']} | `{r['name']}` | {tier(r)} | {err} | {t} | {pct} | "
                     f"{_sanitizer(check)} | {run} |")
    return head + "\n".join(lines)


def timed(row: dict[str, Any]) -> bool:
    """A kernel that a replay launched and timed (a benchmark build), whatever its checks."""
    return bool(row.get("perf") and row["perf"].get("status") == "measured")


def timed_check(row: dict[str, Any]) -> dict[str, Any] | None:
    """The comparison of a timed kernel's output with its PyTorch baseline's at the timed shape
    (None where there was none: a kernel that writes nothing is timed 'unchecked')."""
    oc = row["perf"].get("output_check") if timed(row) else None
    return oc if oc and "passed" in oc else None


def _launched(check: dict[str, Any] | None) -> bool:
    """Whether a replay launched this check's kernel (never one that breaks an ordering rule on purpose)."""
    return bool(check) and check["status"] != "not runnable" and check.get("expect") != "unsafe"


def ran(row: dict[str, Any]) -> bool:
    """Whether a GPU launched it: a check that ran (whatever it found) or a timing."""
    return timed(row) or any(_launched(e) for e in row["by_arch"].values())


def never_run(table_rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Kernels that no replay has run anywhere (failures did run, and are reported as such;
    a benchmark build that was timed did run, though nothing compared its output; an expected
    race replayed without racecheck ran, unjudged)."""
    return [r for r in table_rows if not ran(r)]


def _on_gpu(row: dict[str, Any], arch: str) -> str:
    """What replays on GPUs of one arch say of a row: its newest check, a timing, or nothing."""
    if row.get("runs_on") and arch not in row["runs_on"]:
        return "no build"
    e = row["by_arch"].get(arch)
    if _launched(e):
        parts = [f"{e['status']} on {_gpu(e['run']['gpu'])}, {e['run']['date']}"]
        if e.get("max_abs_error") is not None or e.get("max_error_over_allowed") is not None:
            parts.append(_error(e))
        parts.append(_sanitizer_short(e))
        return ", ".join(p for p in parts if p)
    perf = row.get("perf")
    if timed(row) and perf["run"]["arch"] == arch:
        oc, at = timed_check(row), f"{_gpu(perf['run']['gpu'])}, {perf['run']['date']}"
        if not oc:
            return f"timed on {at}, not compared"
        err = ""
        if oc.get("max_error_over_allowed") is not None:
            err = f", {_allowance(oc['max_error_over_allowed'])}"
        elif oc.get("max_abs_error") is not None:
            err = f", max abs error {oc['max_abs_error']:.3g}"
        return f"timed on {at}, output {'matched' if oc.get('passed') else 'WRONG'} at the timed shape{err}"
    return "never run"


def _verified(row: dict[str, Any]) -> str:
    """The tiers of one row: the strongest claim, then Hopper, Blackwell and the CPU simulation."""
    sim = simulation(row).replace(" · ", ", ") if row.get("simulated") else "none"
    out = (f"**{tier(row)}** · Hopper GPU: {_on_gpu(row, 'sm_90a')} · Blackwell GPU: "
           f"{_on_gpu(row, 'sm_100a')} · CPU simulation: {sim}")
    if hopper_only(row) and not row.get("build"):
        out += f" · {HOPPER_ONLY}"
    return out.replace("|", "/")


def compiled(row: dict[str, Any]) -> str:
    """The archs a kernel was built for, and why any other has no build."""
    b = row.get("build")
    if not b:
        return " and ".join(row.get("runs_on") or []) or "—"
    why = "".join(f"; no {a} build: {reason}" for a, reason in b["not_built"].items())
    return (" and ".join(b["runs_on"]) + why).replace("|", "/")


def _kernel(row: dict[str, Any], repeated: set[str]) -> str:
    b = row.get("build") or {"name": row["name"]}
    out = f"`{b['name']}`"
    if row["name"] != b["name"]:
        out += f" (case `{row['name']}`)"
    elif b["name"] in repeated and b.get("fingerprint"):
        out += f" (script `{b['fingerprint'][:8]}`)"
    return out


CHAPTERS_DIR = CHAPTERS


def chapter_ref(chapter: str, chapters_dir: Path | str | None = None) -> str:
    """A MyST link to a chapter (its title) where `chapters_dir` holds it, else its name in code."""
    d = Path(chapters_dir) if chapters_dir is not None else CHAPTERS_DIR
    return f"{{doc}}`{chapter}`" if (d / f"{chapter}.md").is_file() else f"`{chapter}`"


def chapter_tables(table_rows: list[dict[str, Any]], chapters_dir: Path | str | None = None) -> str:
    """The matrix as one table per chapter (MyST), in the rows' order: kernel, the archs it was
    compiled for, its tiers (GPU; CPU simulation), speed, stress. A kernel built more than once
    under one name is told apart by its case or its script's fingerprint.

    Each chapter's table opens with a link to the chapter where `chapters_dir` holds it.
    """
    out = []
    by_chapter: dict[str, list[dict[str, Any]]] = {}
    for r in table_rows:
        by_chapter.setdefault(r["chapter"], []).append(r)
    for chapter, rs in by_chapter.items():
        names = [g[0].get("build", {}).get("name", g[0]["name"]) for g in kernels(rs)]
        repeated = {n for n in names if names.count(n) > 1}
        out.append(f"**{chapter_ref(chapter, chapters_dir)}**\n")
        out.append("| kernel | compiled for | verified (GPU; CPU simulation) | time | stress |\n|---|---|---|---|---|")
        for r in rs:
            out.append(f"| {_kernel(r, repeated)} | {compiled(r)} | {_verified(r)} | {_speed(r['perf'])} | {stress(r)} |")
        out.append("")
    return "\n".join(out)


def never_run_list(table_rows: list[dict[str, Any]], chapters_dir: Path | str | None = None) -> str:
    """A Markdown list of the kernels that no GPU has run, each with its chapter and tier."""
    lines = []
    for rs in kernels(table_rows):
        if kernel_outcome(rs) == "never run":
            r = rs[0]
            lines.append(f"- {chapter_ref(r['chapter'], chapters_dir)}: {_kernel(r, set())} ({tier(r)})")
    return "\n".join(lines)


def kernel_archs(table_rows: list[dict[str, Any]]) -> list[tuple[str, tuple[str, ...]]]:
    """(name, archs it was built for) of each kernel of the rows (`kernels`): what a page's
    Runs-on badge counts, kernel for kernel the count of the opening box (`counts`)."""
    return [((rs[0].get("build") or {}).get("name", rs[0]["name"]),
             tuple((rs[0].get("build") or {}).get("runs_on") or rs[0].get("runs_on") or ())) for rs in kernels(table_rows)]
