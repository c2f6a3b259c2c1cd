"""The manifest of the book's kernels: every kernel each chapter builds, whether or not anything
ever ran it (`results/manifest/kernels.json`, which the verification matrix lists in full).

It is recorded by executing the chapters: with `GPUBOOK_MANIFEST_DIR` naming a folder, every
`build()` (a cached one too) appends one line to `<folder>/<chapter>.jsonl` — the kernel's name,
the archs it was built for, why any other arch has no build, and the fingerprint of its TIRx
script, which every results record of the kernel names. The first build of a chapter in a
process starts its file afresh, so a chapter executed again leaves only its latest execution;
each chapter writes its own file, so chapters executed in parallel (sphinx-build -j) never share
one; a chapter served from the execution cache records nothing. The recorder is registered with
gpubook.compile.hooks when this module is imported, which `import gpubook` does (through matrix).
`python -m gpubook manifest FOLDER` merges such a folder into the manifest (`--execute` first
runs the chapters); the tests' book build records into its build folder, and
tests/test_manifest.py compares each chapter it executed with the committed manifest.

The manifest lies in a folder of its own: every results/*.json is read as a run.

The file (format 1):
{"format": 1,
 "chapters": {"<chapter>": [{"name": str, "arch": primary build, "runs_on": [arch, ...],
                             "not_built": {arch: reason}, "fingerprint": str,
                             "cell": int}, ...]}}
`cell` is the execution count of the notebook cell that built the kernel (the n-th code cell
executed, as the executed page numbers it): where a page of the book puts the kernel's anchor and
its link to appendix A (gpubook.book.kernel_links). A build outside a notebook has none.
Chapters are in book order; a chapter's kernels in the order its cells first build them, one
entry per (name, script): a kernel built again with the same script is listed once.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable, Sequence

from ..compile.build import BLACKWELL, HOPPER
from ..compile.hooks import on_build
from ..facts.paths import CHAPTERS, RESULTS
from ..run.record import current_chapter

MANIFEST_ENV = "GPUBOOK_MANIFEST_DIR"
MANIFEST = RESULTS / "manifest" / "kernels.json"
FORMAT = 1
ARCHS = (BLACKWELL, HOPPER)  # the book's targets (a build may also run on the GPU at hand)
_started: set[Path] = set()  # the chapter files this process has begun


def current_cell() -> int | None:
    """The execution count of the notebook cell running now (None outside a notebook)."""
    try:
        from IPython import get_ipython
    except ImportError:
        return None
    # the running cell's result carries its count (the shell's own count may be the next cell's)
    running = getattr(getattr(get_ipython(), "displayhook", None), "exec_result", None)
    count = getattr(running, "execution_count", None)
    return count if isinstance(count, int) else None


def entry(kernel: Any) -> dict[str, Any]:
    """What the manifest keeps of one build (with the cell that built it, in a notebook)."""
    out = {"name": kernel.name, "arch": kernel.arch,
           "runs_on": [a for a in kernel.runs_on if a in ARCHS],
           "not_built": {a: kernel.not_built[a] for a in ARCHS if a in kernel.not_built},
           "fingerprint": kernel.fingerprint}
    cell = current_cell()
    if cell is not None:
        out["cell"] = cell
    return out


def record(kernel: Any) -> None:
    """Append this build to its chapter's file when `GPUBOOK_MANIFEST_DIR` is set."""
    folder = os.environ.get(MANIFEST_ENV)
    if not folder:
        return
    path = Path(folder) / f"{current_chapter()}.jsonl"
    first = path not in _started
    if first:
        path.parent.mkdir(parents=True, exist_ok=True)
        _started.add(path)
    with path.open("w" if first else "a") as f:
        f.write(json.dumps(entry(kernel)) + "\n")


on_build(record)


def _unique(entries: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    seen: set[tuple[str, str]] = set()
    out = []
    for e in entries:
        key = (e["name"], e["fingerprint"])
        if key not in seen:
            seen.add(key)
            out.append(e)
    return out


def recorded(folder: Path | str) -> dict[str, list[dict[str, Any]]]:
    """The chapters recorded in a folder: chapter -> its kernels (each distinct build once)."""
    out = {}
    for p in sorted(Path(folder).glob("*.jsonl")):
        out[p.stem] = _unique(json.loads(line) for line in p.read_text().splitlines() if line.strip())
    return out


def book_order(chapters: Iterable[str]) -> list[str]:
    """Chapters as the book's tables of contents list them: numbered chapters, then appendices."""
    return sorted(chapters, key=lambda c: (not c[:1].isdigit(), c))


def load(path: Path | str | None = None) -> dict[str, list[dict[str, Any]]]:
    """The committed manifest: chapter -> its kernels, in book order ({} when there is none)."""
    p = Path(path) if path is not None else MANIFEST
    if not p.is_file():
        return {}
    data = json.loads(p.read_text())
    if data.get("format") != FORMAT:
        raise ValueError(f"{p}: manifest format {data.get('format')!r}, expected {FORMAT}")
    return {c: data["chapters"][c] for c in book_order(data["chapters"])}


def merge(folder: Path | str, executed: Sequence[str] = (), path: Path | str | None = None) -> dict[str, Any]:
    """Write the chapters recorded in `folder` into the manifest (default results/manifest/),
    replacing what it said of them; a chapter in `executed` that recorded nothing built no kernel
    and leaves the manifest. Only chapters of the book (files in chapters/) are kept."""
    p = Path(path) if path is not None else MANIFEST
    chapters = load(p)
    for c in executed:
        chapters.pop(c, None)
    chapters.update(recorded(folder))
    known = {f.stem for f in CHAPTERS.glob("*.md")}
    data = {"format": FORMAT,
            "chapters": {c: chapters[c] for c in book_order(chapters) if c in known and chapters[c]}}
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text(dumps(data))
    return data


def dumps(data: dict[str, Any]) -> str:
    """The manifest as text, one kernel a line (a change to a kernel is a change to its line)."""
    chapters = [f" {json.dumps(c)}: [\n" + ",\n".join(f"  {json.dumps(k, ensure_ascii=False)}" for k in ks) + "\n ]"
                for c, ks in data["chapters"].items()]
    return f'{{"format": {data["format"]}, "chapters": {{\n' + ",\n".join(chapters) + "\n}}\n"


def owner(built: dict[str, list[dict[str, Any]]]) -> Any:
    """case -> (chapter, index of its build in the manifest) or None: the build of the case's
    chapter whose script its fingerprint names (a record without one: the build of its name),
    the first such build where several are."""
    first = [(ch, i, k) for ch, ks in built.items() for i, k in reversed(list(enumerate(ks)))]
    by_fp = {(ch, k["fingerprint"]): (ch, i) for ch, i, k in first}
    by_name = {(ch, k["name"]): (ch, i) for ch, i, k in first}
    return lambda c: (by_fp.get((c["chapter"], c["fingerprint"])) if c.get("fingerprint")
                      else by_name.get((c["chapter"], c["name"])))


def split_runs(runs: list[dict[str, Any]], owner: Any) -> dict[Any, list[dict[str, Any]]]:
    """The runs restricted to each owner's cases: owner -> runs holding its cases alone."""
    out: dict[Any, list[dict[str, Any]]] = {}
    for run in runs:
        mine: dict[Any, list[dict[str, Any]]] = {}
        for c in run["cases"]:
            mine.setdefault(owner(c), []).append(c)
        for key, cases in mine.items():
            out.setdefault(key, []).append({"run": run["run"], "cases": cases})
    return out


def execute(files: Sequence[Path], folder: Path) -> list[str]:
    """Execute chapter files with recording on into `folder`; return the chapters executed."""
    import jupytext
    from nbclient import NotebookClient

    from ..run.jupyter import quiet_kernels

    quiet_kernels()

    folder.mkdir(parents=True, exist_ok=True)
    for f in files:  # what an earlier execution of these chapters left
        (folder / f"{f.stem}.jsonl").unlink(missing_ok=True)
    before = os.environ.get(MANIFEST_ENV)
    os.environ[MANIFEST_ENV] = str(folder.resolve())
    try:
        for f in files:
            print(f"manifest: executing {f.name}", flush=True)
            nb = jupytext.read(f, fmt="md:myst")
            NotebookClient(nb, timeout=600, kernel_name="python3",
                           resources={"metadata": {"path": str(f.parent)}}).execute()
    finally:
        if before is None:
            os.environ.pop(MANIFEST_ENV, None)
        else:
            os.environ[MANIFEST_ENV] = before
    return [f.stem for f in files]


def main(folder: Path, run: bool, chapters: Sequence[Path] = ()) -> int:
    """`python -m gpubook manifest FOLDER [--execute [CHAPTER ...]]`."""
    executed: list[str] = []
    if run:
        files = list(chapters) or sorted(CHAPTERS.glob("[0-9A-Z]*.md"))
        executed = execute(files, folder)
    data = merge(folder, executed)
    n = sum(len(ks) for ks in data["chapters"].values())
    print(f"manifest: {n} kernels of {len(data['chapters'])} chapters in {MANIFEST}")
    return 0
