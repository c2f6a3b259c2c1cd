"""What every browser test of the book shares: Chromium, a checked session, the pages, themes.

Every page is loaded from a local server with every request routed: a request for anything
but 127.0.0.1 fails the test (the book must read offline).
"""

from __future__ import annotations

import io
import re
from collections.abc import Iterator
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
ROOT = Path(__file__).resolve().parents[1]

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


def css_luminance(css: str) -> float:
    nums = [float(x) for x in re.findall(r"[\d.]+", css)[:3]]
    return float(_luminance(nums))


BROWSER_MARKS = [
    pytest.mark.browser,
    pytest.mark.skipif(not CHROMIUM.exists(), reason="needs Debian's chromium at /usr/bin/chromium "
                       "(apt-get install -y chromium)"),
]


def open_demo(browser: object, served_book: str, name: str, theme: str = "light", width: int = 1280,
              touch: bool = False) -> tuple["Session", object]:
    """A demo opened on its own page (``?theme=`` picks its colours), in a fresh checked session."""
    s = Session(browser, served_book, width=width, height=900, touch=touch)
    page = s.open(f"_static/demos/{name}.html?theme={theme}")
    return s, page


def demo_frame(page: object, demo_id: str) -> object:
    """The content frame of the demo embedded in a chapter page under ``figure#<demo_id>``."""
    handle = page.locator(f"#{demo_id} iframe").element_handle()
    frame = handle.content_frame()
    frame.wait_for_load_state("load")
    return frame
