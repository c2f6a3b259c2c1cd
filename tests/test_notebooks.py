"""The notebooks run as a reader runs them: from notebooks/, with what requirements.txt installs."""

from __future__ import annotations

import ast
import datetime
import importlib.metadata as md
import os
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


# The book build executes every cell of every chapter in chapters/; each notebook holds the same
# cells (test_book.py::test_chapter_and_notebook_are_paired) and runs in notebooks/, a sibling
# folder at the same depth, so a relative path means the same file from both -- unless a cell
# names one of the two folders or asks where it runs (checked below). A test run therefore
# executes in full, from notebooks/, the day's sample of notebooks that the book build executed
# in under SAMPLE_SECONDS (GPUBOOK_NOTEBOOKS=all executes every one), and the first code cell
# (the imports) of every notebook.
NOTEBOOKS_ENV = "GPUBOOK_NOTEBOOKS"
SAMPLE_SIZE, SAMPLE_SECONDS = 2, 120
TODAY = datetime.date.today()  # once per session: a run that passes midnight keeps its sample
# A string that starts with a path into either folder, the working directory, or a cell's own
# __file__ (a module's, e.g. gb.__file__, is absolute).
FOLDER_SENSITIVE = re.compile(r"""["'](\.{1,2}/)*(chapters|notebooks)/|os\.getcwd|Path\.cwd|(?<![.\w])__file__""")


def _run(nb, folder: Path, name: str) -> None:
    from nbclient import NotebookClient

    client = NotebookClient(nb, timeout=600, kernel_name="python3", resources={"metadata": {"path": str(folder)}})
    client.execute()  # raises CellExecutionError on the first cell that fails
    errors = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if o.get("output_type") == "error"]
    assert not errors, f"{name}: {errors[0]['ename']}: {errors[0]['evalue']}"


def sample(seconds: dict[str, float] | None, day: datetime.date = TODAY) -> list[str]:
    """The stems of the day's notebooks to execute in full: SAMPLE_SIZE of those that the book
    build executed in under SAMPLE_SECONDS (all notebooks when no build of this session says)."""
    pool = sorted(p.stem for p in NOTEBOOKS if seconds is None or seconds.get(p.stem, 1e9) < SAMPLE_SECONDS)
    if not pool:
        return []
    start = (day.toordinal() * SAMPLE_SIZE) % len(pool)
    return [pool[(start + i) % len(pool)] for i in range(min(SAMPLE_SIZE, len(pool)))]


def test_the_sample_rotates_through_every_quick_notebook():
    seconds = {p.stem: 10.0 for p in NOTEBOOKS}
    seconds[NOTEBOOKS[0].stem] = 500.0
    seen = set()
    for d in range(len(NOTEBOOKS)):
        picked = sample(seconds, TODAY + datetime.timedelta(days=d))
        assert len(picked) == min(SAMPLE_SIZE, len(NOTEBOOKS) - 1)
        seen |= set(picked)
    assert seen == {p.stem for p in NOTEBOOKS[1:]}


@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_no_cell_depends_on_the_folder_it_runs_in(notebook):
    import nbformat

    for i, cell in enumerate(nbformat.read(notebook, as_version=4).cells):
        if cell.cell_type == "code":
            m = FOLDER_SENSITIVE.search(cell.source)
            assert m is None, f"{notebook.name} cell {i} depends on its folder: {m.group(0)!r}"


@pytest.mark.book
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_starts_from_its_folder(notebook, monkeypatch):
    """The first code cell (imports, the harness, the chapter's setup) runs in notebooks/."""
    import nbformat

    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)
    nb = nbformat.read(notebook, as_version=4)
    first = next(i for i, c in enumerate(nb.cells) if c.cell_type == "code")
    nb.cells = nb.cells[:first + 1]
    _run(nb, notebook.parent, notebook.name)


@pytest.mark.book
@pytest.mark.parametrize("notebook", NOTEBOOKS, ids=[p.stem for p in NOTEBOOKS])
def test_every_notebook_runs_from_its_folder(notebook, monkeypatch, book_kernel_cache, book_notebook_seconds):
    """Execute a notebook top to bottom in notebooks/ with the python3 kernel; any error fails.

    Every cell runs. When the book was built earlier in this session, its kernels come from
    that build's cache (the same TIRx script, compiled by the same toolchain) instead of
    being compiled a second time.
    """
    import nbformat

    if os.environ.get(NOTEBOOKS_ENV) != "all" and notebook.stem not in sample(book_notebook_seconds):
        pytest.skip(f"not in the day's sample of {SAMPLE_SIZE} (its cells ran in the book build; "
                    f"{NOTEBOOKS_ENV}=all executes every notebook)")
    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)  # without a GPU, NOT RUN is the honest answer
    monkeypatch.delenv("GPUBOOK_KERNEL_CACHE", raising=False)
    monkeypatch.delenv("GPUBOOK_KERNEL_CACHE_MODE", raising=False)
    if book_kernel_cache is not None:
        monkeypatch.setenv("GPUBOOK_KERNEL_CACHE", str(book_kernel_cache))
        monkeypatch.setenv("GPUBOOK_KERNEL_CACHE_MODE", "read")
    _run(nbformat.read(notebook, as_version=4), notebook.parent, notebook.name)
