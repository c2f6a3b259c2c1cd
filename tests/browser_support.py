"""What every browser test of the book shares: Chromium, a checked session, the pages, themes,
and the local servers.

Every page is loaded from a local server with every request routed: a request for anything
but 127.0.0.1 fails the test (the book must read offline). Two servers: the built book
(``served_book`` in conftest.py) and, for the tests of single demos, ``demo_site`` (conftest.py):
a copy of ``_static/`` with the ``demos/book-data.js`` that the build writes, which needs no book build.
"""

from __future__ import annotations

import functools
import http.server
import io
import re
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urljoin, urlparse

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
LOCAL_HOSTS = {"127.0.0.1", "localhost"}
SKIP_DIRS = {"_static", "_sources", "_images", "_screenshots", "_notebooks", "_downloads"}
THEMES = ("light", "dark")
FAVICON = "/_static/favicon.svg"
ROOT = Path(__file__).resolve().parents[1]


# -- local servers -------------------------------------------------------------------------------
class QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".ipynb": "application/x-ipynb+json", ".js": "text/javascript",
                      ".woff": "font/woff", ".woff2": "font/woff2", ".svg": "image/svg+xml"}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@contextmanager
def serve(directory: Path) -> Iterator[str]:
    """Base URL (ending in '/') of `directory` served by http.server on 127.0.0.1."""
    handler = functools.partial(QuietHandler, directory=str(directory))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name=f"server-{directory.name}", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


# -- fixtures ------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def browser() -> Iterator[object]:
    """Chromium for one test module. Playwright's sync API runs one instance at a time, so each
    module starts its own and stops it before the next module's starts."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as pw:
        b = pw.chromium.launch(executable_path=str(CHROMIUM), args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


class Session:
    """One browser context with every request checked: only the local server may answer."""

    def __init__(self, browser: object, base: str, theme: str | None = None, width: int = 1280,
                 height: int = 900, touch: bool = False):
        self.base = base
        self.external: list[str] = []
        self.failed: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": width, "height": height}, accept_downloads=True,
                                           has_touch=touch, is_mobile=touch)
        if theme:
            # what the theme's switcher stores; read by the page before it paints
            self.context.add_init_script(
                f"try {{ localStorage.setItem('mode', '{theme}'); localStorage.setItem('theme', '{theme}'); }} catch (e) {{}}"
            )
        self.record_failures = True
        self.in_flight: set[object] = set()
        # The tab's icon is the browser's own request, made beside the page and at times left
        # unanswered by headless Chromium: a page has settled without it (a failed icon request
        # is still reported, through the responses).
        self.context.on("request", lambda r: None if r.url.endswith(FAVICON) else self.in_flight.add(r))
        self.context.on("requestfinished", lambda r: self.in_flight.discard(r))
        self.context.on("requestfailed", lambda r: self.in_flight.discard(r))
        self.context.route("**/*", self._route)

    def _route(self, route: object) -> None:
        url = route.request.url
        parts = urlparse(url)
        if parts.scheme in ("http", "https", "ws", "wss") and parts.hostname not in LOCAL_HOSTS:
            self.external.append(url)
            route.abort()
        else:
            route.continue_()

    def open(self, path: str, wait: str = "settled") -> object:
        """`path` in a new page, once it has loaded (`wait`: "settled", the load event, then until
        no request is in flight and the fonts have loaded, see ``settle``; or a Playwright load
        state: "networkidle" adds half a second of quiet to every page)."""
        page = self.context.new_page()
        page.on("console", lambda m: self.errors.append(f"{path}: console.{m.type}: {m.text}")
                if m.type == "error" and self.record_failures else None)
        page.on("pageerror", lambda e: self.errors.append(f"{path}: uncaught {e}"))
        page.on("response", lambda r: self.failed.append(f"{path}: {r.status} {r.url}")
                if r.status >= 400 and self.record_failures else None)
        page.on("requestfailed", lambda r: None if urlparse(r.url).hostname not in LOCAL_HOSTS
                else self.failed.append(f"{path}: failed {r.url} ({r.failure})"))
        response = page.goto(urljoin(self.base, path), wait_until="load" if wait == "settled" else wait)
        assert response is not None and response.status == 200, f"{path}: HTTP {response and response.status}"
        if wait == "settled":
            self.settle(page)
        wait_for_math(page)
        return page

    def settle(self, page: object, timeout: float = 15.0) -> None:
        """Wait until no request of the session is in flight and the page's fonts have loaded:
        what "networkidle" waits for, without its fixed 500 ms of quiet."""
        end = time.monotonic() + timeout
        while True:
            page.evaluate("() => document.fonts.ready.then(() => true)")
            if not self.in_flight:
                return
            assert time.monotonic() < end, f"requests still in flight: {[r.url for r in self.in_flight]}"
            page.wait_for_timeout(20)  # lets Playwright deliver the requests' events

    def assert_clean(self) -> None:
        """Nothing off localhost, no failed request, no JavaScript error: every request the
        session has started is answered first."""
        open_pages = [p for p in self.context.pages if not p.is_closed()]
        if open_pages:
            self.settle(open_pages[0])
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


class SharedPages:
    """One checked session (``Session``'s keywords) whose pages stay open: each path is loaded
    once and shared by every test that reads it, instead of a new page and load per test.

    A test that changes a shared page wraps the change in ``restored(page)``, which puts back
    the dropdowns, the colour mode, print emulation, focus and scroll as they were.
    """

    def __init__(self, browser: object, base: str, **kw: object):
        self.session = Session(browser, base, **kw)
        self._pages: dict[str, object] = {}
        self._loaded: dict[str, float] = {}

    def page(self, path: str) -> object:
        """`path` loaded (once) in the shared session, brought to the front: a page in the
        background gets no animation frames, focus or key events."""
        page = self._pages.get(path)
        if page is None or page.is_closed():
            page = self._pages[path] = self.session.open(path)
            self._loaded[path] = time.monotonic()
        page.bring_to_front()
        return page

    def open_for(self, path: str, seconds: float) -> object:
        """`path` as ``page`` gives it, once it has been open for at least `seconds`."""
        page = self.page(path)
        left = seconds - (time.monotonic() - self._loaded[path])
        if left > 0:
            page.wait_for_timeout(1000 * left)
        return page

    def assert_clean(self) -> None:
        self.session.assert_clean()

    def close(self) -> None:
        self.session.close()


@contextmanager
def restored(page: object) -> Iterator[object]:
    """A ``with`` block that may open the dropdowns of a shared page, switch its colour mode,
    emulate print, move focus or scroll: on leaving, the page is put back as it was."""
    state = page.evaluate("""() => ({open: [...document.querySelectorAll('details')].map(d => d.open),
        mode: localStorage.getItem('mode'), theme: document.documentElement.dataset.theme,
        x: window.scrollX, y: window.scrollY})""")
    try:
        yield page
    finally:
        page.emulate_media(media="null")
        now = page.evaluate("() => [localStorage.getItem('mode'), document.documentElement.dataset.theme]")
        if now != [state["mode"], state["theme"]]:
            set_theme(page, state["mode"] or "auto")
        page.evaluate("""s => {
            document.querySelectorAll('details').forEach((d, i) => { if (i < s.open.length) d.open = s.open[i]; });
            if (document.activeElement) document.activeElement.blur();
            window.scrollTo(s.x, s.y);
        }""", state)
        assert page.evaluate("() => document.documentElement.dataset.theme") == state["theme"], \
            "the shared page did not return to its colour mode"


@pytest.fixture(scope="module")
def shared_pages(browser: object, served_book: str) -> Iterator[SharedPages]:
    """The book's pages at 1280 x 900, each loaded once for the test module (``SharedPages``);
    on leaving the module the session is checked: nothing off localhost, no failed request,
    no JavaScript error."""
    shared = SharedPages(browser, served_book)
    try:
        yield shared
        shared.assert_clean()
    finally:
        shared.close()


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
    """Pick a colour mode with the theme's own switcher, as a reader would ('auto' follows the
    system), and wait until the page shows it with every colour transition finished."""
    page.click(".theme-switch-button")
    page.click(f".theme-change-button[data-mode='{theme}']")
    page.wait_for_function("t => t === 'auto' ? localStorage.getItem('mode') === 'auto'"
                           " : document.documentElement.dataset.theme === t", arg=theme)
    wait_for_transitions(page)


def wait_for_transitions(page: object) -> None:
    """Wait until no finite CSS transition or animation of the page (or frame) is still running."""
    page.wait_for_function("""() => document.getAnimations().every(a => a.playState !== 'running'
        || a.effect === null || a.effect.getComputedTiming().endTime === Infinity)""", timeout=5000)


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


def css_luminance(css: str) -> float:
    nums = [float(x) for x in re.findall(r"[\d.]+", css)[:3]]
    return float(_luminance(nums))


BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                       "(apt-get install -y chromium)"),
]


def open_demo(browser: object, base: str, name: str, theme: str | None = "light", width: int = 1280,
              touch: bool = False, height: int = 900) -> tuple["Session", object]:
    """A demo opened on its own page (``?theme=`` picks its colours; None leaves it to the
    system), in a fresh checked session. `base` is ``served_book`` or ``demo_site``."""
    s = Session(browser, base, width=width, height=height, touch=touch)
    page = s.open(f"_static/demos/{name}.html" + (f"?theme={theme}" if theme else ""), wait="settled")
    return s, page


@contextmanager
def checked_session(browser: object, base: str, **kw: object) -> Iterator["Session"]:
    """A Session (``Session``'s keywords) for a ``with`` block: on leaving, it is checked —
    nothing off localhost, no failed request, no JavaScript error — and closed."""
    s = Session(browser, base, **kw)
    try:
        yield s
        s.assert_clean()
    finally:
        s.close()


PHONE = {"width": 390, "height": 844, "touch": True}


@contextmanager
def chapter_demo(browser: object, base: str, chapter: str, demo_id: str, theme: str | None = None,
                 **kw: object) -> Iterator[tuple[object, object]]:
    """(page, frame): a chapter page (``chapters/<chapter>.html``, in a checked session of
    ``Session``'s keywords, a phone's by default) and the frame of its demo ``figure#<demo_id>``,
    which must show `theme` when one is given."""
    with checked_session(browser, base, theme=theme, **({**PHONE, **kw})) as s:
        page = s.open(f"chapters/{chapter}.html")
        frame = demo_frame(page, demo_id)
        if theme:
            assert frame.evaluate("() => document.documentElement.dataset.theme") == theme
        yield page, frame
        page.close()


def sideways_overflow(page: object) -> float:
    """How far (CSS px) a page or frame scrolls sideways: more than 0 is a layout that does not fit."""
    return page.evaluate("() => document.documentElement.scrollWidth - document.documentElement.clientWidth")


def smallest_svg_text_px(frame: object, svg: str) -> float:
    """The smallest text of the SVG `svg` (a selector) as shown: font size times the SVG's scale."""
    return frame.evaluate(f"""() => {{
        const c = document.querySelector({svg!r});
        const scale = c.getBoundingClientRect().width / c.viewBox.baseVal.width;
        return scale * Math.min(...[...c.querySelectorAll('text')].map(t => parseFloat(getComputedStyle(t).fontSize)));
    }}""")


@contextmanager
def opened_demo(browser: object, base: str, name: str, **kw: object) -> Iterator[object]:
    """``open_demo``'s page, for a ``with`` block (or a fixture that yields inside one): on
    leaving, the page is closed and the session checked (nothing off localhost, no failed
    request, no JavaScript error) and closed."""
    s, page = open_demo(browser, base, name, **kw)
    try:
        yield page
        s.assert_clean()
        page.close()
    finally:
        s.close()


def demo_frame(page: object, demo_id: str) -> object:
    """The content frame of the demo embedded in a chapter page under ``figure#<demo_id>``."""
    handle = page.locator(f"#{demo_id} iframe").element_handle()
    frame = handle.content_frame()
    frame.wait_for_load_state("load")
    return frame


def serious_axe_violations(page: object) -> list[dict]:
    """Serious and critical axe-core violations of the page: id, help and the first targets."""
    import axe_playwright_python

    src = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    page.evaluate(src + "\n;void 0")
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [{"id": v["id"], "help": v["help"], "nodes": [n["target"] for n in v["nodes"][:5]]}
            for v in result["violations"] if v["impact"] in ("serious", "critical")]
