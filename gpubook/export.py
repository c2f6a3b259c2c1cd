"""Write each kernel check and measurement as a self-contained case that a GPU host can replay."""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any, Sequence

EXPORT_ENV = "GPUBOOK_EXPORT_DIR"
FORMAT_VERSION = 1
_current = {"chapter": "unknown"}


def set_chapter(chapter: str) -> None:
    """Name the chapter whose kernels the following checks belong to."""
    _current["chapter"] = chapter


def current_chapter() -> str:
    return _current["chapter"]


def export_dir() -> Path | None:
    d = os.environ.get(EXPORT_ENV)
    return Path(d) if d else None


def _case_dir(kind: str, name: str) -> Path:
    root = export_dir()
    assert root is not None
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", f"{_current['chapter']}--{name}--{kind}")
    d = root / "cases" / slug
    d.mkdir(parents=True, exist_ok=True)
    return d


def _write_common(d: Path, kernel: Any, meta: dict[str, Any]) -> None:
    for arch in kernel.runs_on:
        kernel.export(arch, str(d / f"module-{arch}.so"))
    (d / "kernel.py").write_text(kernel.script())
    meta.update(
        format=FORMAT_VERSION, chapter=_current["chapter"], runs_on=list(kernel.runs_on),
        params=[p.to_json() for p in kernel.params], facts=kernel.facts(),
        fingerprint=kernel.fingerprint,
    )
    (d / "case.json").write_text(json.dumps(meta, indent=1))


def record_check(
    kernel: Any, name: str, args: Sequence[Any], expected: Sequence[Any],
    outputs: Sequence[int], tols: Sequence[tuple[float, float]], stress: int = 0,
) -> Path | None:
    """When exporting, save a correctness case: modules, inputs, expected outputs, tolerances."""
    if export_dir() is None:
        return None
    import torch

    d = _case_dir("check", name)
    inputs = [None if i in outputs else a.contiguous() for i, a in enumerate(args)]
    torch.save({"args": inputs, "expected": [e.contiguous() for e in expected]}, d / "tensors.pt")
    _write_common(d, kernel, {
        "kind": "check", "name": name, "outputs": list(outputs),
        "tolerances": [list(t) for t in tols], "stress": stress,
    })
    return d


def record_perf(kernel: Any, name: str, meta: dict[str, Any]) -> Path | None:
    """When exporting, save a performance case: modules plus shapes, dtypes and the baseline."""
    if export_dir() is None:
        return None
    d = _case_dir("perf", name)
    _write_common(d, kernel, {"kind": "perf", "name": name, **meta})
    return d


def export_chapters(out: Path, chapters: Sequence[Path] = ()) -> int:
    """Execute chapters (default: all of chapters/) with exporting on; return an exit code."""
    import jupytext
    from nbclient import NotebookClient

    root = Path(__file__).resolve().parent.parent
    files = list(chapters) or sorted((root / "chapters").glob("[0-9A-Z]*.md"))
    out = out.resolve()
    (out / "cases").mkdir(parents=True, exist_ok=True)
    os.environ[EXPORT_ENV] = str(out)
    for f in files:
        nb = jupytext.read(f, fmt="md:myst")
        print(f"export: executing {f.name}", flush=True)
        NotebookClient(nb, timeout=600, kernel_name="python3",
                       resources={"metadata": {"path": str(f.parent)}}).execute()
    n = len([p for p in (out / "cases").iterdir() if p.is_dir()])
    size = sum(p.stat().st_size for p in out.rglob("*") if p.is_file())
    print(f"export: {n} cases, {size / 1e6:.1f} MB in {out}")
    return 0
