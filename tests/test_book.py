"""The whole book builds under -W with every chapter executed; a failing check or a raising
cell fails the build; chapters and notebooks stay paired."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import jupytext
import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted(p for p in (ROOT / "chapters").glob("*.md") if not p.name.startswith("_"))


def test_there_are_chapters():
    assert any(p.name.startswith("01-") for p in CHAPTERS)


@pytest.mark.book
@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_every_chapter_page_holds_executed_output(built_book, chapter):
    page = built_book / "chapters" / f"{chapter.stem}.html"
    assert page.is_file(), f"no page for {chapter.name}"
    html = page.read_text()
    assert "cell_output" in html, f"{chapter.name}: no executed output on the page"
    src = chapter.read_text()
    n_builds = len(re.findall(r"\bgb\.build\(", src))
    if n_builds:
        reports = html.count('class="gpubook-report"')
        assert reports >= 1, f"{chapter.name} builds kernels but its page shows no compile report"
        # A Hopper twin's kernels are wgmma kernels: sm_90a is the only arch they compile for.
        # (each call read up to the next one, at most three lines, so that one call's arguments
        # are never credited to the next)
        calls = re.split(r"\bgb\.build\(", src)[1:]
        hopper_only = n_builds == sum("archs=(gb.HOPPER,)" in "\n".join(c.split("\n")[:3]) for c in calls)
        arch = "sm_90a" if hopper_only else "sm_100a"
        assert f"compiled for {arch}" in html, f"{chapter.name}: no kernel report says 'compiled for {arch}'"
    if "gb.check(" in src:
        assert re.search(r"\bPASSED [\w.\-]+ |\bNOT RUN |\bnot run here: ", html), f"{chapter.name}: checks left no verdict"


@pytest.mark.book
def test_no_page_claims_a_pass_without_a_gpu(built_book):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: passes are real here")
    for page in (built_book / "chapters").glob("*.html"):
        text = page.read_text()
        assert not re.search(r"PASSED [\w.\-]+ here\b", text), f"{page.name} claims a pass here without a GPU"
        # every pass printed is a replay's, with the GPU and the date it ran on
        for m in re.finditer(r"PASSED [\w.\-]+ ([^:<]*)", text):
            assert re.fullmatch(r"on an? [^()]+ \(replay of \d{4}-\d\d-\d\d\)", m.group(1).strip()), \
                f"{page.name}: a pass without its replay: {m.group(0)!r}"


def _mini_book(tmp_path: Path, chapter_body: str) -> Path:
    """A one-chapter copy of the book's configuration with the given chapter."""
    proj = tmp_path / "proj"
    (proj / "chapters").mkdir(parents=True)
    shutil.copy(ROOT / "conf.py", proj / "conf.py")
    for folder in ("_static", "_templates"):
        if (ROOT / folder).is_dir():
            shutil.copytree(ROOT / folder, proj / folder)
    (proj / "index.md").write_text("# Mini\n\n```{toctree}\n:glob:\n\nchapters/*\n```\n")
    front = (ROOT / "chapters" / "01-execution-model.md").read_text().split("---\n")[1]
    (proj / "chapters" / "01-mini.md").write_text(f"---\n{front}---\n\n# Mini chapter\n\n{chapter_body}")
    return proj


def _build(proj: Path, **env: str) -> subprocess.CompletedProcess:
    full_env = {k: v for k, v in os.environ.items() if k != "GPUBOOK_STRICT"}
    full_env.update(GPUBOOK_EXECUTION="force", GPUBOOK_CACHE=str(proj / "cache"), **env)
    return subprocess.run(
        [sys.executable, "-m", "sphinx", "-W", "-T", "-b", "html", "-q", str(proj), str(proj / "_build")],
        cwd=proj, env=full_env, capture_output=True, text=True,
    )


CELL = "```{{code-cell}} ipython3\n{}\n```\n"


@pytest.mark.book
def test_a_mini_book_builds(tmp_path):
    proj = _mini_book(tmp_path, CELL.format("import gpubook as gb\nprint(gb.B200.sms)"))
    proc = _build(proj)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "148" in (proj / "_build" / "chapters" / "01-mini.html").read_text()


@pytest.mark.book
def test_a_failing_check_fails_the_build(tmp_path):
    body = CELL.format(
        "import torch, gpubook as gb\n"
        "gb.compare('wrong_kernel', torch.zeros(4), torch.ones(4), *gb.tolerance('float32'))"
    )
    proc = _build(_mini_book(tmp_path, body))
    assert proc.returncode != 0
    assert "CheckError" in proc.stdout + proc.stderr


@pytest.mark.book
def test_a_raising_cell_fails_the_build(tmp_path):
    proc = _build(_mini_book(tmp_path, CELL.format("raise RuntimeError('this cell must not pass')")))
    assert proc.returncode != 0
    assert "this cell must not pass" in proc.stdout + proc.stderr


@pytest.mark.book
def test_strict_build_fails_where_a_check_cannot_run(tmp_path):
    import torch

    if torch.cuda.is_available():
        pytest.skip("a GPU is present: the check would run")
    body = CELL.format(
        "import sys, torch, gpubook as gb\n"
        f"sys.path.insert(0, {str(ROOT / 'tests')!r})\n"
        "import kernels\n"
        "k = gb.build(kernels.vadd, name='vadd')\n"
        "gb.check(k, [torch.ones(4096), torch.ones(4096), torch.empty(4096)], ref=lambda x, y, o: x + y)"
    )
    proc = _build(_mini_book(tmp_path, body), GPUBOOK_STRICT="1")
    assert proc.returncode != 0
    assert "NotRunError" in proc.stdout + proc.stderr


@pytest.mark.parametrize("chapter", CHAPTERS, ids=lambda p: p.stem)
def test_chapter_and_notebook_are_paired(chapter):
    nb_path = ROOT / "notebooks" / f"{chapter.stem}.ipynb"
    assert nb_path.is_file(), f"{chapter.name} has no notebook: run jupytext --sync {chapter.relative_to(ROOT)}"
    from_md = jupytext.read(chapter)
    from_nb = nbformat.read(nb_path, as_version=4)
    nbformat.validate(from_nb)
    pairs = list(zip(from_md.cells, from_nb.cells))
    assert len(from_md.cells) == len(from_nb.cells), f"{chapter.name} and its notebook differ in cells"
    for i, (a, b) in enumerate(pairs):
        assert (a.cell_type, a.source) == (b.cell_type, b.source), (
            f"{chapter.name} cell {i} drifted from the notebook: run jupytext --sync")
        if b.cell_type == "code":
            assert b.outputs == [] and b.execution_count is None, f"{nb_path.name} carries outputs"


def test_every_notebook_has_a_chapter():
    for nb in (ROOT / "notebooks").glob("*.ipynb"):
        assert (ROOT / "chapters" / f"{nb.stem}.md").is_file(), f"{nb.name} has no chapter"
    json.loads((ROOT / "notebooks" / "01-execution-model.ipynb").read_text())
