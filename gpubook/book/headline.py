"""The sentence each chapter's opening box ends with: what became of the chapter's kernels, read
from the same rows as appendix A (`matrix.kernel_rows`), so that the box and the appendix can
never disagree. A number a chapter measures itself is glued beside it by the chapter."""

from __future__ import annotations

from typing import Any

from ..run.record import current_chapter
from ..verify import matrix


def _plural(n: int, word: str) -> str:
    return f"{n} {word}{'' if n == 1 else 's'}"


def tally(chapter: str | None = None, table_rows: list[dict[str, Any]] | None = None) -> str:
    """'Of its N kernels, a matched PyTorch on an H200, …; none has run on a B200 (newest record
    <date>).' for `chapter` (default: the current one), or a sentence saying it builds none."""
    chapter = chapter or current_chapter()
    rows = [r for r in (matrix.kernel_rows() if table_rows is None else table_rows) if r["chapter"] == chapter]
    if not rows:
        return "This chapter builds no kernel: everything in it is computed on the CPU."
    c = matrix.counts(rows)
    runs = [e for r in rows for e in r["passed_on"].values()] + [r["perf"]["run"] for r in rows if matrix.timed(r)]
    gpus = sorted({e["gpu"].replace("NVIDIA ", "") for e in runs})
    on = " and ".join(f"an {g}" if g[0] in "AEFHILMNORSX" else f"a {g}" for g in gpus) or "a GPU"
    parts = []
    if c["failed"]:
        parts.append(f"{c['failed']} FAILED on a GPU")
    if c["matched"]:
        parts.append(f"{c['matched']} matched PyTorch on {on}")
    if c["as expected"]:
        parts.append(f"{c['as expected']} broken on purpose and caught as expected")
    if c["timed"] or c["not judged"]:
        parts.append(f"{c['timed'] + c['not judged']} ran on a GPU with nothing to compare")
    if c["never run"]:
        never = f"{c['never run']} never ran on a GPU"
        if c["simulated"]:
            never += f" ({c['simulated']} of them simulated clean on the CPU)"
        parts.append(never)
    said = parts[0] if len(parts) == 1 else ", ".join(parts[:-1]) + " and " + parts[-1]
    blackwell = any(a == "sm_100a" for r in rows for a in r["passed_on"])
    dates = [e["date"] for e in runs if e.get("date")]
    has_blackwell_build = any("sm_100a" in (r.get("runs_on") or []) for r in rows)
    tail = "; none has run on a B200" if has_blackwell_build and not blackwell else ""
    newest = f" (newest GPU record {max(dates)})" if dates else ""
    return f"Of its {_plural(c['kernels'], 'kernel')}, {said}{tail}{newest}."
