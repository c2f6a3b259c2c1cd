"""Serve the demos folder on localhost and open pages with every outside request refused.

Shared by the tests of single demos (tests/test_demo_*.py): they need no book build.
"""

from __future__ import annotations

import functools
import http.server
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from urllib.parse import urlparse

ROOT = Path(__file__).resolve().parents[1]
DEMOS = ROOT / "_static" / "demos"
CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]


class _Quiet(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map, ".js": "text/javascript"}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002
        pass


@contextmanager
def serve_demos() -> Iterator[str]:
    """Base URL of the demos folder served on 127.0.0.1."""
    handler = functools.partial(_Quiet, directory=str(DEMOS))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()


class DemoPage:
    """A demo opened in its own browser context: outside requests and JavaScript errors recorded."""

    def __init__(self, browser: object, url: str, width: int = 1000, touch: bool = False):
        self.external: list[str] = []
        self.errors: list[str] = []
        self.context = browser.new_context(viewport={"width": width, "height": 900}, has_touch=touch,
                                           is_mobile=touch)
        self.context.route("**/*", self._route)
        self.page = self.context.new_page()
        self.page.on("console", lambda m: self.errors.append(m.text) if m.type == "error" else None)
        self.page.on("pageerror", lambda e: self.errors.append(str(e)))
        response = self.page.goto(url, wait_until="networkidle")
        assert response is not None and response.status == 200, url

    def _route(self, route: object) -> None:
        host = urlparse(route.request.url).hostname
        if route.request.url.startswith(("http://", "https://")) and host not in ("127.0.0.1", "localhost"):
            self.external.append(route.request.url)
            route.abort()
        else:
            route.continue_()

    def close(self) -> None:
        assert not self.external, f"the demo asked for outside resources: {self.external}"
        assert not self.errors, f"JavaScript errors: {self.errors}"
        self.context.close()


def serious_axe_violations(page: object) -> list[dict]:
    """Serious and critical axe-core violations of the page."""
    import axe_playwright_python

    src = (Path(axe_playwright_python.__file__).parent / "axe.min.js").read_text(encoding="utf-8")
    page.evaluate(src + "\n;void 0")
    result = page.evaluate("async () => await axe.run(document, {resultTypes: ['violations']})")
    return [{"id": v["id"], "nodes": [n["target"] for n in v["nodes"][:5]]}
            for v in result["violations"] if v["impact"] in ("serious", "critical")]
