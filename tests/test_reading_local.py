"""The built book opened from disk (``file://.../index.html``), as the README allows, and its
notebooks downloaded: search shows results with text and logs no error, every demo frame is as
tall as its content and follows the book's colour mode, and a downloaded notebook carries the
glued values instead of MyST roles that plain Jupyter cannot read.

Opened from disk, the browser counts each file as an origin of its own: a page may fetch
nothing and may not reach into its frames, nor a frame into its page.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, ROOT, THEMES, Session, browser, chapters, pages, set_theme, wait_for_math,
)

pytestmark = BROWSER_MARKS


class DiskSession(Session):
    """A checked Session whose base is the build folder's ``file://`` URL: a console error, an
    uncaught exception or a request off the machine is recorded as in ``Session``."""

    def open(self, path: str, wait: str = "load") -> object:
        page = self.context.new_page()
        page.on("console", lambda m: self.errors.append(f"{path}: console.{m.type}: {m.text}")
                if m.type == "error" else None)
        page.on("pageerror", lambda e: self.errors.append(f"{path}: uncaught {e}"))
        page.goto(urljoin(self.base, path), wait_until=wait)
        wait_for_math(page)
        return page


@pytest.fixture(scope="module")
def on_disk(browser: object, built_book: Path) -> Iterator[DiskSession]:
    s = DiskSession(browser, built_book.resolve().as_uri() + "/")
    yield s
    s.close()


def search_index(built_book: Path) -> dict:
    text = (built_book / "searchindex.js").read_text(encoding="utf-8")
    return json.loads(text[text.index("(") + 1:text.rindex(")")])


def search_with_summaries(session: Session, built_book: Path) -> None:
    """Search for a word of a chapter's title: the chapter is found, every result shows a summary
    with the word in the chapter's, and the console logs no error."""
    index = search_index(built_book)
    chapter = next(i for i, d in enumerate(index["docnames"]) if d.startswith("chapters/"))
    doc, title = index["docnames"][chapter], index["titles"][chapter]
    words = sorted(re.findall(r"[A-Za-z]{5,}", title), key=len, reverse=True)
    assert words, f"no searchable word in the title {title!r}"
    term = words[0].lower()
    session.errors.clear()
    page = session.open(f"search.html?q={term}")
    page.wait_for_selector("#search-results ul.search li", timeout=20000)
    page.wait_for_function("() => /\\d/.test(document.querySelector('#search-results p.search-summary')"
                           "?.textContent || '')", timeout=20000)  # Sphinx's count: the search finished
    try:  # summaries come in as results are shown: each result gets one, or the test fails below
        page.wait_for_function("""() => [...document.querySelectorAll('#search-results ul.search > li')]
            .every(li => (li.querySelector('p.context')?.textContent || '').trim().length > 20)""", timeout=5000)
    except Exception:  # noqa: BLE001 - reported by the assertion with what the page shows
        pass
    items = page.eval_on_selector_all("#search-results ul.search > li", """els => els.map(li => ({
        href: li.querySelector('a').getAttribute('href'),
        text: (li.querySelector('p.context')?.textContent || '').trim()}))""")
    assert any(i["href"].split("#")[0] == doc + ".html" for i in items), f"{term!r} did not find {doc}: {items}"
    bare = [i["href"] for i in items if len(i["text"]) <= 20]
    assert not bare, f"search for {term!r}: {len(bare)} of {len(items)} results without text: {bare[:5]}"
    found = [i for i in items if i["href"].split("#")[0] == doc + ".html"]
    assert any(term[:5] in i["text"].lower() for i in found), f"{doc}'s summary does not show {term!r}: {found}"
    page.close()
    assert not session.errors, f"{len(session.errors)} console errors:\n" + "\n".join(session.errors[:10])


def test_search_opened_from_disk_shows_results_with_text(on_disk: DiskSession, built_book: Path) -> None:
    search_with_summaries(on_disk, built_book)


def test_search_served_shows_results_with_text(browser: object, served_book: str, built_book: Path) -> None:
    s = Session(browser, served_book)
    try:
        search_with_summaries(s, built_book)
        s.assert_clean()
    finally:
        s.close()


def demo_pages(built_book: Path, chapters: list[str]) -> list[str]:
    found = [c for c in chapters if 'class="gpubook-demo"' in (built_book / c).read_text(encoding="utf-8")]
    if not found:
        pytest.skip("no chapter embeds a demo")
    return found


FRAME_HEIGHT = "el => el.clientHeight"
CONTENT_HEIGHT = "() => Math.ceil(document.documentElement.getBoundingClientRect().height)"


def frames_fit_and_follow_the_theme(session: Session, paths: list[str]) -> None:
    """At 1280 px, every demo frame is exactly as tall as its document (nothing clipped, no gap),
    and shows the colour mode the reader picks with the book's switcher."""
    session.errors.clear()
    wrong, stale = [], []
    for path in paths:
        page = session.open(path)
        frames = page.locator(".gpubook-demo iframe")
        for i in range(frames.count()):
            el = frames.nth(i)
            el.scroll_into_view_if_needed()
            inner = el.element_handle().content_frame()
            inner.wait_for_load_state("load")
            name = f"{path} frame {i} ({el.get_attribute('src')})"
            fitted = False
            for _ in range(40):  # the frame reports its height once laid out
                shown, content = el.evaluate(FRAME_HEIGHT), inner.evaluate(CONTENT_HEIGHT)
                if abs(shown - content) <= 1:
                    fitted = True
                    break
                page.wait_for_timeout(50)
            if not fitted:
                wrong.append(f"{name}: frame {shown}px, its document {content}px")
            for theme in THEMES:
                set_theme(page, theme)
                try:
                    inner.wait_for_function("t => document.documentElement.dataset.theme === t", arg=theme,
                                            timeout=2000)
                except Exception:  # noqa: BLE001 - collected and reported below
                    stale.append(f"{name}: shows {inner.evaluate('() => document.documentElement.dataset.theme')}"
                                 f" after switching the book to {theme}")
        page.close()
    assert not wrong, "demo frames not sized to their content from disk:\n" + "\n".join(wrong)
    assert not stale, "demo frames that do not follow the book's theme from disk:\n" + "\n".join(stale)
    assert not session.errors, "console errors:\n" + "\n".join(session.errors[:10])


def test_demo_frames_opened_from_disk_fit_their_content_and_follow_the_theme(
        on_disk: DiskSession, built_book: Path, chapters: list[str]) -> None:
    frames_fit_and_follow_the_theme(on_disk, demo_pages(built_book, chapters))


def test_demo_frames_served_fit_their_content_and_follow_the_theme(
        browser: object, served_book: str, built_book: Path, chapters: list[str]) -> None:
    s = Session(browser, served_book)
    try:
        frames_fit_and_follow_the_theme(s, demo_pages(built_book, chapters))
        s.assert_clean()
    finally:
        s.close()


def test_downloaded_notebooks_carry_the_glued_values(on_disk: DiskSession, chapters: list[str]) -> None:
    """The notebook each chapter's download link points at, on disk, has no MyST glue left: its
    code cells are the paired notebook's, its Markdown the same around the values. (Opened from
    disk, Chromium shows the file the link names instead of saving it; served, the link saves it:
    tests/test_browser.py::test_each_chapter_downloads_its_notebook.)"""
    import nbformat

    glued, linked = [], 0
    for path in chapters:
        page = on_disk.open(path)
        link = page.locator("a.gpubook-download")
        href = link.evaluate("a => a.href") if link.count() == 1 else None
        page.close()
        if href is None:
            continue
        local = Path(unquote(urlparse(href).path))
        assert local.suffix == ".ipynb" and local.is_file(), f"{path}: the download link names {href}"
        linked += 1
        nb = nbformat.read(str(local), as_version=4)
        nbformat.validate(nb)
        paired = nbformat.read(str(ROOT / "notebooks" / local.name), as_version=4)
        assert [c.cell_type for c in nb.cells] == [c.cell_type for c in paired.cells], path
        assert [c.source for c in nb.cells if c.cell_type == "code"] == \
            [c.source for c in paired.cells if c.cell_type == "code"], f"{path}: code cells differ"
        left = [c.source for c in nb.cells if c.cell_type == "markdown" and "{glue" in c.source]
        if left:
            glued.append(f"{path}: {len(left)} Markdown cells with glue, e.g. "
                         f"{re.search(r'.{0,40}[{]glue.{0,40}', left[0]).group(0)!r}")
    assert linked, "no chapter links its notebook"
    assert not glued, "downloaded notebooks that plain Jupyter shows with MyST glue:\n" + "\n".join(glued)
