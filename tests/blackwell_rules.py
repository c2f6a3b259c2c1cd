"""Run a chapter's code cells and collect the PTX of every Blackwell-only kernel it builds.

Used by tests/test_blackwell_rules.py, and runnable on its own:
`python tests/blackwell_rules.py chapters/06-tensor-cores-tmem.md` prints one JSON line per
Blackwell-only kernel: its name, the Blackwell-only features of its PTX, the findings of
`gpubook.lint`, and whether the kernel is shown broken on purpose: built with `breaks=` (the
build asserts exactly those findings) or with findings the chapter itself computes with `lint.lint`.
"""

from __future__ import annotations

import __future__
import json
import os
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FUTURE_FLAGS = 0
for _name in __future__.all_feature_names:
    FUTURE_FLAGS |= getattr(__future__, _name).compiler_flag

# Code that marks a chapter as holding Blackwell-only kernels (read in code cells only).
BLACKWELL_CODE = re.compile(r"tcgen05|clusterlaunchcontrol|TMEMPool|cta_group=2|ClusterLaunchControlScheduler")


def code_cells(chapter: Path) -> list[str]:
    """The chapter's code cells, in order, without IPython magics."""
    import jupytext

    nb = jupytext.read(chapter)
    return ["\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
            for c in nb.cells if c.cell_type == "code"]


def blackwell_chapters() -> list[Path]:
    """Chapters whose code uses a Blackwell-only feature."""
    return [p for p in sorted((ROOT / "chapters").glob("*.md"))
            if any(BLACKWELL_CODE.search(c) for c in code_cells(p))]


def collect(chapter: Path, workdir: Path) -> list[dict]:
    """Execute the chapter's cells (cwd: its folder) and report every Blackwell-only kernel built."""
    import matplotlib

    matplotlib.use("Agg")
    import gpubook as gb
    import gpubook.compile.build  # noqa: F401 - the module, not the function gpubook re-exports
    from gpubook import lint, report

    build_mod = sys.modules["gpubook.compile.build"]
    built: list = []
    shown_broken: set[str] = set()
    real_build, real_lint = build_mod.build, lint.lint

    def build(*args, **kwargs):
        k = real_build(*args, **kwargs)
        built.append(k)
        return k

    def lint_seen(ptx: str):
        found = real_lint(ptx)
        # Only the chapter's own call counts: lint.report() calls lint() too, and printing a
        # report is not asserting what it says.
        if found and sys._getframe(1).f_globals.get("__name__") != lint.__name__:
            shown_broken.add(ptx)
        return found

    build_mod.build = gb.build = build
    lint.lint = lint_seen
    os.chdir(chapter.parent)
    namespace: dict = {"__name__": "__main__"}
    flags = 0   # a cell's `from __future__ import ...` holds for the later cells, as in IPython
    try:
        for i, src in enumerate(code_cells(chapter)):
            path = workdir / f"{chapter.stem}-cell{i}.py"   # TVMScript parses functions from their source file
            path.write_text(src)
            code = compile(src, str(path), "exec", flags=flags, dont_inherit=True)
            flags |= code.co_flags & FUTURE_FLAGS
            exec(code, namespace)  # noqa: S102 - the book's own cells
    finally:
        build_mod.build = gb.build = real_build
        lint.lint = real_lint
    out = []
    for k in built:
        features = report.blackwell_only_features(k.ptx)
        if features:
            out.append({"name": k.name, "features": features,
                        "findings": [str(f) for f in real_lint(k.ptx)],
                        "shown_broken": k.ptx in shown_broken or bool(k.lint_breaks)})
    return out


if __name__ == "__main__":
    import tempfile

    chapter = Path(sys.argv[1]).resolve()
    with tempfile.TemporaryDirectory() as tmp:
        for row in collect(chapter, Path(tmp)):
            print("BLACKWELL-KERNEL " + json.dumps(row), flush=True)
