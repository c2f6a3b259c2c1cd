"""The built book in a real browser: headless Debian Chromium driven by Playwright.

Every page is loaded from a local server with every request routed: a request for anything
but 127.0.0.1 fails the test (the book must read offline). Pages are discovered from the
build, so the tests cover whatever chapters exist. Screenshots (index and the first chapter,
light and dark) and a printed PDF of that chapter are written to <html>/_screenshots/.
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

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
SKIP_DIRS = {"_static", "_sources", "_images", "_screenshots", "_notebooks", "_downloads"}
THEMES = ("light", "dark")
ROOT = Path(__file__).resolve().parents[1]

pytestmark = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                       "(apt-get install -y chromium)"),
]


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Session:
    """One browser context with every request checked: only the local server may answer."""

    def __init__(self, browser: object, base: str, theme: str | None = None):
        self.base = base
        self.external: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": 1280, "height": 900}, accept_downloads=True)
        if theme:
            # what the theme's switcher stores; read by the page before it paints
            self.context.add_init_script(
                f"try {{ localStorage.setItem('mode', '{theme}'); localStorage.setItem('theme', '{theme}'); }} catch (e) {{}}"
            )
        self.record_failures = True
        self.context.route("**/*", self._route)

    def _route(self, route: object) -> None:
        url = route.request.url
        parts = urlparse(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS:
            self.external.append(url)
            route.abort()
        else:
            route.continue_()

    def open(self, path: str, wait: str = "networkidle") -> object:
        page = self.context.new_page()
        page.on("console", lambda m: self.errors.append(f"{path}: console.{m.type}: {m.text}")
                if m.type == "error" and self.record_failures else None)
        page.on("pageerror", lambda e: self.errors.append(f"{path}: uncaught {e}"))
        page.on("response", lambda r: self.failed.append(f"{path}: {r.status} {r.url}")
                if r.status >= 400 and self.record_failures else None)
        page.on("requestfailed", lambda r: None if urlparse(r.url).hostname not in LOCAL_HOSTS
                else self.failed.append(f"{path}: failed {r.url} ({r.failure})"))
        response = page.goto(urljoin(self.base, path), wait_until=wait)
        assert response is not None and response.status == 200, f"{path}: HTTP {response and response.status}"
        wait_for_math(page)
        return page

    def assert_clean(self) -> None:
        assert not self.external, f"requests left localhost: {self.external}"
        assert not self.failed, f"failed local requests: {self.failed}"
        assert not self.errors, "JavaScript errors:\n" + "\n".join(self.errors)

    def close(self) -> None:
        self.context.close()


@pytest.fixture()
def session(browser: object, served_book: str) -> Iterator[Session]:
    s = Session(browser, served_book)
    yield s
    s.close()


@pytest.fixture(scope="session")
def pages(built_book: Path) -> list[str]:
    """Every HTML page of the book, as paths relative to the build root."""
    found = []
    for p in sorted(built_book.rglob("*.html")):
        rel = p.relative_to(built_book)
        if rel.parts[0] not in SKIP_DIRS:
            found.append(rel.as_posix())
    assert "index.html" in found
    return found


@pytest.fixture(scope="session")
def chapters(pages: list[str]) -> list[str]:
    found = [p for p in pages if p.startswith("chapters/")]
    assert found, "the build has no chapter pages"
    return found


@pytest.fixture(scope="session")
def shots(built_book: Path) -> Path:
    out = built_book / "_screenshots"
    out.mkdir(exist_ok=True)
    return out


def wait_for_math(page: object) -> None:
    """Wait until MathJax (when the page loads it) has typeset the page."""
    if page.evaluate("() => typeof window.MathJax !== 'undefined' && !!document.querySelector('.math')"):
        page.wait_for_function("() => window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20000)
        page.evaluate("() => MathJax.startup.promise")


def set_theme(page: object, theme: str) -> None:
    """Pick a colour mode with the theme's own switcher, as a reader would."""
    page.click(".theme-switch-button")
    page.click(f".theme-change-button[data-mode='{theme}']")
    page.wait_for_function(f"() => document.documentElement.dataset.theme === '{theme}'")
    page.wait_for_timeout(150)  # transitions


# -- colour arithmetic for the screenshot checks ---------------------------------------------------
def _luminance(rgb: "object") -> "object":
    import numpy as np

    c = np.asarray(rgb, dtype=float) / 255.0
    c = np.where(c <= 0.04045, c / 12.92, ((c + 0.055) / 1.055) ** 2.4)
    return 0.2126 * c[..., 0] + 0.7152 * c[..., 1] + 0.0722 * c[..., 2]


def contrast(l1: float, l2: float) -> float:
    hi, lo = max(l1, l2), min(l1, l2)
    return (hi + 0.05) / (lo + 0.05)


def image_contrast(png: bytes) -> tuple[float, float, float]:
    """(background luminance, ink luminance, their contrast) of a screenshot.

    The background is the most common luminance; the ink is the pixel luminance farthest from
    it among the 2% of pixels that differ most, so thin lines and small text count.
    """
    import numpy as np
    from PIL import Image

    img = np.asarray(Image.open(io.BytesIO(png)).convert("RGB"))
    lum = _luminance(img).ravel()
    hist, edges = np.histogram(lum, bins=64, range=(0.0, 1.0))
    bg = float(edges[np.argmax(hist)] + 0.5 / 64)
    dist = np.abs(lum - bg)
    ink_idx = np.argsort(dist)[-max(1, len(dist) // 50):]
    ink = float(np.median(lum[ink_idx]))
    return bg, ink, contrast(bg, ink)


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
def test_every_page_loads_offline_without_errors(session: Session, pages: list[str]) -> None:
    """HTTP 200, no console errors, no failed request, and no request to any other host."""
    for path in pages:
        page = session.open(path)
        assert page.title(), f"{path} has no title"
        page.close()
    session.assert_clean()


def test_math_renders_from_the_vendored_mathjax(session: Session, pages: list[str], built_book: Path) -> None:
    with_math = [p for p in pages if 'class="math' in (built_book / p).read_text(encoding="utf-8")]
    if not with_math:
        pytest.skip("no page of the book has math yet")
    for path in with_math:
        page = session.open(path)
        src = page.evaluate("() => [...document.scripts].map(s => s.src).filter(s => /mathjax/i.test(s))")
        assert src and all(urlparse(s).hostname in LOCAL_HOSTS for s in src), src
        n_math = page.locator(".math").count()
        n_typeset = page.locator("mjx-container").count()
        assert n_typeset >= n_math > 0, f"{path}: {n_typeset} typeset of {n_math} formulas"
        # the TeX fonts arrived from the build, not a CDN
        fonts = page.evaluate("() => [...document.fonts].filter(f => f.status === 'loaded').map(f => f.family)")
        assert any("MJX" in f for f in fonts), f"{path}: MathJax fonts not loaded: {fonts}"
        page.close()
    session.assert_clean()


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


def test_theme_switcher_and_figures_in_both_themes(session: Session, chapters: list[str], shots: Path) -> None:
    """The switcher flips light/dark; text and every figure keep their contrast in both."""
    for path in ["index.html", chapters[0]]:
        page = session.open(path)
        name = "index" if path == "index.html" else Path(path).stem
        for theme in THEMES:
            set_theme(page, theme)
            page.screenshot(path=str(shots / f"{name}-{theme}.png"), full_page=True)
            bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
            dark_bg = _css_luminance(bg) < 0.2
            assert dark_bg == (theme == "dark"), f"{path}: {theme} theme has background {bg}"
        page.close()
    # every figure of every chapter: cell images, figures, demos
    for path in chapters:
        page = session.open(path)
        page.evaluate("() => document.querySelectorAll('details').forEach(d => { d.open = true; })")
        figures = page.locator(".cell_output img, figure img, figure svg, .gpubook-demo iframe")
        for theme in THEMES:
            set_theme(page, theme)
            for i in range(figures.count()):
                fig = figures.nth(i)
                if not fig.is_visible():
                    continue  # e.g. an output the chapter hides
                fig.scroll_into_view_if_needed()
                page.wait_for_timeout(100)
                box = fig.bounding_box()
                if not box or box["width"] < 8 or box["height"] < 8:
                    continue
                bg, ink, ratio = image_contrast(fig.screenshot())
                assert ratio >= 3.0, (f"{path}: figure {i} in the {theme} theme: background luminance "
                                      f"{bg:.2f}, ink {ink:.2f}, contrast {ratio:.1f} < 3")
        page.close()
    session.assert_clean()


def _css_luminance(css: str) -> float:
    nums = [float(x) for x in re.findall(r"[\d.]+", css)[:3]]
    return float(_luminance(nums))


def test_search_finds_a_term_from_a_chapter(session: Session, chapters: list[str], built_book: Path) -> None:
    chapter = chapters[0]
    title = parse_title(built_book / chapter)
    words = sorted((w for w in re.findall(r"[A-Za-z]{5,}", title)), key=len, reverse=True)
    assert words, f"no searchable word in the title {title!r}"
    term = words[0].lower()
    page = session.open(f"search.html?q={term}")
    page.wait_for_selector("#search-results ul.search li", timeout=20000)
    hits = page.eval_on_selector_all("#search-results ul.search li a", "els => els.map(e => e.href)")
    assert any(chapter in h for h in hits), f"searching {term!r} did not find {chapter}: {hits}"
    page.close()
    session.assert_clean()


def parse_title(path: Path) -> str:
    m = re.search(r"<h1[^>]*>(.*?)</h1>", path.read_text(encoding="utf-8"), re.S)
    assert m, f"{path} has no h1"
    return re.sub(r"<[^>]+>", "", m.group(1)).replace("#", "").strip()


def test_each_chapter_downloads_its_notebook(session: Session, chapters: list[str], tmp_path: Path) -> None:
    """The download link yields the chapter's paired notebook: valid nbformat, same cells as notebooks/."""
    import nbformat

    for path in chapters:
        page = session.open(path)
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
        assert [c.source for c in nb.cells] == [c.source for c in paired.cells], f"{path}: not its paired notebook"
        assert Path(path).stem == local.stem
        page.close()
    session.assert_clean()


def test_runs_on_badge_matches_the_kernels(session: Session, chapters: list[str]) -> None:
    """The badge under each chapter's title agrees with the compile reports on the page."""
    for path in chapters:
        page = session.open(path)
        badge = page.locator("h1 + .gpubook-pagebar .gpubook-badge, h1 ~ .gpubook-pagebar .gpubook-badge")
        assert badge.count() == 1, f"{path}: no Runs-on badge under the title"
        tier = badge.get_attribute("data-tier")
        text = page.locator("article").inner_text()
        reports = dict(re.findall(r"([\w.\-]+): compiled for sm_100a( \(\+sm_90a\)| only)", text))
        checked = bool(re.search(r"\bPASS\b|\bNOT (?:RUN|MEASURED)\b", text))
        if not reports:
            expected = "any machine"
        elif not checked:
            expected = "compile-only"
        elif all(v.strip() == "(+sm_90a)" for v in reports.values()):
            expected = "sm_90+"
        else:
            expected = "B200 only"
        assert tier == expected, f"{path}: badge says {tier!r}, its kernels say {expected!r} ({reports})"
        assert badge.is_visible()
        page.close()
    session.assert_clean()


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


def test_answers_are_collapsed_until_opened(session: Session, chapters: list[str]) -> None:
    seen = 0
    for path in chapters:
        page = session.open(path)
        drops = page.locator("details.sd-dropdown")
        for i in range(drops.count()):
            d = drops.nth(i)
            assert d.get_attribute("open") is None, f"{path}: dropdown {i} is open on load"
            body = d.locator(".sd-summary-content")
            assert not body.is_visible(), f"{path}: the answer in dropdown {i} shows before it is opened"
            d.locator("summary").click()
            assert body.is_visible()
            seen += 1
        page.close()
    session.assert_clean()
    if not seen:
        pytest.skip("no chapter has exercise dropdowns yet")


def test_print_stylesheet_keeps_code_and_figures(session: Session, chapters: list[str], shots: Path) -> None:
    page = session.open(chapters[0])
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
    pdf = page.pdf(path=str(shots / f"{Path(chapters[0]).stem}-print.pdf"), format="A4")
    assert pdf[:4] == b"%PDF" and len(pdf) > 5000
    page.close()
    session.assert_clean()


# -- accessibility --------------------------------------------------------------------------------
def _axe_source() -> str:
    import axe_playwright_python

    return (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")


def run_axe(page: object) -> list[dict]:
    """Serious and critical axe-core violations of a page and of the frames inside it."""
    src = _axe_source()
    for frame in page.frames:
        frame.evaluate(src + "\n;void 0")
    result = page.evaluate(
        "async () => await axe.run(document, {resultTypes: ['violations'], iframes: true})"
    )
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "nodes": [n["target"] for n in v["nodes"][:5]]}
        for v in result["violations"] if v["impact"] in ("serious", "critical")
    ]


@pytest.mark.parametrize("theme", THEMES)
def test_no_serious_accessibility_violations(browser: object, served_book: str, pages: list[str], theme: str) -> None:
    s = Session(browser, served_book, theme=theme)
    try:
        problems = {}
        for path in pages + ["_static/demos/thread-hierarchy.html", "_static/demos/swizzle.html"]:
            page = s.open(path if "demos" not in path else f"{path}?theme={theme}")
            if "demos" not in path:
                assert page.evaluate("() => document.documentElement.dataset.theme") == theme
            # axe re-reads the stylesheets itself and resolves the theme's relative @import
            # against the page, not the sheet: its own 404s are not the book's
            s.record_failures = False
            found = run_axe(page)
            s.record_failures = True
            if found:
                problems[path] = found
            page.close()
        assert not problems, json.dumps(problems, indent=1)
        s.assert_clean()
    finally:
        s.close()


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


def test_code_and_demos_are_keyboard_reachable(session: Session, chapters: list[str]) -> None:
    """Tab reaches every scrollable code block and every embedded demo of the chapters."""
    for path in chapters:
        page = session.open(path)
        page.wait_for_timeout(400)  # the theme makes scrollable blocks focusable after load
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
        page.close()
    session.assert_clean()


# -- the demos ------------------------------------------------------------------------------------
def _reference_layouts() -> tuple[object, object, object]:
    """gpubook.layouts when it exists; otherwise the definitions, written out here."""
    try:
        from gpubook import layouts

        return layouts.swizzle, layouts.bank, layouts.conflicts
    except ImportError:
        def swizzle(a: int, mode: int) -> int:
            return a if mode == 0 else a ^ (((a >> 7) & (mode // 16 - 1)) << 4)

        def bank(a: int) -> int:
            return (a // 4) % 32

        def conflicts(addrs: list[int]) -> int:
            words: dict[int, set[int]] = {}
            for a in addrs:
                words.setdefault(bank(a), set()).add(a // 4)
            return max(0, max((len(w) for w in words.values()), default=0) - 1)

        return swizzle, bank, conflicts


def test_swizzle_demo_computes_what_gpubook_layouts_computes(session: Session) -> None:
    py_swizzle, py_bank, py_conflicts = _reference_layouts()
    page = session.open("_static/demos/swizzle.html")
    addrs = list(range(0, 4096, 2)) + [4096 + 16 * k + 4 for k in range(64)]
    for mode in (0, 32, 64, 128):
        js = page.evaluate("([as, m]) => as.map(a => swizzle(a, m))", [addrs, mode])
        assert js == [py_swizzle(a, mode) for a in addrs], f"swizzle differs for mode {mode}"
    assert page.evaluate("as => as.map(bank)", addrs) == [py_bank(a) for a in addrs]
    rng = random.Random(7)
    accesses = [[rng.randrange(0, 8192, 4) for _ in range(32)] for _ in range(40)]
    for mode in (0, 32, 64, 128):
        for esize in (2, 4):
            accesses.append([py_swizzle(r * 128 + 5 * esize, mode) for r in range(32)])   # a column
            accesses.append([py_swizzle(3 * 128 + i * esize, mode) for i in range(32)])   # a row
    accesses += [[0] * 32, [4 * i for i in range(32)], [128 * i for i in range(32)], [2 * i for i in range(32)]]
    js = page.evaluate("accs => accs.map(conflicts)", accesses)
    assert js == [py_conflicts(a) for a in accesses]
    # what the page shows for each choice is the same count
    for mode in (0, 32, 64, 128):
        for esize in (2, 4):
            page.check(f"input[name=mode][value='{mode}']")
            page.check(f"input[name=esize][value='{esize}']")
            col = [py_swizzle(r * 128 + 0 * esize, mode) for r in range(32)]
            row = [py_swizzle(0 * 128 + i * esize, mode) for i in range(32)]
            assert int(page.get_attribute("#col-conflicts", "data-conflicts")) == py_conflicts(col)
            assert int(page.get_attribute("#row-conflicts", "data-conflicts")) == py_conflicts(row)
    # the textbook cases: a column of fp32 conflicts 31 times unswizzled, 3 times under 128B
    assert py_conflicts([py_swizzle(r * 128, 0) for r in range(32)]) == 31
    assert py_conflicts([py_swizzle(r * 128, 128) for r in range(32)]) == 3
    page.close()
    session.assert_clean()


def test_swizzle_demo_follows_the_keyboard(session: Session) -> None:
    page = session.open("_static/demos/swizzle.html")
    page.check("input[name=esize][value='4']")
    page.focus("#tile")
    for key in ["ArrowRight"] * 5 + ["ArrowDown"] * 2:
        page.keyboard.press(key)
    assert page.inner_text("#col-c") == "5" and page.inner_text("#row-r") == "2"
    assert "row 2, element 5" in page.inner_text("#readout")
    page.close()
    session.assert_clean()


def test_thread_hierarchy_demo_shows_the_ids(session: Session) -> None:
    page = session.open("_static/demos/thread-hierarchy.html")
    page.select_option("#cluster-size", "2")
    page.select_option("#cta-threads", "256")
    page.click("#grid button:has-text('CTA 3')")
    page.click("#cta button:has-text('warp 5')")
    page.click("#warp button >> text='7'")
    page.hover("#warp button >> text='7'")
    ids = dict(zip(page.locator("#idrows th").all_inner_texts(), page.locator("#idrows td").all_inner_texts()))
    tid = 5 * 32 + 7
    assert ids["CTA id (blockIdx.x)"] == "3"
    assert ids["cluster id"] == "1" and ids["CTA rank in cluster"] == "1"
    assert ids["warpgroup id"] == "1" and ids["warp id in warpgroup"] == "1"
    assert ids["lane id"] == "7" and ids["thread id in CTA (threadIdx.x)"] == str(tid)
    assert ids["global thread id"] == str(3 * 256 + tid)
    # keyboard: Tab into the grid level, arrows move, focus shows the ids
    page.focus("#grid button[tabindex='0']")
    page.keyboard.press("ArrowRight")
    assert page.evaluate("() => document.activeElement.textContent") == "CTA 4"
    assert "CTA 4" in page.inner_text("#focusname")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#cta') !== null")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.closest('#warp') !== null")
    page.close()
    session.assert_clean()


def test_embedded_demos_follow_the_book_theme(session: Session, chapters: list[str]) -> None:
    embedded = 0
    for path in chapters:
        page = session.open(path)
        frames = page.locator(".gpubook-demo iframe")
        for i in range(frames.count()):
            el = frames.nth(i)
            assert el.get_attribute("title"), f"{path}: demo frame {i} has no title"
            assert el.bounding_box()["height"] > 300, f"{path}: demo frame {i} is not sized to its content"
            inner = el.element_handle().content_frame()
            for theme in THEMES:
                set_theme(page, theme)
                page.wait_for_timeout(100)
                assert inner.evaluate("() => document.documentElement.dataset.theme") == theme
            embedded += 1
        page.close()
    session.assert_clean()
    if not embedded:
        pytest.skip("no chapter embeds a demo yet")


@pytest.mark.parametrize("demo", ["thread-hierarchy", "swizzle"])
def test_demos_fit_a_phone_screen(browser: object, served_book: str, demo: str) -> None:
    s = Session(browser, served_book)
    try:
        page = s.open(f"_static/demos/{demo}.html")
        page.set_viewport_size({"width": 360, "height": 740})
        page.wait_for_timeout(100)
        over = page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")
        assert over <= 0, f"{demo} scrolls sideways by {over}px on a 360px screen"
        page.close()
        s.assert_clean()
    finally:
        s.close()
