"""What a reader finds around the text: an index that points into the chapters, reachable from
every page, and sources that open from the page they are cited on."""

from __future__ import annotations

import re
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import urlparse

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, LOCAL_HOSTS, SharedPages, browser, chapters, pages, session, shared_pages,
)

pytestmark = BROWSER_MARKS


class _Links(HTMLParser):
    """Every <a href> of a page, with the id of the section it stands in."""

    def __init__(self) -> None:
        super().__init__()
        self.sections: list[str] = []
        self.links: list[tuple[str, str]] = []   # (section id, href)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "section":
            self.sections.append(a.get("id") or "")
        elif tag == "a" and a.get("href"):
            self.links.append((self.sections[-1] if self.sections else "", a["href"]))

    def handle_endtag(self, tag: str) -> None:
        if tag == "section" and self.sections:
            self.sections.pop()


def links_of(path: Path) -> list[tuple[str, str]]:
    p = _Links()
    p.feed(path.read_text(encoding="utf-8"))
    return p.links


def external(href: str) -> bool:
    return urlparse(href).scheme in ("http", "https") and urlparse(href).hostname not in LOCAL_HOSTS


def index_entries(built_book: Path) -> list[tuple[str, str]]:
    """(entry, href) of every link in the general index's tables."""
    html = (built_book / "genindex.html").read_text(encoding="utf-8")
    tables = "".join(re.findall(r'<table[^>]*class="indextable genindextable".*?</table>', html, re.S))
    return [(re.sub(r"<[^>]+>", "", text).strip(), href)
            for href, text in re.findall(r'<a href="([^"]+)"[^>]*>(.*?)</a>', tables, re.S)]


def glossary_terms(built_book: Path) -> list[str]:
    html = (built_book / "glossary.html").read_text(encoding="utf-8")
    return re.findall(r'<dt id="term-([^"]+)"', html)


# =================================================================================================
def test_the_index_lists_every_glossary_term(built_book: Path) -> None:
    hrefs = {href for _, href in index_entries(built_book)}
    terms = glossary_terms(built_book)
    assert len(terms) >= 40
    missing = [t for t in terms if f"glossary.html#term-{t}" not in hrefs]
    assert not missing, f"glossary terms absent from the index: {missing}"


def test_the_index_points_into_the_chapters_where_they_teach(built_book: Path, chapters: list[str]) -> None:
    """Besides the glossary, the index leads into the chapters: at least ten entries, into at
    least three chapters (a preview of a few chapters included), each to an anchor of its page."""
    into = [(entry, href) for entry, href in index_entries(built_book) if href.startswith("chapters/")]
    pages_hit = {href.split("#")[0] for _, href in into}
    assert len(into) >= 10 and len(pages_hit) >= min(3, len(chapters)), (len(into), sorted(pages_hit))
    for entry, href in into:
        page, _, anchor = href.partition("#")
        assert anchor and f'id="{anchor}"' in (built_book / page).read_text(encoding="utf-8"), (entry, href)


def test_every_page_reaches_the_index_from_its_sidebar(shared_pages: SharedPages, chapters: list[str]) -> None:
    for path in ["index.html", chapters[0], "glossary.html"]:
        page = shared_pages.page(path)
        nav = page.locator("nav.bd-docs-nav a[href$='genindex.html']")
        assert nav.count() == 1, f"{path}: no link to the index in the sidebar"
        assert nav.first.is_visible(), f"{path}: the index link is hidden"
    page = shared_pages.session.open(chapters[0])   # a page of its own: the click leaves it
    page.locator("nav.bd-docs-nav a[href$='genindex.html']").first.click()
    page.wait_for_load_state()
    assert page.url.endswith("genindex.html") and page.locator("table.genindextable a").count() >= 40
    page.close()
    shared_pages.assert_clean()


def test_further_reading_opens_its_sources(built_book: Path, chapters: list[str]) -> None:
    """Every chapter's Further reading links at least one source, as a plain https link that
    leaves the book (never fetched by a page, so the book still reads offline)."""
    checked = 0
    for path in chapters:
        links = links_of(built_book / path)
        if not any(section == "further-reading" for section, _ in links):
            continue
        out = [href for section, href in links if section == "further-reading" and external(href)]
        assert out, f"{path}: Further reading links no source"
        assert all(href.startswith("https://") for href in out), out
        checked += 1
    assert checked >= 1


def test_the_hardware_table_prints_its_sources_as_links(built_book: Path) -> None:
    page = built_book / "chapters" / "02-roofline.html"
    if not page.exists():
        import pytest
        pytest.skip("chapter 2 is not in this build")
    hrefs = [href for _, href in links_of(page) if external(href)]
    assert any("github.com/stas00/ml-engineering" in h for h in hrefs), hrefs
    assert any("docs.nvidia.com/cuda/parallel-thread-execution" in h for h in hrefs), hrefs


def test_an_external_link_is_a_link_not_a_request(shared_pages: SharedPages, chapters: list[str],
                                                   built_book: Path) -> None:
    """A chapter with outbound links loads with no request leaving 127.0.0.1 (they are links,
    not resources), and each is an anchor a reader can follow: visible and absolute."""
    linked = [p for p in chapters if any(external(h) for _, h in links_of(built_book / p))]
    assert linked, "no chapter links a source"
    page = shared_pages.page(linked[0])
    hrefs = page.eval_on_selector_all("article a.reference.external", "els => els.map(e => e.href)")
    assert hrefs and all(urlparse(h).scheme == "https" for h in hrefs), hrefs
    shared_pages.assert_clean()
