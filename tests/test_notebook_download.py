"""The downloaded notebook of a chapter (gpubook.book.notebook_download): its paired notebook with
each glue role and directive replaced by the value the build glued, so that plain Jupyter shows
what the book shows."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import nbformat
import pytest

from gpubook.book import reading
from gpubook.book.notebook_download import (
    FIGURE_MISSING, MISSING, Filler, escape, filled_notebook, plain, write_download,
)

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + b"\0" * 16).decode()


def bundle(**data: str) -> dict:
    """An output bundle as myst-nb writes it into <docname>.glue.json."""
    return {"output_type": "display_data", "metadata": {"scrapbook": {"name": "x"}},
            "data": {k.replace("_", "/"): v for k, v in data.items()}}


GLUE = {
    "ridge": bundle(text_plain="281.25"),
    "lanes": bundle(text_plain="128"),
    "name": bundle(text_plain="'sm_100a *fast*'"),
    "where": bundle(text_plain="<IPython.core.display.Markdown object>", text_markdown="Read from **results/**."),
    "fig": bundle(text_plain="<IPython.core.display.Image object>", image_png=PNG),
    "table": bundle(text_plain="<pandas table>"),
}


@pytest.mark.parametrize("text, fmt, shown", [
    ("281.25", ".0f", "281"), ("281.25", ".1f", "281.2"), ("281.25", "", "281.25"), ("128", "d", "128"),
    ("'vec_auto'", "", "vec_auto"), ("'vec_auto'", "s", "vec_auto"), ("0.4567", ".1%", "45.7%"),
    ("not a literal", "", "not a literal"), ("2250.0", ",.0f", "2,250"),
])
def test_text_values_read_as_the_glue_text_role_shows_them(text: str, fmt: str, shown: str) -> None:
    assert plain(text, fmt) == shown


def test_roles_are_filled_with_their_formatted_values() -> None:
    f = Filler(GLUE)
    src = ("B200 retires {glue:text}`ridge:.0f` FLOPs per byte ({glue:text}`ridge`), "
           "{glue}`lanes` lanes, {glue:}`lanes` and {glue:any}`lanes`.")
    assert f.fill(src) == "B200 retires 281 FLOPs per byte (281.25), 128 lanes, 128 and 128."
    assert not f.missing


def test_a_pasted_value_is_literal_markdown() -> None:
    """Underscores, stars, pipes (a table) and dollars (math) of a value stay what they are."""
    assert Filler(GLUE).fill("| {glue:text}`name` |") == r"| sm\_100a \*fast\* |"
    assert escape("a|b $5 <x>") == r"a\|b \$5 \<x\>"


def test_markdown_values_are_pasted_as_markdown() -> None:
    f = Filler(GLUE)
    assert f.fill("{glue:md}`where`") == "Read from **results/**."
    assert f.fill("{glue:md}`where:myst`") == "Read from **results/**."
    assert f.fill(":::{glue:md} where\n:format: myst\n:::") == "Read from **results/**."


def test_a_figure_becomes_an_attached_image_with_its_caption() -> None:
    f = Filler(GLUE)
    src = ("Before.\n\n```{glue:figure} fig\n:alt: A roofline of three GPUs.\n:name: fig-roofline\n\n"
           "The rooflines of the three GPUs.\nTwo lines.\n```\n\nAfter.")
    out = f.fill(src)
    assert out == ("Before.\n\n![A roofline of three GPUs.](attachment:fig.png)\n\n"
                   "The rooflines of the three GPUs.\nTwo lines.\n\nAfter.")
    assert f.attachments == {"fig.png": {"image/png": PNG}}


def test_a_figure_in_a_longer_fence_and_the_text_around_it() -> None:
    src = "````{glue:figure} fig\n:name: f\n\nA caption with ```code```.\n````\n{glue:text}`lanes` more"
    out = Filler(GLUE).fill(src)
    assert out == "![fig](attachment:fig.png)\n\nA caption with ```code```.\n128 more"


def test_a_value_without_an_image_or_text_is_named_as_missing() -> None:
    f = Filler(GLUE)
    assert f.fill("```{glue:figure} table\n:name: t\n```") == r"\<pandas table\>"
    assert f.fill("```{glue:figure} nowhere\n```") == FIGURE_MISSING
    assert f.fill("{glue:text}`nowhere:.1f`") == MISSING
    assert f.missing == ["nowhere", "nowhere"]


def test_a_reference_to_another_page_reads_that_page_values() -> None:
    other = {"02-roofline": {"ridge": bundle(text_plain="281.25")}}
    f = Filler({}, other=lambda doc: other.get(doc, {}))
    assert f.fill("{glue:text}`02-roofline::ridge:.0f` and {glue}`02-roofline::ridge`") == "281 and 281.25"


def test_code_cells_stay_as_they_are_and_no_glue_is_left(tmp_path: Path) -> None:
    nb = nbformat.v4.new_notebook(cells=[
        nbformat.v4.new_markdown_cell("Ridge {glue:text}`ridge:.0f`.\n\n```{glue:figure} fig\n:alt: R.\n\nCap.\n```"),
        nbformat.v4.new_code_cell("from myst_nb import glue\nglue('ridge', 281.25)  # {glue:text}`ridge`"),
        nbformat.v4.new_markdown_cell("No glue here."),
    ])
    paired = tmp_path / "02-roofline.ipynb"
    nbformat.write(nb, str(paired))
    glue_dir = tmp_path / "jupyter_execute"
    (glue_dir / "chapters").mkdir(parents=True)
    (glue_dir / "chapters" / "02-roofline.glue.json").write_text(json.dumps(GLUE))
    out = tmp_path / "out.ipynb"
    assert write_download(paired, glue_dir, "chapters/02-roofline", out) == []
    got = nbformat.read(str(out), as_version=4)
    nbformat.validate(got)
    assert got.cells[0].source == "Ridge 281.\n\n![R.](attachment:fig.png)\n\nCap."
    assert got.cells[0].attachments == {"fig.png": {"image/png": PNG}}
    assert got.cells[1].source == nb.cells[1].source  # code is never touched
    assert got.cells[2].source == "No glue here."
    filled, missing = filled_notebook(nb, {})
    assert sorted(missing) == ["fig", "ridge"] and "{glue" not in filled["cells"][0]["source"]


def test_the_chapters_notebooks_are_filled_from_the_glue_they_declare() -> None:
    """Every glue role or directive a chapter's notebook uses is one the substitution reads."""
    import re

    root = Path(__file__).resolve().parents[1]
    for path in sorted((root / "notebooks").glob("*.ipynb")):
        nb = nbformat.read(str(path), as_version=4)
        keys = set()
        for cell in nb.cells:
            if cell.cell_type == "markdown":
                keys |= set(re.findall(r"\{glue(?::\w*)?\}`([^`:]+)", cell.source))
                keys |= set(re.findall(r"\{glue(?::\w*)?\}[ \t]*(\S+)", cell.source))
        glue = {k: bundle(text_plain="1.5", image_png=PNG) for k in keys}
        filled, missing = filled_notebook(nb, glue)
        assert not missing, f"{path.name}: {missing}"
        left = [c["source"] for c in filled["cells"] if c["cell_type"] == "markdown" and "{glue" in c["source"]]
        assert not left, f"{path.name}: glue left in the download:\n{left[0][:300]}"


def test_search_text_is_the_main_content_without_scripts_or_permalinks(tmp_path: Path) -> None:
    page = ("<html><body><nav>Menu words</nav><main role=\"main\"><h1>Roofline<a class=\"headerlink\" "
            "href=\"#r\">#</a></h1><p>The <b>ridge</b> point &amp; more.<br>Next</p><script>var x = 1;</script>"
            "<img src=\"a.png\"><style>p {}</style><p>End.</p></main><footer>Foot</footer></body></html>")
    assert reading.main_text(page) == "Roofline The ridge point & more. Next End."
    (tmp_path / "chapters").mkdir()
    (tmp_path / "chapters" / "x.html").write_text(page)
    out = reading.write_search_text(tmp_path, ["chapters/x", "chapters/gone"])
    body = out.read_text()
    data = json.loads(body[body.index("=") + 1:].strip().rstrip(";"))
    assert data == {"chapters/x": "Roofline The ridge point & more. Next End."}
