"""Each section of a chapter is something a reader finishes in one sitting.

A section is the article's content from one heading (h1, h2 or h3) to the next heading of
those levels, or to the article's end; its height is measured in the browser at a 1280 x 800
viewport, as the reader meets the page: dropdowns and folded cells closed, so what they hold
counts only when it is opened. A section taller than ``MAX_SCREENS`` screens (a screen is the
viewport's 800 px) fails the test, named by its chapter and heading.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, Session, browser, chapters, pages,
)

pytestmark = BROWSER_MARKS
WIDTH, SCREEN = 1280, 800
MAX_SCREENS = 15

# Heights of the page's sections: from each heading's top to the next heading's top (or the
# article's bottom), with the heading's text. Headings inside a closed <details> are not laid
# out (offsetParent is null) and are skipped with the rest of what is folded.
SECTIONS_JS = """() => {
  const article = document.querySelector('article') || document.querySelector('main');
  const top = (e) => e.getBoundingClientRect().top + window.scrollY;
  const heads = [...article.querySelectorAll('h1, h2, h3')].filter(h => h.offsetParent !== null);
  const end = top(article) + article.getBoundingClientRect().height;
  return heads.map((h, i) => ({
    level: h.tagName.toLowerCase(),
    title: h.textContent.replace(/[#¶\\s]+$/, '').replace(/\\s+/g, ' ').trim(),
    height: (i + 1 < heads.length ? top(heads[i + 1]) : end) - top(h),
  }));
}"""


@pytest.fixture(scope="module")
def reader(browser: object, served_book: str) -> Iterator[Session]:
    """A checked session at the reader's viewport, 1280 x 800."""
    s = Session(browser, served_book, width=WIDTH, height=SCREEN)
    try:
        yield s
        s.assert_clean()
    finally:
        s.close()


def sections(session: Session, path: str) -> list[dict]:
    """The sections of the page at `path`, each with its heading's level, title and height."""
    page = session.open(path)
    try:
        page.evaluate("() => document.fonts.ready.then(() => true)")
        page.evaluate("() => Promise.all([...document.images].filter(i => !i.complete).map("
                      "i => new Promise(r => { i.onload = i.onerror = r; })))")
        return page.evaluate(SECTIONS_JS)
    finally:
        page.close()


def test_each_section_fits_fifteen_screens(reader: Session, chapters: list[str]) -> None:
    """No section of any chapter runs longer than 15 screens at 1280 x 800."""
    long, measured = [], 0
    for path in chapters:
        found = sections(reader, path)
        assert found, f"{path}: no heading found: the measurement would see nothing"
        measured += len(found)
        for s in found:
            screens = s["height"] / SCREEN
            if screens > MAX_SCREENS:
                long.append(f"{path}: {s['level']} '{s['title']}': {screens:.1f} screens")
    assert measured, "no section was measured"
    assert not long, (f"sections longer than {MAX_SCREENS} screens at {WIDTH} x {SCREEN} "
                      "(split them, or fold secondary material into dropdowns):\n" + "\n".join(long))
