"""Appendix A read as a reference, in Chromium: its outline lists every chapter, each kernel's row
links to the cell of its chapter that builds it and that cell links back, its tables fit the text
column, and its run log is folded."""

from __future__ import annotations

import re
from pathlib import Path
from urllib.parse import urlparse

import pytest

from browser_support import BROWSER_MARKS, Session, browser  # noqa: F401 - fixtures are used by name

pytestmark = BROWSER_MARKS
PAGE = "chapters/A-verification-matrix.html"


@pytest.fixture(scope="module")
def rows() -> list[dict]:
    from gpubook import matrix

    found = matrix.kernel_rows()
    if not found:
        pytest.skip("no kernel manifest")
    return found


def _open(browser: object, served_book: str, built_book: Path, width: int = 1280) -> tuple[Session, object]:
    if not (built_book / PAGE).exists():
        pytest.skip("the book has no verification appendix")
    s = Session(browser, served_book, width=width, height=900)
    return s, s.open(PAGE)


def test_the_outline_lists_every_chapter(browser: object, served_book: str, built_book: Path, rows: list[dict]) -> None:
    from gpubook import appendix

    s, page = _open(browser, served_book, built_book)
    try:
        outline = page.evaluate("() => [...document.querySelectorAll('.bd-sidebar-secondary nav a')]"
                                ".map(a => a.getAttribute('href'))")
        missing = [c for c in dict.fromkeys(r["chapter"] for r in rows) if f"#{appendix.section_id(c)}" not in outline]
        assert not missing, f"the page's outline ({len(outline)} entries) lists no section for {missing}"
        # the summary on top links each chapter to its section
        summary = page.evaluate("() => [...document.querySelectorAll('table.gpubook-matrix-summary td:first-child a')]"
                                ".map(a => a.getAttribute('href'))")
        assert summary == [f"#{appendix.section_id(c)}" for c in dict.fromkeys(r["chapter"] for r in rows)]
        s.assert_clean()
    finally:
        s.close()


def test_every_kernel_row_links_to_the_cell_that_builds_it_and_back(browser: object, served_book: str,
                                                                    built_book: Path, rows: list[dict]) -> None:
    from gpubook import appendix, matrix

    s, page = _open(browser, served_book, built_book)
    try:
        anchors = page.evaluate("""() => [...document.querySelectorAll('article table .gpubook-kernel')]
            .map(e => ({id: e.id, href: e.href || null, inRow: !!e.closest('tr')}))""")
        assert len(anchors) == matrix.counts(rows)["kernels"], \
            f"{len(anchors)} kernel anchors for {matrix.counts(rows)['kernels']} kernels"
        assert all(a["inRow"] for a in anchors)
        expected = {kid: cell for kid, cell in appendix.anchors(rows).values()}
        assert {a["id"] for a in anchors} == set(expected)
        linked = [a for a in anchors if a["href"]]
        # a kernel whose cell the manifest names is a link, to a page of the build
        for a in anchors:
            if expected[a["id"]] is not None:
                assert a["href"], f"{a['id']}: the manifest names its cell, yet its row links nowhere"
                page_file = built_book / urlparse(a["href"]).path.lstrip("/")
                assert page_file.exists(), f"{a['id']} links to {a['href']}, which the build lacks"
        assert linked, "no kernel row links to a cell"
        by_page: dict[str, list[dict]] = {}
        for a in linked:
            url = urlparse(a["href"])
            assert url.fragment == a["id"], f"{a['id']} links to #{url.fragment}"
            by_page.setdefault(url.path, []).append(a)
        for path, links in by_page.items():
            chapter = s.open(path.lstrip("/"))
            for a in links:
                cell = chapter.evaluate("""(id) => { const e = document.getElementById(id);
                    const cell = e && e.closest('div.cell');
                    return cell && {back: [...cell.querySelectorAll('.gpubook-appendix-link a')].map(x => x.href)}; }""",
                                        a["id"])
                assert cell is not None, f"{path}#{a['id']} is no cell of the chapter"
                assert any(b.endswith(f"/{PAGE}#{a['id']}") for b in cell["back"]), \
                    f"the cell at {path}#{a['id']} does not link back to its row: {cell['back']}"
            chapter.close()
        s.assert_clean()
    finally:
        s.close()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_tables_fit_the_column(browser: object, served_book: str, built_book: Path, rows: list[dict],
                                   width: int) -> None:
    """No table of the appendix scrolls sideways inside its box, and every cell lies inside the
    viewport: at 390 px every number is in view."""
    s, page = _open(browser, served_book, built_book, width)
    try:
        tables = page.evaluate("""() => [...document.querySelectorAll('article table')].map(t => {
            const box = t.closest('.pst-scrollable-table-container') || t.parentElement;
            const cells = [...t.querySelectorAll('td')].map(td => td.getBoundingClientRect());
            return {scroll: box.scrollWidth - box.clientWidth, outside: cells.filter(r => r.width > 0
                    && (r.left < -1 || r.right > window.innerWidth + 1)).length,
                    text: (t.querySelector('td') || t).innerText.slice(0, 40)}; })""")
        assert tables
        wide = [t for t in tables if t["scroll"] > 1 or t["outside"]]
        assert not wide, f"{len(wide)} of {len(tables)} tables scroll sideways at {width} px: {wide[:3]}"
        s.assert_clean()
    finally:
        s.close()


def test_the_run_log_is_folded(browser: object, served_book: str, built_book: Path, rows: list[dict]) -> None:
    from gpubook import results

    s, page = _open(browser, served_book, built_book)
    try:
        log = page.evaluate("""() => [...document.querySelectorAll('article details')]
            .filter(d => d.querySelector('summary').innerText.startsWith('Run log'))
            .map(d => ({open: d.open, lines: d.querySelectorAll('li').length}))""")
        n = len(results.load_runs()) + len(results.load_runs(simulated=True))
        assert log == [{"open": False, "lines": n}], f"the run log: {log}"
        text = page.evaluate("() => document.querySelector('article').innerText")
        shown = [ln for ln in text.splitlines() if re.match(r"\s*\d{4}-\d\d-\d\d: ", ln)]
        assert not shown, f"{len(shown)} run lines are shown unfolded"
        s.assert_clean()
    finally:
        s.close()
