"""The built book in a real browser: headless Debian Chromium driven by Playwright.

Every page is loaded from a local server with every request routed: a request for anything
but 127.0.0.1 fails the test (the book must read offline). Pages are discovered from the
build, so the tests cover whatever chapters exist. Screenshots (index and the first chapter,
light and dark) and a printed PDF of that chapter are written to <html>/_screenshots/.
Figures are checked for the size their text is shown at and for opening at full size; the
demos share the checks at the end, and each has its own file (tests/test_demo_<name>.py). The
accessibility scan of every page is tests/test_accessibility.py.
"""

from __future__ import annotations

import io
import json
import random
import re
from collections.abc import Iterator
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urljoin, urlparse

import pytest

from browser_support import (  # noqa: F401 - fixtures are used by name
    BROWSER_MARKS, CHROMIUM, LOCAL_HOSTS, ROOT, THEMES, Session, SharedPages, _luminance, browser, chapters,
    contrast, css_luminance, image_contrast, opened_demo, pages, restored, session, set_theme, shared_pages, shots,
    sideways_overflow, wait_for_math, wait_for_transitions,
)

pytestmark = BROWSER_MARKS
DEMOS = sorted(p.stem for p in (ROOT / "_static" / "demos").glob("*.html"))


# -- link collection (Python side, from the files) ------------------------------------------------
class _Refs(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.ids: set[str] = set()
        self.refs: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        for key in ("id", "name"):
            if a.get(key) and (key == "id" or tag == "a"):
                self.ids.add(a[key])
        for key in ("href", "src"):
            if a.get(key) and not (tag == "link" and a.get("rel") in ("canonical",)):
                self.refs.append(a[key])


def parse(path: Path) -> _Refs:
    r = _Refs()
    r.feed(path.read_text(encoding="utf-8"))
    return r


# =================================================================================================
def test_every_page_loads_offline_without_errors(shared_pages: SharedPages, pages: list[str]) -> None:
    """HTTP 200, no console errors, no failed request, and no request to any other host."""
    for path in pages:
        page = shared_pages.page(path)
        assert page.title(), f"{path} has no title"
    shared_pages.assert_clean()


def test_math_renders_from_the_vendored_mathjax(shared_pages: SharedPages, pages: list[str], built_book: Path) -> None:
    with_math = [p for p in pages if 'class="math' in (built_book / p).read_text(encoding="utf-8")]
    if not with_math:
        pytest.skip("no page of the book has math yet")
    for path in with_math:
        page = shared_pages.page(path)
        src = page.evaluate("() => [...document.scripts].map(s => s.src).filter(s => /mathjax/i.test(s))")
        assert src and all(urlparse(s).hostname in LOCAL_HOSTS for s in src), src
        n_math = page.locator(".math").count()
        n_typeset = page.locator("mjx-container").count()
        assert n_typeset >= n_math > 0, f"{path}: {n_typeset} typeset of {n_math} formulas"
        # the TeX fonts arrived from the build, not a CDN
        fonts = page.evaluate("() => [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family)")
        assert any("MJX" in f for f in fonts), f"{path}: MathJax fonts not loaded: {fonts}"
    shared_pages.assert_clean()


def test_internal_links_and_anchors_resolve(built_book: Path, pages: list[str]) -> None:
    """Every local href/src of every page names a file of the build, and every #anchor an id there."""
    parsed: dict[Path, _Refs] = {}

    def refs_of(p: Path) -> _Refs:
        if p not in parsed:
            parsed[p] = parse(p)
        return parsed[p]

    broken = []
    checked = 0
    for path in pages:
        src = built_book / path
        for ref in refs_of(src).refs:
            if ref.startswith(("mailto:", "javascript:", "data:", "blob:")):
                continue
            parts = urlparse(ref)
            if parts.scheme or parts.netloc:
                continue  # external links are allowed; nothing is fetched from them
            target_url, frag = parts.path, parts.fragment
            target = (src.parent / unquote(target_url)).resolve() if target_url else src
            if target.is_dir():
                target = target / "index.html"
            checked += 1
            if not target.exists():
                broken.append(f"{path}: {ref} (no file {target})")
            elif frag and target.suffix == ".html" and unquote(frag) not in refs_of(target).ids:
                broken.append(f"{path}: {ref} (no id '{frag}' in {target.relative_to(built_book)})")
    assert checked > 0
    assert not broken, "broken internal links:\n" + "\n".join(broken)


def test_theme_switcher_and_figures_in_both_themes(shared_pages: SharedPages, chapters: list[str], shots: Path) -> None:
    """The switcher flips light/dark; text and every figure keep their contrast in both."""
    for path in ["index.html", chapters[0]]:
        page = shared_pages.page(path)
        name = "index" if path == "index.html" else Path(path).stem
        with restored(page):
            for theme in THEMES:
                set_theme(page, theme)
                page.screenshot(path=str(shots / f"{name}-{theme}.png"), full_page=True)
                bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
                dark_bg = css_luminance(bg) < 0.2
                assert dark_bg == (theme == "dark"), f"{path}: {theme} theme has background {bg}"
    # every figure of every chapter: cell images, figures, demos
    for path in chapters:
        page = shared_pages.page(path)
        with restored(page):
            page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
            figures = page.locator(".cell_output img, figure img, figure svg, .gpubook-demo iframe")
            for theme in THEMES:
                set_theme(page, theme)
                for i in range(figures.count()):
                    fig = figures.nth(i)
                    if not fig.is_visible():
                        continue  # e.g. an output the chapter hides
                    fig.scroll_into_view_if_needed()
                    settle_figure(fig, theme)
                    box = fig.bounding_box()
                    if not box or box["width"] < 8 or box["height"] < 8:
                        continue
                    bg, ink, ratio = image_contrast(fig.screenshot())
                    assert ratio >= 3.0, (f"{path}: figure {i} in the {theme} theme: background luminance "
                                          f"{bg:.2f}, ink {ink:.2f}, contrast {ratio:.1f} < 3")
    shared_pages.assert_clean()


def settle_figure(fig: object, theme: str) -> None:
    """Wait until a figure scrolled into view shows what a reader sees: an image fully decoded,
    a demo's frame in `theme` with its colour transitions finished."""
    tag = fig.evaluate("e => e.tagName.toLowerCase()")
    if tag == "img":
        fig.evaluate("i => i.complete && i.naturalWidth ? true : i.decode().then(() => true)")
    elif tag == "iframe":
        inner = fig.element_handle().content_frame()
        inner.wait_for_function("t => document.documentElement.dataset.theme === t", arg=theme, timeout=2000)
        wait_for_transitions(inner)


def test_search_finds_a_term_from_a_chapter(shared_pages: SharedPages, chapters: list[str], built_book: Path) -> None:
    chapter = chapters[0]
    title = parse_title(built_book / chapter)
    words = sorted((w for w in re.findall(r"[A-Za-z]{5,}", title)), key=len, reverse=True)
    assert words, f"no searchable word in the title {title!r}"
    term = words[0].lower()
    page = shared_pages.session.open(f"search.html?q={term}")
    page.wait_for_selector("#search-results ul.search li", timeout=20000)
    hits = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    assert any(chapter in h for h in hits), f"searching {term!r} did not find {chapter}: {hits}"
    page.close()
    shared_pages.assert_clean()


def parse_title(path: Path) -> str:
    m = re.search(r"<h1[^>]*>(.*?)</h1>", path.read_text(encoding="utf-8"), re.S)
    assert m, f"{path} has no h1"
    return re.sub(r"<[^>]+>", "", m.group(1)).replace("#", "").strip()


def test_each_chapter_downloads_its_notebook(shared_pages: SharedPages, chapters: list[str], tmp_path: Path) -> None:
    """The download link yields the chapter's paired notebook, valid nbformat: the same code cells
    as notebooks/, the same Markdown except that each glue role or directive is the value the
    book shows (no ``{glue`` left for plain Jupyter to show as written)."""
    import nbformat

    for path in chapters:
        page = shared_pages.page(path)
        link = page.locator("a.gpubook-download")
        assert link.count() == 1, f"{path}: no notebook download link"
        with page.expect_download() as info:
            link.click()
        download = info.value
        local = tmp_path / download.suggested_filename
        download.save_as(local)
        assert local.suffix == ".ipynb", download.suggested_filename
        nb = nbformat.read(str(local), as_version=4)
        nbformat.validate(nb)
        paired = nbformat.read(str(ROOT / "notebooks" / local.name), as_version=4)
        assert [c.cell_type for c in nb.cells] == [c.cell_type for c in paired.cells], f"{path}: not its paired notebook"
        for got, want in zip(nb.cells, paired.cells):
            if want.cell_type == "markdown":
                assert "{glue" not in got.source, f"{path}: glue left in the download: {got.source[:200]!r}"
                assert filled_around_glue(want.source, got.source), \
                    f"{path}: Markdown differs beyond its glue:\n{want.source[:300]}\n--- downloaded ---\n{got.source[:300]}"
            else:
                assert got.source == want.source, f"{path}: not its paired notebook"
        assert Path(path).stem == local.stem
    shared_pages.assert_clean()


def filled_around_glue(paired: str, downloaded: str) -> bool:
    """Whether `downloaded` is `paired` with its glue directives and roles replaced: every piece of
    `paired` between them is found in `downloaded`, in order, and nothing else differs."""
    from gpubook.book.notebook_download import DIRECTIVE, ROLE

    pieces = re.split(ROLE.pattern, DIRECTIVE.sub("\0", paired).replace("\0", "{glue}`x`"))[::3]
    pattern = "(?s)" + "(.*?)".join(re.escape(p) for p in pieces)  # a glued value may be empty
    return re.fullmatch(pattern, downloaded) is not None


def test_runs_on_badge_matches_the_kernels(shared_pages: SharedPages, chapters: list[str]) -> None:
    """The badge under each chapter's title counts the kernels appendix A lists for the chapter,
    as many as the opening box says, names every group of them by where they run, and agrees
    with the compile reports shown on the page."""
    from gpubook.book.sphinxext import PageTiers, chapter_kernels

    for path in chapters:
        page = shared_pages.page(path)
        badge = page.locator("h1 + .gpubook-pagebar .gpubook-badge, h1 ~ .gpubook-pagebar .gpubook-badge")
        assert badge.count() == 1, f"{path}: no Runs-on badge under the title"
        tier, title = badge.get_attribute("data-tier"), badge.get_attribute("title")
        text = page.locator("article").inner_text()
        expected = PageTiers()
        expected.read(text)                        # the reports shown, and whether a check printed
        archs = chapter_kernels(Path(path).stem)
        if archs:                                  # the kernels appendix A lists for the chapter
            expected.use_rows(archs)
        assert tier == expected.tier()[1], f"{path}: badge says {tier!r}, expected {expected.tier()[1]!r}"
        box = re.search(r"Of its (\d+) kernels?\b", text)
        if box and tier != "compile-only":
            n = int(box.group(1))
            said = re.search(r"(?:Of the page's|All) (\d+) kernels|(The one kernel)|(Both kernels)", title)
            counted = int(said.group(1)) if said and said.group(1) else 1 if said and said.group(2) else 2 if said else None
            assert counted == n, f"{path}: the opening box counts {n} kernels, the badge says {title!r}"
        shown = dict(re.findall(r"([\w.\-]+): compiled for sm_100a( \(\+sm_90a\)| only)", text))
        hopper = re.findall(r"([\w.\-]+): compiled for sm_90a only", text)
        if tier not in ("compile-only", "any machine"):   # every kind of kernel shown is named
            if hopper:
                assert "sm_90a" in tier, (path, tier)
            if any(v.strip() == "only" for v in shown.values()):
                assert "B200" in tier or "sm_100a" in tier, (path, tier)
            if any(v.strip() == "(+sm_90a)" for v in shown.values()):
                assert "sm_90+" in tier, (path, tier)
        assert badge.is_visible()
    shared_pages.assert_clean()


def test_code_cells_have_a_working_copy_button(browser: object, served_book: str, chapters: list[str]) -> None:
    s = Session(browser, served_book)
    s.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=served_book.rstrip("/"))
    try:
        page = s.open(chapters[0])
        blocks = page.locator("div.cell_input div.highlight pre, div.highlight-python pre, div.highlight-ipython3 pre")
        assert blocks.count() > 0, f"{chapters[0]} shows no code"
        buttons = page.locator("button.copybtn")
        assert buttons.count() >= blocks.count()
        blocks.first.hover()
        buttons.first.click()
        copied = page.evaluate("() => navigator.clipboard.readText()")
        expected = blocks.first.inner_text()
        assert copied.strip() and copied.strip() in expected.strip(), copied
        page.close()
        s.assert_clean()
    finally:
        s.close()


def test_answers_are_collapsed_until_opened(shared_pages: SharedPages, chapters: list[str]) -> None:
    # the shared pages are as loaded: every test that opens a dropdown closes it again (restored)
    seen = 0
    for path in chapters:
        page = shared_pages.page(path)
        with restored(page):
            drops = page.locator("details.sd-dropdown")
            for i in range(drops.count()):
                d = drops.nth(i)
                assert d.get_attribute("open") is None, f"{path}: dropdown {i} is open on load"
                body = d.locator(".sd-summary-content")
                assert not body.is_visible(), f"{path}: the answer in dropdown {i} shows before it is opened"
                d.locator("summary").click()
                assert body.is_visible()
                seen += 1
    shared_pages.assert_clean()
    if not seen:
        pytest.skip("no chapter has exercise dropdowns yet")


def test_print_stylesheet_keeps_code_and_figures(shared_pages: SharedPages, chapters: list[str], shots: Path) -> None:
    with restored(shared_pages.page(chapters[0])) as page:
        check_print_stylesheet(page, chapters[0], shots)
    shared_pages.assert_clean()


def check_print_stylesheet(page: object, chapter: str, shots: Path) -> None:
    page.emulate_media(media="print")
    hidden = page.evaluate("""() => ['.bd-header', '.bd-sidebar-primary', '.bd-sidebar-secondary']
        .map(s => document.querySelector(s)).filter(Boolean)
        .map(e => getComputedStyle(e).display)""")
    assert hidden and all(d == "none" for d in hidden), f"navigation still printed: {hidden}"
    article_w = page.evaluate("() => document.querySelector('article').getBoundingClientRect().width")
    cut = page.evaluate("""() => [...document.querySelectorAll('article pre, article img, article svg, .gpubook-report code')]
        .filter(e => e.scrollWidth > e.clientWidth + 1 && getComputedStyle(e).overflowX !== 'visible')
        .map(e => e.tagName + ': ' + e.textContent.slice(0, 60))""")
    assert not cut, f"printed code or figures are clipped: {cut}"
    wide = page.evaluate(f"""() => [...document.querySelectorAll('article pre, article img')]
        .filter(e => e.getBoundingClientRect().right > document.querySelector('article').getBoundingClientRect().left + {article_w} + 1)
        .map(e => e.tagName)""")
    assert not wide, f"printed elements run past the page: {wide}"
    pdf = page.pdf(path=str(shots / f"{Path(chapter).stem}-print.pdf"), format="A4")
    assert pdf[:4] == b"%PDF" and len(pdf) > 5000


# -- accessibility --------------------------------------------------------------------------------
def test_images_have_alt_text(built_book: Path, pages: list[str]) -> None:
    missing = []
    for path in pages:
        for m in re.finditer(r"<img\b[^>]*>", (built_book / path).read_text(encoding="utf-8")):
            alt = re.search(r'\balt="([^"]*)"', m.group(0))
            text = alt.group(1).strip() if alt else ""
            # myst-nb falls back to the image's file name, which tells a reader nothing
            if not text or re.search(r"\.(png|jpe?g|svg|gif|webp)$", text, re.I) or "_images/" in text:
                missing.append(f"{path}: {m.group(0)[:160]}")
    assert not missing, "images without alt text (or with a file name for it):\n" + "\n".join(missing)


# -- figures: readable at page width, full size on a click -------------------------------------------
FIGURES = "article .cell_output img, article figure img"
MIN_RENDERED_FONT_PX = 9.0


def _figures_on(page: object) -> list[dict]:
    """Every figure image a reader can see on the page, with its natural and rendered width."""
    return page.evaluate(f"""() => [...document.querySelectorAll({FIGURES!r})]
        .filter(i => i.offsetParent !== null && i.getBoundingClientRect().width > 8)
        .map(i => ({{src: i.getAttribute('src'), alt: i.alt.slice(0, 60), natural: i.naturalWidth,
                    rendered: i.getBoundingClientRect().width}}))""")


def test_figures_are_readable_at_page_width(shared_pages: SharedPages, chapters: list[str], built_book: Path) -> None:
    """At 1280 px every figure's smallest text is shown at 9 px or more.

    The figure records its smallest font, in pixels of the image, in the PNG itself
    (`gpubook.plots.png`); the page scales the image by rendered / natural width.
    """
    from PIL import Image

    seen, tiny, unmarked = 0, [], []
    for path in chapters:
        page = shared_pages.page(path)
        with restored(page):
            page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
            figs = _figures_on(page)
        for fig in figs:
            file = (built_book / path).parent / unquote(fig["src"])
            with Image.open(file) as im:
                meta, natural = dict(im.text), im.size[0]
            assert natural == fig["natural"], f"{path}: {fig['src']} is {natural} px wide, the page says {fig['natural']}"
            seen += 1
            if "gpubook:min-font-px" not in meta:
                unmarked.append(f"{path}: {fig['alt']!r} (drawn without gpubook.plots.png)")
                continue
            shown = float(meta["gpubook:min-font-px"]) * fig["rendered"] / natural
            if shown < MIN_RENDERED_FONT_PX:
                tiny.append(f"{path}: {fig['alt']!r}: smallest text {shown:.1f} px "
                            f"({meta['gpubook:min-font-px']} px in a {natural} px image shown {fig['rendered']:.0f} px wide)")
    assert seen, "no chapter shows a figure"
    assert not unmarked, "figures that do not record their font size:\n" + "\n".join(unmarked)
    assert not tiny, f"figures whose text is smaller than {MIN_RENDERED_FONT_PX} px at 1280 px:\n" + "\n".join(tiny)
    shared_pages.assert_clean()


@pytest.mark.parametrize("width", [1280, 390])
def test_figures_open_at_full_size(browser: object, served_book: str, chapters: list[str], width: int) -> None:
    """A click (a tap on a phone) opens the figure at its natural size; Escape or the close button
    closes it; without the script the figure is a link to the image itself."""
    touch = width < 600
    s = Session(browser, served_book, width=width, height=800, touch=touch)
    try:
        opened = 0
        for path in chapters:
            page = s.open(path)
            links = page.locator("a.gpubook-zoom:visible")
            if not links.count():
                page.close()
                continue
            n_figs = len(_figures_on(page))
            assert links.count() == n_figs, f"{path}: {n_figs} figures but {links.count()} enlargeable"
            link = links.first
            img = link.locator("img")
            href = link.get_attribute("href")
            assert href == img.get_attribute("src")
            got = page.request.get(urljoin(page.url, href))
            assert got.ok and got.headers["content-type"] == "image/png"
            link.scroll_into_view_if_needed()
            inline = img.bounding_box()["width"]
            (link.tap if touch else link.click)()
            dialog = page.locator("dialog.gpubook-lightbox")
            dialog.wait_for(state="visible")
            big = dialog.locator("img")
            natural, shown = big.evaluate("i => [i.naturalWidth, i.getBoundingClientRect().width]")
            assert big.get_attribute("src") == img.evaluate("i => i.currentSrc || i.src")
            assert abs(shown - natural) <= 1, f"{path}: full size shows {shown} px of a {natural} px image"
            assert shown > inline, f"{path}: the enlarged figure ({shown} px) is no larger than the page's ({inline} px)"
            assert page.evaluate("() => document.activeElement.closest('dialog') !== null"), "focus stays outside the dialog"
            if touch:
                # a phone pans the full-size image inside the dialog; the page itself stays put
                frame = dialog.locator(".gpubook-lightbox-frame")
                assert frame.evaluate("f => f.scrollWidth > f.clientWidth"), "the full-size figure cannot be panned"
                dialog.locator(".gpubook-lightbox-close").tap()
            else:
                page.keyboard.press("Escape")
            dialog.wait_for(state="hidden")
            assert page.evaluate("() => document.activeElement.classList.contains('gpubook-zoom')"), \
                "focus does not return to the figure"
            opened += 1
            page.close()
        assert opened, "no chapter has a figure to enlarge"
        s.assert_clean()
    finally:
        s.close()


def test_bookkeeping_cells_are_not_shown(shared_pages: SharedPages, chapters: list[str]) -> None:
    """A cell whose only job is to glue numbers into the prose shows no code on the page."""
    from bookkeeping import bookkeeping_cells, chapter_code_cells

    def norm(code: str) -> str:
        return "\n".join(line.rstrip() for line in code.strip().splitlines() if line.strip())

    matched = found = 0
    shown = []
    for path in chapters:
        src = ROOT / "chapters" / (Path(path).stem + ".md")
        if not src.exists():
            continue
        cells = chapter_code_cells(src)
        keep = set(bookkeeping_cells([c for c, _ in cells]))
        found += len(keep)
        page = shared_pages.page(path)
        visible = {norm(t) for t in page.evaluate(
            "() => [...document.querySelectorAll('article .cell_input pre')]"
            ".filter(e => e.offsetParent !== null).map(e => e.innerText)")}
        for i, (code, _) in enumerate(cells):
            if norm(code) in visible:
                if i in keep:
                    shown.append(f"{path}: {code.strip().splitlines()[0][:80]}")
                else:
                    matched += 1
    assert found, "no chapter has a bookkeeping cell: the check would see nothing"
    assert matched, "no visible code cell matched its source: the comparison is broken"
    assert not shown, "bookkeeping (glue-only) cells are visible:\n" + "\n".join(shown)
    shared_pages.assert_clean()


def test_dropdowns_are_readable_in_both_themes(shared_pages: SharedPages, chapters: list[str]) -> None:
    """Every text inside an answer dropdown or a folded cell reaches 4.5:1 against its background."""
    js = """() => {
      const rgb = (s) => (s.match(/[\\d.]+/g) || []).map(Number);
      const lum = (c) => { const f = (v) => { v /= 255; return v <= 0.04045 ? v / 12.92 : ((v + 0.055) / 1.055) ** 2.4; };
                           return 0.2126 * f(c[0]) + 0.7152 * f(c[1]) + 0.0722 * f(c[2]); };
      const bg = (e) => { for (; e; e = e.parentElement) { const c = rgb(getComputedStyle(e).backgroundColor);
                          if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c; } return [255, 255, 255]; };
      const low = [];
      let texts = 0;
      for (const d of document.querySelectorAll('details')) {
        d.open = true;
        for (const e of [d, ...d.querySelectorAll('*')]) {
          if (![...e.childNodes].some(n => n.nodeType === 3 && n.textContent.trim())) continue;
          if (e.closest('svg') || e.offsetParent === null) continue;  // icons' <title>s are not shown
          texts++;
          const a = lum(rgb(getComputedStyle(e).color)), b = lum(bg(e));
          const r = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
          if (r < 4.5) low.push(`${r.toFixed(2)}: <${e.tagName.toLowerCase()} class="${e.className}"> ${e.textContent.trim().slice(0, 40)}`);
        }
      }
      return {texts, low};
    }"""
    checked = 0
    for path in chapters:
        page = shared_pages.page(path)
        if not page.locator("details.sd-dropdown").count():
            continue
        with restored(page):
            for theme in THEMES:
                set_theme(page, theme)
                got = page.evaluate(js)
                assert got["texts"] > 0
                assert not got["low"], f"{path}, {theme}: low-contrast text in dropdowns:\n" + "\n".join(got["low"])
                checked += 1
    assert checked, "no chapter has a dropdown"
    shared_pages.assert_clean()


@pytest.mark.parametrize("width", [1280, 390])
def test_the_verification_appendix_fits_and_links_each_chapter(browser: object, served_book: str,
                                                               built_book: Path, width: int) -> None:
    """Appendix A has a table for each chapter that builds kernels, none of them wider than the
    text column (a table wider than its box scrolls inside it, the page never does), and each
    chapter is a link."""
    from gpubook import matrix

    page_path = "chapters/A-verification-matrix.html"
    if not (built_book / page_path).exists():
        pytest.skip("the book has no verification appendix")
    rows = matrix.kernel_rows()
    s = Session(browser, served_book, width=width, height=900)
    try:
        page = s.open(page_path)
        tables = page.evaluate("""() => [...document.querySelectorAll('article table')].map(t => ({
            cols: t.querySelectorAll('thead th').length,
            summary: t.classList.contains('gpubook-matrix-summary'),
            box: (t.closest('.pst-scrollable-table-container') || t).getBoundingClientRect().width,
            room: t.closest('article').clientWidth,
            font: parseFloat(getComputedStyle(t.querySelector('td') || t).fontSize)}))""")
        page_scroll = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        if not rows:
            assert not tables
        else:
            assert len(tables) >= len({r["chapter"] for r in rows})
            assert page_scroll <= 1, f"the page scrolls sideways by {page_scroll} px at {width} px"
            for t in tables:
                # a chapter's table has five columns; the summary on top, eight of short numbers
                assert t["cols"] <= (8 if t["summary"] else 5), f"{t['cols']} columns"
                assert t["font"] >= 13, f"table text of {t['font']} px"
                assert t["box"] <= t["room"] + 1, f"a table's box is wider than the text column at {width} px: {t}"
            links = page.evaluate("() => [...document.querySelectorAll('article p strong a, article li a')]"
                                  ".map(a => new URL(a.href).pathname)")
            for chapter in {r["chapter"] for r in rows}:
                if (ROOT / "chapters" / f"{chapter}.md").exists():
                    assert any(link.endswith(f"/{chapter}.html") for link in links), f"no link to {chapter}"
        page.close()
        s.assert_clean()
    finally:
        s.close()


# What a reader sees of a page's code and tables: every line of a code block or a cell's output
# inside its box (a long line wraps), and every word, number or identifier of a table cell on
# one line (a break at a space or a hyphen is a line break, anything else splits a token).
_FIT_JS = """() => {
  // A code block whose lines hang and keep names whole (codelines.js) may scroll, but only by a
  // single token (no space, no break between tokens) wider than the room its row has: the
  // block's overflow is no more than that token's.
  const tokenScrolls = pre => {
    if (!pre.classList.contains('gpubook-lines')) return false;
    const box = pre.getBoundingClientRect(), over = pre.scrollWidth - pre.clientWidth;
    const right = box.left + pre.clientLeft + pre.clientWidth - parseFloat(getComputedStyle(pre).paddingRight);
    for (const line of pre.querySelectorAll('.gpubook-line')) {
      const room = right - (line.getBoundingClientRect().left + parseFloat(getComputedStyle(line).paddingLeft));
      const walk = document.createTreeWalker(line, NodeFilter.SHOW_TEXT | NodeFilter.SHOW_ELEMENT);
      let run = null, widest = 0, last = null;
      const close = () => { widest = Math.max(widest, run.getBoundingClientRect().width); run = null; };
      for (let n = walk.nextNode(); n; n = walk.nextNode()) {
        if (n.nodeType === 1) { if (n.tagName === 'WBR' && run) { run.setEndBefore(n); close(); } continue; }
        for (let i = 0; i < n.data.length; i++) {
          if (/\\s/.test(n.data[i])) { if (run) { run.setEnd(n, i); close(); } }
          else if (!run) { run = document.createRange(); run.setStart(n, i); }
        }
        last = n;
      }
      if (run && last) { run.setEnd(last, last.data.length); close(); }
      if (widest > room + 1 && over <= widest - room + 2) return true;
    }
    return false;
  };
  const cut = [], split = [];
  let blocks = 0, words = 0;
  for (const pre of document.querySelectorAll('article pre')) {
    if (pre.offsetParent === null) continue;
    blocks++;
    if (pre.scrollWidth > pre.clientWidth + 1 && !tokenScrolls(pre)) {
      const line = pre.innerText.split('\\n').reduce((a, b) => a.length >= b.length ? a : b, '');
      cut.push(`${pre.scrollWidth - pre.clientWidth} px past the box: ${line.slice(0, 80)}`);
    }
  }
  for (const cell of document.querySelectorAll('article table td, article table th')) {
    if (cell.offsetParent === null) continue;
    const walk = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
    for (let n = walk.nextNode(); n; n = walk.nextNode()) {
      for (const m of n.data.matchAll(/[^\\s\\-\u2010\u2013\u2014]{2,}/g)) {
        const r = document.createRange();
        r.setStart(n, m.index); r.setEnd(n, m.index + m[0].length);
        const lines = new Set([...r.getClientRects()].filter(x => x.width > 0).map(x => Math.round(x.top)));
        words++;
        if (lines.size > 1) split.push(m[0].slice(0, 60));
      }
    }
  }
  // the contents in the side columns: no entry runs out of its column
  for (const a of document.querySelectorAll('.bd-sidebar-secondary nav a, .bd-sidebar-primary nav a')) {
    if (a.offsetParent === null) continue;
    const col = a.closest('.bd-sidebar-secondary, .bd-sidebar-primary').getBoundingClientRect();
    const r = a.getBoundingClientRect();
    if (r.width > 0 && r.right > col.right + 1)
      cut.push(`contents entry past its column: ${a.innerText.slice(0, 80)}`);
  }
  return {blocks, words, cut, split};
}"""


def _fit(page: object, path: str, width: int) -> tuple[int, int, list[str]]:
    got = page.evaluate(_FIT_JS)
    problems = [f"{path} at {width} px: {c}" for c in got["cut"]]
    problems += [f"{path} at {width} px: a table splits '{w}'" for w in got["split"]]
    return got["blocks"], got["words"], problems


def test_code_lines_fit_their_box_and_table_cells_keep_words_whole(shared_pages: SharedPages,
                                                                   chapters: list[str]) -> None:
    """At 1280 px (a laptop) no line of code or output runs past its box, and no table cell splits a word."""
    blocks = words = 0
    problems: list[str] = []
    for path in chapters:
        b, w, p = _fit(shared_pages.page(path), path, 1280)
        blocks, words, problems = blocks + b, words + w, problems + p
    assert blocks > 100 and words > 1000, f"only {blocks} code blocks and {words} table words measured"
    assert not problems, "\n".join(problems[:40])
    shared_pages.assert_clean()


def test_on_a_phone_code_wraps_and_table_cells_keep_words_whole(browser: object, served_book: str,
                                                                chapters: list[str]) -> None:
    """At 390 px the same holds: a wide table scrolls in its own box rather than split a token."""
    s = Session(browser, served_book, width=390, height=844)
    try:
        problems: list[str] = []
        for path in chapters:
            page = s.open(path, wait="load")
            problems += _fit(page, path, 390)[2]
            page.close()
        assert not problems, "\n".join(problems[:40])
        s.assert_clean()
    finally:
        s.close()


def test_build_has_a_favicon_and_no_theme_templates(shared_pages: SharedPages, built_book: Path) -> None:
    """The tab shows the book's icon (no request for a missing /favicon.ico), and the theme's
    template macros are not published as a page."""
    assert not (built_book / "_static" / "webpack-macros.html").exists()
    assert not list(built_book.rglob("webpack-macros.html"))
    page = shared_pages.page("index.html")
    icons = page.evaluate("() => [...document.querySelectorAll('link[rel~=icon]')].map(l => l.href)")
    assert icons, "no favicon link"
    for href in icons:
        got = page.request.get(href)
        assert got.ok and got.headers["content-type"].startswith("image/"), href
    shared_pages.assert_clean()


def test_code_and_demos_are_keyboard_reachable(shared_pages: SharedPages, chapters: list[str]) -> None:
    """Tab reaches every scrollable code block and every embedded demo of the chapters."""
    for path in chapters:
        # the theme makes scrollable blocks focusable after load (300 ms after the last change)
        with restored(shared_pages.open_for(path, 0.4)) as page:
            check_keyboard_reach(page, path)
    shared_pages.assert_clean()


def check_keyboard_reach(page: object, path: str) -> None:
    """Tab reaches every scrollable code block and every embedded demo of one chapter page."""
    unreachable = page.evaluate("""() => [...document.querySelectorAll('article pre, article .cell_output')]
        .filter(e => e.scrollWidth > e.clientWidth || e.scrollHeight > e.clientHeight)
        .filter(e => e.tabIndex < 0 && !e.closest('[tabindex="0"]'))
        .map(e => e.textContent.slice(0, 60))""")
    assert not unreachable, f"{path}: scrollable blocks the keyboard cannot reach: {unreachable}"
    frames = page.locator(".gpubook-demo iframe")
    for i in range(frames.count()):
        frame_el = frames.nth(i)
        # tab from the element just before the demo until the focus enters its frame
        frame_el.evaluate("f => { const b = document.createElement('button'); b.id = 'probe-before';"
                          " b.textContent = 'probe'; f.before(b); }")
        page.focus("#probe-before")
        page.keyboard.press("Tab")
        inner = frame_el.element_handle().content_frame()
        inside = inner.evaluate("() => document.hasFocus() && document.activeElement !== document.body"
                                " ? document.activeElement.outerHTML.slice(0, 80) : null")
        if inside is None:  # the frame itself takes the first Tab
            page.keyboard.press("Tab")
            inside = inner.evaluate("() => document.activeElement.outerHTML.slice(0, 80)")
        assert inside and "<body" not in inside, f"{path}: Tab does not enter demo {i}"
        page.evaluate("() => document.getElementById('probe-before').remove()")


# -- the demos ------------------------------------------------------------------------------------
# Each demo has its own test file (tests/test_demo_<name>.py); what every demo must do is here.


def test_embedded_demos_follow_the_book_theme(shared_pages: SharedPages, chapters: list[str]) -> None:
    embedded = 0
    for path in chapters:
        page = shared_pages.page(path)
        frames = page.locator(".gpubook-demo iframe")
        for i in range(frames.count()):
            el = frames.nth(i)
            assert el.get_attribute("title"), f"{path}: demo frame {i} has no title"
            assert el.bounding_box()["height"] > 300, f"{path}: demo frame {i} is not sized to its content"
            inner = el.element_handle().content_frame()
            with restored(page):
                for theme in THEMES:
                    set_theme(page, theme)
                    inner.wait_for_function("t => document.documentElement.dataset.theme === t", arg=theme,
                                            timeout=1000)
                    assert inner.evaluate("() => document.documentElement.dataset.theme") == theme
            embedded += 1
    shared_pages.assert_clean()
    if not embedded:
        pytest.skip("no chapter embeds a demo yet")


@pytest.mark.parametrize("demo", DEMOS)
def test_demos_fit_a_phone_screen(browser: object, served_book: str, demo: str) -> None:
    with opened_demo(browser, served_book, demo, theme=None, width=360, height=740, touch=True) as page:
        page.wait_for_timeout(100)
        over = sideways_overflow(page)
        assert over <= 0, f"{demo} scrolls sideways by {over}px on a 360px screen"


@pytest.mark.parametrize("demo", DEMOS)
def test_demos_read_the_hardware_facts_of_the_build(built_book: Path, demo: str) -> None:
    """A demo that shows hardware numbers loads book-data.js (written from gpubook.facts.hardware);
    none carries a spec number of its own."""
    from gpubook import sphinxext

    html = (ROOT / "_static" / "demos" / f"{demo}.html").read_text()
    if "GPUBOOK" in html:
        assert '<script src="book-data.js"></script>' in html, f"{demo} reads window.GPUBOOK without loading it"
    data = (built_book / "_static" / "demos" / "book-data.js").read_text()
    facts = json.loads(data[data.index("=") + 1:].strip().rstrip(";"))
    assert facts == json.loads(json.dumps(sphinxext.demo_facts()))
    script = re.sub(r"<style>.*?</style>", "", html, flags=re.S)
    for g in facts["gpus"].values():
        for key in ("sms", "bf16_flops", "hbm_bandwidth", "fp32_flops", "sfu_ops"):
            v = g[key]
            for typed in {f"{v:g}", f"{v:.0f}", f"{v / 1e12:g}e12", f"{v / 1e12:g}"} - {"0"}:
                if len(typed) >= 3:
                    assert not re.search(rf"(?<![\w.]){re.escape(typed)}(?![\w.])", script), \
                        f"{demo} types {g['name']} {key} = {typed} instead of reading book-data.js"


def test_ladder_diffs_show_added_and_removed_lines_in_colour(shared_pages: SharedPages) -> None:
    """Each step's diff marks its added and removed lines apart from the context, and the
    changed tokens inside them apart from the rest of the line, readably, in both themes; the
    whole listing is one click away in the folded cell above it."""
    page = shared_pages.page("chapters/09-gemm-pipelines.html")
    with restored(page):
        # the four steps' full listings fold above their diffs
        assert page.locator("details.hide.above-input").count() == page.locator(".gpubook-diff").count() == 4
        for theme in THEMES:
            set_theme(page, theme)
            got = page.evaluate("""() => {
              const d = document.querySelector('.highlight-diff');
              const style = s => { const c = getComputedStyle(s); return [c.color, c.backgroundColor]; };
              return {added: style(d.querySelector('.gi')), removed: style(d.querySelector('.gd')),
                      plain: style(d.querySelector('pre')),
                      added_token: style(d.querySelector('.gi .gpubook-diff-x')),
                      removed_token: style(d.querySelector('.gd .gpubook-diff-x'))};
            }""")
            for kind in ("added", "removed"):
                ink, bg = got[kind]
                assert bg != got["plain"][1] and "rgba(0, 0, 0, 0)" not in bg, f"{theme}: {kind} lines have no tint: {got}"
                # the tint sits on the code box: blend it over the box's own background
                ratio = contrast(css_luminance(ink), css_luminance(bg if "rgba" not in bg else got["plain"][1]))
                assert ratio >= 4.5, f"{theme}: {kind} lines read at contrast {ratio:.1f}: {got}"
                # a changed token stands apart from its line's tint, and reads as well
                t_ink, t_bg = got[f"{kind}_token"]
                assert t_bg not in (bg, got["plain"][1]) and "rgba" not in t_bg, f"{theme}: {kind} tokens have no tint: {got}"
                ratio = contrast(css_luminance(t_ink), css_luminance(t_bg))
                assert ratio >= 4.5, f"{theme}: {kind} tokens read at contrast {ratio:.1f}: {got}"
            assert got["added"] != got["removed"]
    shared_pages.assert_clean()
