"""Shared fixtures: the book built once per test session, and served on localhost.

``built_book`` runs ``sphinx-build -W -b html`` with every chapter executed afresh
(in cache mode from an empty cache, as the README's first build does) into a temporary folder and returns the HTML folder.
``served_book`` serves that folder over HTTP on 127.0.0.1 and returns the base URL
(browser_support.py holds the server and the browser). ``demo_site`` serves a copy of
``_static/`` (with the build's ``demos/book-data.js``) laid out as in the book: the tests of a
single demo open it without a book build.

The book build also writes every kernel it compiles to a build cache
(``gpubook.build.kernel_cache``), which the notebooks test of the same session reads: the
second execution of each chapter runs every cell without compiling its kernels again.

Two environment variables shorten the loop while writing:
  GPUBOOK_HTML=<folder>       use an HTML build that already exists, build nothing;
  GPUBOOK_BUILD_DIR=<folder>  build into this folder (kept after the run) instead of a temporary one.
A build that `python tests/prebuild_book.py <folder>` made in that folder is the session's build
when the book's sources have not changed since (`sources_digest`): `.ci/run` builds the book so,
with both cores, before the tests start.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


# The test files that take minutes (the durations pytest prints: browser scans, the simulator's
# first builds, chapter 12's simulated check, the notebooks), longest first. pytest-xdist hands
# whole files to its processes in collection order (--no-loadscope-reorder), so these start
# first, on different processes, and the many short files fill in behind them instead of one
# long file starting last and running alone.
LONG_FILES = ("test_accessibility.py", "test_browser.py", "test_simulate.py", "test_chapter12_defects.py", "test_notebooks.py")


def pytest_collection_modifyitems(session: pytest.Session, config: pytest.Config, items: list) -> None:
    rank = {name: i for i, name in enumerate(LONG_FILES)}
    items.sort(key=lambda item: rank.get(item.path.name, len(LONG_FILES)))  # stable: the rest keep their order


@pytest.fixture(scope="session")
def built_book(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The HTML folder of the book, built once for the whole session: with several test
    processes (pytest-xdist), the first one that needs the book builds it under a file lock in
    the session's shared folder, and the others wait for it and read what it recorded."""
    reuse = os.environ.get("GPUBOOK_HTML")
    if reuse:
        html = Path(reuse).resolve()
        assert (html / "index.html").is_file(), f"GPUBOOK_HTML={reuse} holds no index.html"
        return html
    if os.environ.get("GPUBOOK_BUILD_DIR"):
        base = Path(os.environ["GPUBOOK_BUILD_DIR"]).resolve()
    else:  # every worker's temporary folder lies in one folder of the session
        root = tmp_path_factory.getbasetemp()
        base = (root.parent if os.environ.get("PYTEST_XDIST_WORKER") else root) / "book"
    base.mkdir(parents=True, exist_ok=True)
    from filelock import FileLock

    # One build per test run: the workers of one run share pytest-xdist's run id.
    run = os.environ.get("PYTEST_XDIST_TESTRUNUID") or f"process {os.getpid()}"
    with FileLock(str(base) + ".lock"):
        state_file = base / "built.json"
        state = json.loads(state_file.read_text()) if state_file.is_file() else {}
        prebuilt = state.get("prebuilt") is not None and state.get("prebuilt") == sources_digest()
        if state.get("run") != run and not prebuilt:
            _announce(f"building the book into {base} (every chapter executed; minutes). "
                      "GPUBOOK_HTML=<an HTML build> reuses one instead; see the README.")
            state = dict(_build_book(base), run=run)
            state_file.write_text(json.dumps(state))
    if not state["ok"]:
        pytest.fail(state["message"])
    _BUILT["kernels"] = Path(state["kernels"])
    if state.get("manifest"):
        _BUILT["manifest"] = Path(state["manifest"])
    _BUILT["export"] = Path(state["export"])
    _SECONDS.update(state["seconds"])
    _SAMPLE[:] = state["sample"]
    return base / "html"


def _announce(message: str) -> None:
    """A line on the terminal even where pytest captures the test's output (sys.__stderr__ is the
    process's own stream; under pytest-xdist a worker's is the terminal too)."""
    print(f"\n[gpubook tests] {message}", file=sys.__stderr__, flush=True)


def _build_book(base: Path) -> dict:
    """Build the book into base/html with every chapter executed afresh: the README's first
    build (execution cache on, the cache empty, one reading process per core); returns what
    the tests read of it (or the failure)."""
    html = base / "html"
    kernels = base / "kernels"
    shutil.rmtree(kernels, ignore_errors=True)  # written afresh by this build, never read by it
    shutil.rmtree(base / "cache", ignore_errors=True)  # an empty execution cache: every chapter runs
    env = dict(os.environ, GPUBOOK_EXECUTION="cache", GPUBOOK_CACHE=str(base / "cache"),
               GPUBOOK_KERNEL_CACHE=str(kernels), GPUBOOK_KERNEL_CACHE_MODE="write")
    # Every chapter records the kernels it builds (gpubook.verify.manifest), which
    # tests/test_manifest.py compares with the committed results/manifest/kernels.json.
    from gpubook.verify import manifest

    built = base / "manifest"
    shutil.rmtree(built, ignore_errors=True)
    env[manifest.MANIFEST_ENV] = str(built)
    # Every Blackwell-only check must have a good simulation of its current script (a stale
    # fingerprint fails the build), and the build exports the day's rotating sample of them,
    # which tests/test_simulate.py simulates again.
    from gpubook import export
    from gpubook.verify import sim_records

    env[check_env()] = "1"
    sample = sim_records.rotation()
    export_dir = base / "export"
    shutil.rmtree(export_dir, ignore_errors=True)
    if sample:
        env[export.EXPORT_ENV] = str(export_dir)
        env[export.EXPORT_ONLY_ENV] = "^(" + "|".join(re.escape(c["case"]) for c in sample) + ")$"
    # -j auto: chapters execute in one process per core (myst-nb and gpubook's extension are
    # parallel-read safe), the longest first by the recorded build times (gpubook.book.budget).
    cmd = [sys.executable, "-m", "sphinx", "-W", "-j", "auto", "-b", "html", "-d", str(base / "doctrees"),
           str(ROOT), str(html)]
    proc = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True)
    log = proc.stdout + proc.stderr
    (base / "build.log").write_text(log)
    if proc.returncode != 0:
        return {"ok": False, "message": f"sphinx-build failed ({proc.returncode}); log in "
                f"{base / 'build.log'}:\n" + log[-4000:]}
    return {"ok": True, "kernels": str(kernels), "export": str(export_dir), "sample": sample,
            "manifest": str(built),
            "seconds": {Path(m[0]).stem: float(m[1]) for m in
                        re.findall(r"(\S+\.md): Executed notebook in ([0-9.]+) seconds", log)}}


def sources_digest() -> str | None:
    """A digest of every file git tracks (the build-time record excepted, which builds rewrite),
    as they are on disk now; None outside a git checkout."""
    import hashlib

    try:
        listed = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    h = hashlib.sha256()
    from gpubook.book.budget import RECORD

    for name in sorted(n for n in listed.decode().split("\0") if n and n != RECORD):
        path = ROOT / name
        h.update(name.encode() + b"\0" + (path.read_bytes() if path.is_file() else b"(absent)") + b"\0")
    return h.hexdigest()


def check_env() -> str:
    from gpubook.verify.check import REQUIRE_SIMULATED_ENV

    return REQUIRE_SIMULATED_ENV


def book_export() -> tuple[Path, list[dict]] | None:
    """The cases this session's book build exported and the sample they were chosen as (the
    day's rotating simulation sample, chosen once when the build began: a session that runs past
    midnight checks the cases its build exported, not the next day's), if any."""
    found = _BUILT.get("export")
    if found is None or not (found / "cases").is_dir():
        return None
    return found, list(_SAMPLE)


# What the book build of this session compiled (gpubook.build.kernel_cache) and exported.
_BUILT: dict[str, Path] = {}
_SAMPLE: list[dict] = []
_SECONDS: dict[str, float] = {}


def _await_book(request: pytest.FixtureRequest) -> None:
    """When this run builds the book (a test marked `book` is selected), wait for that build: in
    a run of several processes, the one asking may not be the one that builds."""
    if any(item.get_closest_marker("book") for item in request.session.items):
        request.getfixturevalue("built_book")


@pytest.fixture(scope="session")
def book_notebook_seconds(request: pytest.FixtureRequest) -> dict[str, float] | None:
    """How long this session's book build took to execute each chapter (by stem), or None when
    no book was built in this session."""
    _await_book(request)
    return dict(_SECONDS) if _SECONDS else None


@pytest.fixture(scope="session")
def book_kernel_cache(request: pytest.FixtureRequest) -> Path | None:
    """The build cache that this session's book build wrote (every kernel it compiled, keyed
    by script and toolchain), or None when no book was built in this session (GPUBOOK_HTML, or
    a run without the book tests): the notebooks test reads it instead of compiling again."""
    _await_book(request)
    found = _BUILT.get("kernels")
    return found if found is not None and found.is_dir() else None


@pytest.fixture(scope="session")
def book_manifest(request: pytest.FixtureRequest) -> tuple[Path, list[str]] | None:
    """The kernels this session's book build recorded (a folder of `<chapter>.jsonl`, see
    gpubook.verify.manifest) and the chapters it executed, or None when no book was built in
    this session."""
    _await_book(request)
    found = _BUILT.get("manifest")
    return (found, sorted(_SECONDS)) if found is not None and _SECONDS else None


@pytest.fixture(scope="session")
def served_book(built_book: Path) -> Iterator[str]:
    """Base URL (ending in '/') of the built book served by http.server on 127.0.0.1."""
    from browser_support import serve

    with serve(built_book) as base:
        yield base


@pytest.fixture(scope="session")
def demo_site(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A base URL that serves ``_static/`` laid out as in the built book (``open_demo(browser,
    demo_site, name)`` opens ``_static/demos/<name>.html``), copied from the source tree with
    the ``demos/book-data.js`` that the build writes from gpubook.facts.hardware: what the tests of
    a single demo need, without a book build."""
    from browser_support import serve
    from gpubook import sphinxext

    site = tmp_path_factory.mktemp("demo-site")
    shutil.copytree(ROOT / "_static", site / "_static")
    sphinxext.write_demo_facts(site / "_static")
    with serve(site) as base:
        yield base
