"""What the book needs to read the same served over HTTP, opened from disk (``file://``) or
downloaded as notebooks: a Sphinx extension (conf.py lists it after ``gpubook.book.sphinxext``).

Search: Sphinx's search page fetches every result's page to cut its summary from, and a page
opened from disk may fetch nothing. The build writes the text of every page instead, into
``_static/search-text.js`` (a script that sets ``window.GPUBOOK_PAGE_TEXT``, loaded by the
search page alone), and ``_static/search-summaries.js`` cuts each result's summary from it; conf.py
turns Sphinx's own summaries (``html_show_search_summary``) off.

Demos: each page loads ``_static/demo-frames.js``, which sizes the demo frames to their content
and sends them the book's colour mode by ``postMessage``, the one way a page and its frames talk
when the browser counts each file as an origin of its own (``_static/demos/frame.js`` is the other end).

Notebooks: the download link of a chapter (``gpubook.book.sphinxext``) serves
``_notebooks/<name>.ipynb``, written here from the chapter's paired notebook with its glued values
filled in (``gpubook.book.notebook_download``).
"""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from sphinx.application import Sphinx
from sphinx.util import logging

from . import notebook_download
from .sphinxext import NOTEBOOK_DIR, notebook_of

logger = logging.getLogger(__name__)

SEARCH_TEXT = "search-text.js"
SEARCH_SCRIPTS = (SEARCH_TEXT, "search-summaries.js")
DEMO_HOST = "demo-frames.js"
_SKIP = {"script", "style"}
_VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
# elements inside a line of text; every other element's edges part words, as the page shows them
_INLINE = {"a", "abbr", "b", "code", "em", "i", "kbd", "mark", "s", "small", "span", "strong", "sub", "sup",
           "u", "var", "bdi", "cite", "dfn", "q", "samp", "time"}


class MainText(HTMLParser):
    """The text of a page's ``[role=main]`` element without its scripts, styles and permalink
    signs: what Sphinx's search cuts a summary from."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.depth = 0  # open elements inside main (0: outside)
        self.skip_at: int | None = None  # depth of the element being skipped
        self.parts: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._part(tag)
        if tag in _VOID:
            return
        a = dict(attrs)
        if self.depth == 0:
            if a.get("role") == "main":
                self.depth = 1
            return
        self.depth += 1
        if self.skip_at is None and (tag in _SKIP or "headerlink" in (a.get("class") or "").split()):
            self.skip_at = self.depth

    def handle_endtag(self, tag: str) -> None:
        if self.depth == 0 or tag in _VOID:
            return
        self._part(tag)
        if self.skip_at == self.depth:
            self.skip_at = None
        self.depth -= 1

    def _part(self, tag: str) -> None:
        if self.depth and self.skip_at is None and tag not in _INLINE:
            self.parts.append(" ")

    def handle_data(self, data: str) -> None:
        if self.depth and self.skip_at is None:
            self.parts.append(data)

    def text(self) -> str:
        return re.sub(r"\s+", " ", "".join(self.parts)).strip()


def main_text(page: str) -> str:
    """The searchable text of one built page (its HTML)."""
    parser = MainText()
    parser.feed(page)
    parser.close()
    return parser.text()


def write_search_text(outdir: Path, docnames: list[str], suffix: str = ".html") -> Path:
    """Write ``_static/search-text.js``: each page's text under its docname."""
    text = {}
    for doc in sorted(docnames):
        page = outdir / (doc + suffix)
        if page.is_file():
            text[doc] = main_text(page.read_text(encoding="utf-8"))
    out = outdir / "_static" / SEARCH_TEXT
    out.parent.mkdir(parents=True, exist_ok=True)
    body = json.dumps(text, ensure_ascii=False, separators=(",", ":")).replace("</", "<\\/")
    out.write_text("// Written at build time by gpubook.book.reading: the text of every page, for the\n"
                   f"// summaries of the search page.\nwindow.GPUBOOK_PAGE_TEXT = {body};\n", encoding="utf-8")
    return out


def write_notebooks(app: Sphinx) -> None:
    """Write each chapter's download, its paired notebook with the glued values filled in."""
    out = Path(app.outdir) / NOTEBOOK_DIR
    glue_dir = Path(app.outdir).parent / "jupyter_execute"  # where myst-nb writes what it executed
    for docname in sorted(app.env.found_docs):
        nb = notebook_of(app, docname)
        if nb is None:
            continue
        out.mkdir(exist_ok=True)
        missing = notebook_download.write_download(nb, glue_dir, docname, out / nb.name)
        if missing:
            logger.warning(f"{docname}: the downloaded notebook lacks the glued values "
                           f"{', '.join(sorted(set(missing)))}", type="gpubook", subtype="download")


def on_html_page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                         doctree: Any) -> None:
    if pagename == "search":
        for name in SEARCH_SCRIPTS:
            app.add_js_file(name, defer="defer")


def on_build_finished(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    write_search_text(Path(app.outdir), sorted(app.env.found_docs), app.builder.out_suffix)
    write_notebooks(app)


def setup(app: Sphinx) -> dict[str, Any]:
    app.setup_extension("gpubook.book.sphinxext")
    app.add_js_file(DEMO_HOST, defer="defer")
    app.connect("html-page-context", on_html_page_context)
    app.connect("build-finished", on_build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
