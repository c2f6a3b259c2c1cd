"""A reader sees code that teaches: no visible cell only builds a table or feeds `glue`.

Read from the chapter sources, without a browser: a cell is visible unless it carries
`remove-cell`, `remove-input` or `hide-input`. tests/test_browser.py checks the same on the
rendered pages.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from bookkeeping import (
    HIDDEN_TAGS, bookkeeping_cells, chapter_code_cells, glue_tail, imports_myst_nb,
)

ROOT = Path(__file__).resolve().parents[1]
CHAPTERS = sorted((ROOT / "chapters").glob("[0-9A-Z]*.md"))



def _visible(path: Path) -> list[tuple[int, str]]:
    return [(i, src) for i, (src, tags) in enumerate(chapter_code_cells(path)) if not HIDDEN_TAGS & set(tags)]


def _first_line(src: str) -> str:
    return src.strip().splitlines()[0][:80] if src.strip() else "(empty)"


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_visible_cell_is_bookkeeping(path: Path):
    cells = chapter_code_cells(path)
    found = set(bookkeeping_cells([src for src, _ in cells]))
    shown = [f"cell {i}: {_first_line(src)}" for i, src in _visible(path) if i in found]
    assert not shown, (f"{path.name}: cells that only build a table or feed glue are shown; tag them "
                       "remove-cell, remove-input or hide-input:\n" + "\n".join(shown))


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_visible_cell_ends_in_glue(path: Path):
    """A teaching cell that also glues keeps its glue calls out of sight, in a hidden cell after it."""
    shown = [f"cell {i}: {_first_line(src)}" for i, src in _visible(path) if glue_tail(src)]
    assert not shown, f"{path.name}: visible cells end in glue(..., display=False) calls:\n" + "\n".join(shown)


@pytest.mark.parametrize("path", CHAPTERS, ids=[p.stem for p in CHAPTERS])
def test_no_visible_cell_imports_myst_nb(path: Path):
    shown = [f"cell {i}: {_first_line(src)}" for i, src in _visible(path) if imports_myst_nb(src)]
    assert not shown, f"{path.name}: myst_nb is imported in a visible cell:\n" + "\n".join(shown)


# The detector on small examples.

TEACHING_THAT_GLUES = '''
GiB = 2**30
for gpu in (hw.B200, hw.H200):
    print(f"{gpu.name}: {2 * GiB / gpu.hbm_bandwidth * 1e3:.3f} ms")
glue("b200_copy_ms", 2 * GiB / hw.B200.hbm_bandwidth * 1e3, display=False)
'''

TABLE_ONLY = '''
def row(M, N, K):
    f, q = rl.gemm_flops(M, N, K), rl.gemm_bytes(M, N, K, 2)
    return f"| {M} | {N} | {K} | {f / q:.0f} |"

shapes = [(256, 256, 256), (4096, 4096, 4096)]
Markdown("| M | N | K | FLOP/B |\\n|---:|---:|---:|---:|\\n" + "\\n".join(row(*s) for s in shapes))
'''


@pytest.mark.parametrize("source, expected", [
    (TEACHING_THAT_GLUES, False),
    (TABLE_ONLY, True),
    ('glue("n", n, display=False)\nglue("m", m, display=False)', True),
    ('rows = [f"| {k} | {v} |" for k, v in facts.items()]\n'
     'display(Markdown("| a | b |\\n|---|---|\\n" + "\\n".join(rows)))', True),
    ('from IPython.display import Markdown\nMarkdown(rl.ladder_markdown(rl.ladder_rows()))', True),
    ('glue("tally", gb.headline.tally(), display=False)', True),
    ('for key in ("a", "b"):\n    glue(key, results[key], display=False)', True),
    ('k = gb.build(vadd, name="vadd")\nglue("regs", k.registers, display=False)\nk', False),
    ('x = compute()\nassert x > 0\nglue("x", x, display=False)', False),
    ('rows = [f"| {r} |" for r in data]\nprint("\\n".join(rows))', False),
    ('def row(r):\n    print(r)\n    return f"| {r} |"\nMarkdown("\\n".join(row(r) for r in data))', False),
    ('(i_4096, i_decode)', False),
    ('x = 1\n', False),
])
def test_the_detector_on_small_cells(source: str, expected: bool):
    assert (bookkeeping_cells([source]) == [0]) is expected


def test_a_value_a_later_cell_reads_makes_a_cell_teach():
    cells = ['ratio = a / b\nglue("ratio", ratio, display=False)', "print(ratio)"]
    assert bookkeeping_cells(cells) == []
    assert bookkeeping_cells(cells[:1] + ["print(1)"]) == [0]


def test_the_glue_only_rule_leaves_tables_alone():
    assert bookkeeping_cells([TABLE_ONLY], tables=False) == []
    assert bookkeeping_cells(['glue("n", n, display=False)'], tables=False) == [0]
    assert bookkeeping_cells([TEACHING_THAT_GLUES], tables=False) == []


def test_text_a_later_cell_reads_is_still_bookkeeping():
    cells = ['caption = f"{n} rows"\nglue("caption", caption, display=False)', "plot(caption)"]
    assert bookkeeping_cells(cells) == [0]


def test_glue_tail_and_myst_nb_imports():
    assert glue_tail(TEACHING_THAT_GLUES)
    assert not glue_tail('glue("x", x, display=False)\nprint(x)')
    assert not glue_tail('glue("fig", fig)')
    assert imports_myst_nb("import torch\nfrom myst_nb import glue")
    assert imports_myst_nb("import myst_nb")
    assert not imports_myst_nb("import torch\nimport gpubook as gb")
