"""Appendix A as a reference: a summary of every chapter's kernels, then a section per chapter with
its table, one anchored row per kernel linked to the cell of the chapter that builds it, and the
run log folded.

Each kernel has a stable anchor, `kernel_id`, made from its chapter and its name (a name a chapter
builds more than once is numbered in the manifest's order): the id of its row here and, where the
manifest knows the cell that built it (its `cell`), the id of that cell in the chapter's page
(gpubook.book.kernel_links puts it there, with the cell's link back to the rows).

The Markdown is MyST for a cell tagged `output-sections`: each `## ` heading of its output becomes
a section of the page (gpubook.book.kernel_links), so the page's outline lists every chapter.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from ..facts.paths import CHAPTERS
from . import matrix

SUMMARY_COLUMNS = ("chapter", "kernels", "compiled", "simulated", "Hopper", "Blackwell", "timed", "strongest")
TABLE_COLUMNS = ("kernel", "compiled for", "verified (GPU; CPU simulation)", "time", "stress")
MATRIX_DOC = "A-verification-matrix"


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def kernel_id(chapter: str, name: str, n: int = 1) -> str:
    """The anchor of a kernel: 'kernel-05-tma-copy' (chapter 05's first `tma_copy`), 'kernel-05-tma-copy-2'
    (its second build of that name)."""
    return f"kernel-{_slug(chapter.split('-', 1)[0])}-{_slug(name)}" + (f"-{n}" if n > 1 else "")


def kernel_ids(kernels: list[dict[str, Any]], chapter: str) -> list[str]:
    """The anchors of one chapter's manifest entries, in order."""
    seen: dict[str, int] = {}
    out = []
    for k in kernels:
        seen[k["name"]] = seen.get(k["name"], 0) + 1
        out.append(kernel_id(chapter, k["name"], seen[k["name"]]))
    return out


def section_id(chapter: str) -> str:
    """The anchor of a chapter's section in the appendix."""
    return f"kernels-{_slug(chapter)}"


def chapter_title(chapter: str, chapters_dir: Path | str | None = None) -> str:
    """A chapter's title (its first '# ' line), or its name where its file is not there."""
    p = Path(chapters_dir if chapters_dir is not None else CHAPTERS) / f"{chapter}.md"
    if p.is_file():
        for line in p.read_text().splitlines():
            if line.startswith("# "):
                return line[2:].strip()
    return chapter


def _build_key(r: dict[str, Any]) -> tuple[str, str, Any]:
    b = r.get("build") or {}
    return (r["chapter"], b.get("name", r["name"]), b.get("fingerprint"))


def anchors(table_rows: list[dict[str, Any]]) -> dict[tuple[str, str, Any], tuple[str, int | None]]:
    """(chapter, name, fingerprint) of each kernel -> (its anchor, the cell that built it or None)."""
    out: dict[tuple[str, str, Any], tuple[str, int | None]] = {}
    builds: dict[str, list[dict[str, Any]]] = {}
    for rs in matrix.kernels(table_rows):
        b = rs[0].get("build") or {"name": rs[0]["name"]}
        builds.setdefault(rs[0]["chapter"], []).append(dict(b, _key=_build_key(rs[0])))
    for chapter, ks in builds.items():
        for k, i in zip(ks, kernel_ids(ks, chapter)):
            out[k["_key"]] = (i, k.get("cell"))
    return out


def _passed(r: dict[str, Any], arch: str) -> bool:
    """A row that passed on a GPU of `arch`: its check, or its output at the timed shape."""
    oc = matrix.timed_check(r)
    return arch in r["passed_on"] or bool(oc and oc.get("passed") and r["perf"]["run"]["arch"] == arch)


def _strongest(rs: list[dict[str, Any]], failed: int) -> str:
    """The strongest tier any kernel of a chapter reached (failures named first)."""
    ranks = [("passed on Blackwell", lambda r: _passed(r, "sm_100a")),
             ("passed on Hopper", lambda r: _passed(r, "sm_90a")),
             ("timed", matrix.timed),
             ("simulated", lambda r: (r.get("simulated") or {}).get("status") == "simulated")]
    best = next((label for label, ok in ranks if any(ok(r) for r in rs)), "compiled only")
    return (f"**{failed} FAILED** · " if failed else "") + best


def chapter_counts(rs: list[dict[str, Any]]) -> dict[str, Any]:
    """One chapter's kernels: how many, compiled, simulated, passed on Hopper and on Blackwell,
    timed, failed, and its strongest tier."""
    groups = matrix.kernels(rs)

    def n(ok: Any) -> int:
        return sum(1 for g in groups if any(ok(r) for r in g))

    failed = sum(1 for g in groups if matrix.kernel_outcome(g) == "failed")
    return {"kernels": len(groups),
            "compiled": n(lambda r: (r.get("build") or {}).get("runs_on") or r.get("runs_on")),
            "simulated": n(lambda r: (r.get("simulated") or {}).get("status") == "simulated"),
            "Hopper": n(lambda r: _passed(r, "sm_90a")), "Blackwell": n(lambda r: _passed(r, "sm_100a")),
            "timed": n(matrix.timed), "failed": failed,
            "strongest": _strongest([r for g in groups for r in g], failed)}


def by_chapter(table_rows: list[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    out: dict[str, list[dict[str, Any]]] = {}
    for r in table_rows:
        out.setdefault(r["chapter"], []).append(r)
    return out


def _list_table(header: tuple[str, ...], body: list[list[str]], classes: str, widths: str) -> str:
    lines = ["```{list-table}", ":header-rows: 1", f":class: {classes}", f":widths: {widths}", ""]
    for cells in [list(header), *body]:
        lines += [f"* - {cells[0]}"] + [f"  - {c}" for c in cells[1:]]
    return "\n".join(lines + ["```", ""])


def summary(table_rows: list[dict[str, Any]], chapters_dir: Path | str | None = None) -> str:
    """The summary table: per chapter (a link to its section below), its kernels, how many were
    compiled, simulated, passed on Hopper and on Blackwell, timed, and its strongest tier."""
    body = []
    for chapter, rs in by_chapter(table_rows).items():
        c = chapter_counts(rs)
        title = chapter_title(chapter, chapters_dir).replace("|", "/")
        body.append([f"[{title}](#{section_id(chapter)})"] + [str(c[k]) for k in SUMMARY_COLUMNS[1:-1]]
                    + [c["strongest"]])
    return _list_table(SUMMARY_COLUMNS, body, "gpubook-matrix gpubook-matrix-summary", "24 9 10 10 9 10 8 20")


# A chapter's table shows this many rows (a section a reader scans in a few screens); the
# rest of a chapter of many check cases is folded under it.
ROWS_SHOWN = 30
WIDTHS = "18 17 39 13 13"  # kernel, compiled for, verified, time, stress (a reason's words fit whole)


# A name longer than this is wider than its column at 1280 px (a check case's build, named
# by its parameters, runs to 70 characters, wider than a phone): it may break after each
# underscore, between its parameters, and nowhere inside one. A shorter name stays one piece.
BREAKABLE = 16


def breakable(markdown: str) -> str:
    """`markdown` with each inline code span longer than BREAKABLE characters written as HTML
    code whose only break opportunities (<wbr>) follow its underscores."""
    def code(m: re.Match[str]) -> str:
        text = m.group(1)
        if len(text) <= BREAKABLE:
            return m.group(0)
        parts = re.findall(r"[^_]*_|[^_]+$", text)
        inner = "<wbr>".join(f'<span class="pre">{p}</span>' for p in parts)
        return f'<code class="docutils literal notranslate gpubook-long-name">{inner}</code>'

    return re.sub(r"`([^`<>&]+)`", code, markdown)


def _kernel_cell(r: dict[str, Any], repeated: set[str], anchor: tuple[str, int | None] | None,
                 chapter_there: bool) -> str:
    name = breakable(matrix._kernel(r, repeated))
    if anchor is None:
        return name
    kid, cell = anchor
    if cell is not None and chapter_there:
        return f'<a class="gpubook-kernel" id="{kid}" href="{r["chapter"]}.html#{kid}">{name}</a>'
    return f'<span class="gpubook-kernel" id="{kid}">{name}</span>'


def _chapter_link(chapter: str, there: bool) -> str:
    return f"{{doc}}`the chapter <{chapter}>`" if there else f"`{chapter}`"


def chapter_sections(table_rows: list[dict[str, Any]], chapters_dir: Path | str | None = None) -> str:
    """A section per chapter: its heading (the chapter's title), a link to the chapter, and its
    table, one row per case, each kernel's first row carrying the kernel's anchor (a link to the
    cell that builds it where the manifest names that cell)."""
    d = Path(chapters_dir) if chapters_dir is not None else CHAPTERS
    ids = anchors(table_rows)
    out = []
    for chapter, rs in by_chapter(table_rows).items():
        names = [g[0].get("build", {}).get("name", g[0]["name"]) for g in matrix.kernels(rs)]
        repeated = {n for n in names if names.count(n) > 1}
        c = chapter_counts(rs)
        there = (d / f"{chapter}.md").is_file()
        out += [f"({section_id(chapter)})=", f"## {chapter_title(chapter, d)}", "",
                f"{c['kernels']} kernel{'s' * (c['kernels'] != 1)}, built in **{_chapter_link(chapter, there)}**.", ""]
        body, anchored = [], set()
        for r in rs:
            key = _build_key(r)
            anchor = ids.get(key) if key not in anchored else None
            anchored.add(key)
            body.append([_kernel_cell(r, repeated, anchor, there), matrix.compiled(r), matrix._verified(r),
                         breakable(matrix._speed(r["perf"])), matrix.stress(r)])
        out.append(_list_table(TABLE_COLUMNS, body[:ROWS_SHOWN], "gpubook-matrix", WIDTHS))
        if len(body) > ROWS_SHOWN:  # a chapter of many cases: the rest folded, one click away
            rest = len(body) - ROWS_SHOWN
            out += ["````{dropdown} " + f"The other {rest} rows of this chapter", "",
                    _list_table(TABLE_COLUMNS, body[ROWS_SHOWN:], "gpubook-matrix", WIDTHS), "````", ""]
    return "\n".join(out)


def run_log(runs: list[dict[str, Any]], sims: list[dict[str, Any]]) -> str:
    """The runs the results files hold, one line each, folded in a dropdown."""
    lines = [f"- {r['run']['date']}: {r['run']['gpu']} ({r['run']['arch']}); torch {r['run']['torch']}; "
             f"sanitizer: {', '.join(r['run']['sanitizer']) or 'off'}" for r in runs]
    lines += [f"- {r['run']['date']}: simulated on the CPU, {r['run']['simulator']} ({r['run']['arch']}); "
              f"tools: {', '.join(r['run']['tools'])}; {len(r['cases'])} cases" for r in sims]
    title = f"Run log: {len(runs)} GPU run{'s' * (len(runs) != 1)}, {len(sims)} CPU simulation{'s' * (len(sims) != 1)}"
    return "\n".join(["````{dropdown} " + title, ":class-container: gpubook-run-log", "", *lines, "````", ""])
