"""Verdicts from what a GPU run printed: compute-sanitizer's counts, a trap's barrier reports,
racecheck's hazards."""

from __future__ import annotations

import re
from typing import Any

from .describe import describe_error

# What a results record copies from its case.
# case_digest and toolchain: what else the record is a record of (gpubook.run.record.case_digest)
CASE_KEYS = ("case", "chapter", "name", "kind", "runs_on", "fingerprint", "case_digest", "toolchain")


def _sanitizer_counts(out: str) -> tuple[int, int] | None:
    """(errors, warnings) in compute-sanitizer's summary (only racecheck counts warnings: a race
    between lanes of one warp), None if absent."""
    m = re.search(r"RACECHECK SUMMARY: \d+ hazards? displayed \((\d+) errors?, (\d+) warnings?\)", out)
    if m:
        return int(m.group(1)), int(m.group(2))
    m = re.search(r"ERROR SUMMARY: (\d+) errors?", out)
    return (int(m.group(1)), 0) if m else None


def _counted(n: int, noun: str) -> str:
    return f"{n} {noun}" if n == 1 else f"{n} {noun}s"


def sanitizer_verdict(out: str, rec: dict[str, Any] | None, timed_out: bool) -> str:
    """One tool's verdict from its output: 'clean', what it counted and its first report
    ('1 error: <first>', '2 warnings: <first>', '1 error and 1 warning: <first>'), 'timeout' or
    'did not finish: <last line>'."""
    counts = _sanitizer_counts(out)
    if timed_out:
        return "timeout"
    if counts is None or rec is None:
        tail = out.strip().splitlines()[-1][:200] if out.strip() else "no output"
        return f"did not finish: {tail}"
    if not any(counts):
        return "clean"
    # a report's first line (its detail lines are indented), not the banner or the summary
    reports = [ln.strip("= ") for ln in out.splitlines() if re.match(r"========= \S", ln)]
    reports = [r for r in reports if r != "COMPUTE-SANITIZER" and "SUMMARY:" not in r]
    first = next((r for r in reports if _RACE_LINE.search(r)), reports[0] if reports else "")
    found = " and ".join(_counted(n, noun) for n, noun in zip(counts, ("error", "warning")) if n)
    return f"{found}: {first[:200]}"



TRAP_ERRORS = re.compile(r"unspecified launch failure|illegal instruction|CUDA error|cudaError", re.I)


def judge_trap(meta: dict[str, Any], rec: dict[str, Any] | None, out: str, timed_out: bool,
               timeout: float) -> dict[str, Any]:
    """The record of a case expected to trap: 'trapped' only if it died of a CUDA error
    with the expected report in its output; a run that completes, hangs or dies otherwise fails."""
    if rec is not None and rec.get("status") == "not runnable":
        return rec
    res = {k: meta.get(k) for k in CASE_KEYS}
    res["expect"] = "trap"
    pattern = meta.get("expect_message")
    if timed_out:
        res.update(status="timeout", message=f"expected a trap; still running after {timeout:g} s")
    elif rec is not None:
        res.update(status="failed", message=f"expected a trap; the kernel completed ({rec.get('status')})")
    elif not TRAP_ERRORS.search(out):
        res.update(status="failed", message="expected a trap; the case failed without a CUDA error:\n"
                   + out.strip()[-1500:])
    elif pattern and not re.search(pattern, out):
        res.update(status="failed", message=f"trapped, but no output matches /{pattern}/:\n"
                   + out.strip()[-1500:])
    else:
        shown = distinct_reports([ln for ln in out.splitlines() if pattern and re.search(pattern, ln)])
        first_error = next((ln for ln in out.splitlines() if TRAP_ERRORS.search(ln)), "")
        res.update(status="trapped", message="\n".join(shown + [first_error.strip()[:300]]))
    return res


# A bounded wait's report: which barrier and parity (gpubook.mbarrier); other lines count whole.
_BARRIER_REPORT = re.compile(r"barrier (\d+) at shared \S+ waiting for phase parity (\d+)")
MAX_REPORT_LINES = 16


def distinct_reports(lines: list[str], limit: int = MAX_REPORT_LINES) -> list[str]:
    """One line per distinct (barrier, parity) report, in order of first appearance, each
    followed by how many reports it stands for ("[5 reports]") when more than one; at most
    `limit` lines, then one that counts the distinct reports left out."""
    first: dict[Any, str] = {}
    count: dict[Any, int] = {}
    for ln in lines:
        m = _BARRIER_REPORT.search(ln)
        key = (m.group(1), m.group(2)) if m else ln.strip()
        first.setdefault(key, ln.strip()[:300])
        count[key] = count.get(key, 0) + 1
    out = [first[k] + (f"  [{count[k]} reports]" if count[k] > 1 else "") for k in list(first)[:limit]]
    if len(first) > limit:
        rest = list(first)[limit:]
        out.append(f"… {len(rest)} more distinct reports ({sum(count[k] for k in rest)} lines) left out")
    return out


# racecheck's reports: analysis mode ("Race reported between Write access at ... and Read
# access at ... [N hazards]", the second half on the next line) and hazard mode ("Potential
# WAR hazard detected at __shared__ 0x... in block (...)").
_RACE_LINE = re.compile(r"Race reported between|Potential \w+ hazard detected")
MAX_RACE_LINES = 8


def race_reports(out: str, limit: int = MAX_RACE_LINES) -> list[str]:
    """racecheck's hazard reports, each on one line (an analysis report's 'and ... access'
    continuation joined on), distinct ones only, at most `limit`."""
    lines = out.splitlines()
    found: list[str] = []
    for i, ln in enumerate(lines):
        if not _RACE_LINE.search(ln):
            continue
        text = ln.strip("= \t")
        nxt = lines[i + 1].strip("= \t") if i + 1 < len(lines) else ""
        if nxt.startswith("and "):
            text += " " + nxt
        if text not in found:
            found.append(text[:400])
    return found[:limit]


def judge_race(meta: dict[str, Any], rec: dict[str, Any], racecheck: str | None,
               finished: bool = True, timed_out: bool = False, why_not: str = "") -> dict[str, Any]:
    """The record of a case expected to race (expect="race"): 'race found' only when
    compute-sanitizer's racecheck reported a hazard (one matching `expect_message`, when the
    case has one); 'failed' when racecheck was clean; 'not judged' when racecheck did not run
    (`racecheck` None, `why_not` says why). `rec` is the plain run's record: its comparison is
    kept in the message, and decides nothing (a racy kernel may well compute the right values)."""
    res = {k: meta.get(k) for k in CASE_KEYS}
    res["expect"] = "race"
    pattern = meta.get("expect_message")
    compared = rec.get("status")
    if compared == "passed" and (rec.get("max_abs_error") is not None or rec.get("max_error_over_allowed") is not None):
        compared += f", {describe_error(rec, rec.get('tolerances'))}"
    elif compared == "failed":
        compared += ": " + ((rec.get("message") or "").strip().splitlines() or [""])[0][:200]
    compared = f"comparison of one launch: {compared}"
    if racecheck is None:
        res.update(status="not judged", message=f"expected a shared-memory race, which only "
                   f"compute-sanitizer racecheck judges; {why_not}\n{compared}")
        return res
    verdict = sanitizer_verdict(racecheck, rec if finished else None, timed_out)
    reports = race_reports(racecheck)
    summary_line = next((ln.strip("= ") for ln in racecheck.splitlines() if "RACECHECK SUMMARY" in ln), "")
    if verdict == "timeout":
        res.update(status="timeout", message=f"expected a race; racecheck did not finish in time\n{compared}")
    elif verdict.startswith("did not finish"):
        res.update(status="error", message=f"expected a race; racecheck {verdict}\n{compared}")
    elif verdict == "clean":
        res.update(status="failed", message=f"expected a race; racecheck reported no hazard "
                   f"({summary_line or verdict})\n{compared}")
    elif not reports:
        res.update(status="failed", message=f"expected a race; racecheck counted {verdict}, but "
                   f"printed no race report\n{compared}")
    elif pattern and not any(re.search(pattern, text) for text in reports + [racecheck]):
        res.update(status="failed", message=f"racecheck reported hazards, but none matches /{pattern}/:\n"
                   + "\n".join(reports + [summary_line, compared]))
    else:
        res.update(status="race found", message="\n".join(reports + [summary_line, compared]))
    return res


