"""The notebooks run as a reader runs them: from notebooks/, with what requirements.txt installs."""

from __future__ import annotations

import ast
import importlib.metadata as md
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = sorted((ROOT / "notebooks").glob("*.ipynb"))


def _canon(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _requirement_names(path: Path) -> set[str]:
    """Distribution names a requirements file installs directly (`-e .` is this book's package)."""
    names = set()
    for line in path.read_text().splitlines():
        line = line.split("#")[0].strip()
        if not line:
            continue
        if line.startswith("-e"):
            names.add("gpubook")
        elif not line.startswith("-"):
            names.add(_canon(re.split(r"[<>=!~;\[ ]", line, maxsplit=1)[0]))
    return names


def _closure(names: set[str]) -> set[str]:
    """The names and everything they depend on, as far as the installed metadata tells."""
    from packaging.requirements import Requirement

    seen, todo = set(), list(names)
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        try:
            requires = md.requires(name) or []
        except md.PackageNotFoundError:
            continue
        for spec in requires:
            req = Requirement(spec)
            if req.marker is None or req.marker.evaluate({"extra": ""}):
                todo.append(_canon(req.name))
    return seen


def _imports(notebook: Path) -> set[str]:
    """Top-level modules that the code cells of a notebook import."""
    import nbformat

    mods = set()
    for cell in nbformat.read(notebook, as_version=4).cells:
        if cell.cell_type != "code":
            continue
        source = "\n".join(ln for ln in cell.source.splitlines() if not ln.lstrip().startswith(("%", "!")))
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.Import):
                mods |= {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                mods.add(node.module.split(".")[0])
    return mods


def test_there_are_notebooks():
    assert NOTEBOOKS, "notebooks/ holds no .ipynb"


def test_requirements_install_jupyter_and_everything_the_notebooks_import():
    wanted = _requirement_names(ROOT / "requirements.txt")
    assert "jupyter" in wanted, "requirements.txt must install Jupyter: it is what opens the notebooks"
    provided = _closure(wanted)
    owners = md.packages_distributions()
    missing = {}
    for nb in NOTEBOOKS:
        for mod in sorted(_imports(nb)):
            if mod in sys.stdlib_module_names or mod == "gpubook":
                continue
            dists = {_canon(d) for d in owners.get(mod, [])}
            if not dists & provided:
                missing.setdefault(mod, []).append(nb.name)
    assert not missing, f"imported by notebooks but not installed by requirements.txt: {missing}"


@pytest.mark.book
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_runs_from_its_folder(notebook, monkeypatch, book_kernel_cache):
    """Execute a notebook top to bottom in notebooks/ with the python3 kernel; any error fails.

    Every cell runs. When the book was built earlier in this session, its kernels come from
    that build's cache (the same TIRx script, compiled by the same toolchain) instead of
    being compiled a second time.
    """
    import nbformat
    from nbclient import NotebookClient

    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)  # without a GPU, NOT RUN is the honest answer
    monkeypatch.delenv("GPUBOOK_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("GPUBOOK_KERNEL_CACHE_MODE", raising=False)
    if book_kernel_cache is not None:
        monkeypatch.setenv("GPUBOOK_KERNEL_CACHE", str(book_kernel_cache))
        monkeypatch.setenv("GPUBOOK_KERNEL_CACHE_MODE", "read")
    nb = nbformat.read(notebook, as_version=4)
    client = NotebookClient(nb, timeout=600, kernel_name="python3",
                            resources={"metadata": {"path": str(notebook.parent)}})
    client.execute()  # raises CellExecutionError on the first cell that fails
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, f"{notebook.name}: {errors[0]['ename']}: {errors[0]['evalue']}"
