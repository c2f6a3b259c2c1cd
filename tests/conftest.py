"""Shared fixtures: the book built once per test session, and served on localhost.

``built_book`` runs ``sphinx-build -W -b html`` with every chapter executed afresh
(GPUBOOK_EXECUTION=force) into a temporary folder and returns the HTML folder.
``served_book`` serves that folder over HTTP on 127.0.0.1 and returns the base URL.

Two environment variables shorten the loop while writing:
  GPUBOOK_HTML=<folder>       use an HTML build that already exists, build nothing;
  GPUBOOK_BUILD_DIR=<folder>  build into this folder (kept after the run) instead of a temporary one.
"""

from __future__ import annotations

import functools
import http.server
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="session")
def built_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML folder of the book, built once for the whole session."""
    reuse = os.environ.get("GPUBOOK_HTML")
    if reuse:
        html = Path(reuse).resolve()
        assert (html / "index.html").is_file(), f"GPUBOOK_HTML={reuse} holds no index.html"
        return html
    base = Path(os.environ["GPUBOOK_BUILD_DIR"]).resolve() if os.environ.get("GPUBOOK_BUILD_DIR") \
        else tmp_path_factory.mktemp("book")
    base.mkdir(parents=True, exist_ok=True)
    html = base / "html"
    env = dict(os.environ, GPUBOOK_EXECUTION="force", GPUBOOK_CACHE=str(base / "cache"))
    cmd = [sys.executable, "-m", "sphinx", "-W", "-b", "html", "-d", str(base / "doctrees"),
           str(ROOT), str(html)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    (base / "build.log").write_text(proc.stdout + proc.stderr)
    if proc.returncode != 0:
        pytest.fail(f"sphinx-build failed ({proc.returncode}); log in {base / 'build.log'}:\n"
                    + (proc.stdout + proc.stderr)[-4000:])
    return html


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    extensions_map = {**http.server.SimpleHTTPRequestHandler.extensions_map,
                      ".ipynb": "application/x-ipynb+json", ".js": "text/javascript",
                      ".woff": "font/woff", ".woff2": "font/woff2", ".svg": "image/svg+xml"}

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base class's name
        pass


@pytest.fixture(scope="session")
def served_book(built_book: Path) -> Iterator[str]:
    """Base URL (ending in '/') of the built book served by http.server on 127.0.0.1."""
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, name="book-server", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/"
    finally:
        server.shutdown()
        server.server_close()
