"""Sphinx configuration of the book: myst-nb executes every chapter on every build."""

import os

project = "Taming Blackwell"
author = "The Taming Blackwell authors"
copyright = "2026, " + author

extensions = ["myst_nb", "sphinx_design", "sphinx_copybutton", "gpubook.book.sphinxext", "gpubook.book.reading",
              "gpubook.book.kernel_links", "gpubook.book.tables"]
exclude_patterns = [
    "_build", ".venv", "notebooks", "README.md", "tests", ".pytest_cache", "**/.ipynb_checkpoints",
    ".jupyter_cache", ".kernel_cache", ".export*", ".selftest*", ".gpu-runtime", "results",
    ".venv-sim",  # the simulator's interpreter: its packages carry Markdown of their own
    "CONTRIBUTING.md", "gpubook", "chapters/_demos",  # the demos' embed snippets are included by chapters
]
root_doc = "index"
# A preview of some chapters while writing them: GPUBOOK_PAGES=chapters/11H-flash-attention-hopper
# (comma-separated) leaves the other chapters out of the build. Links to them then warn, so a
# preview is built without -W; the book itself is always built whole.
if os.environ.get("GPUBOOK_PAGES"):
    _keep = {p.strip().removesuffix(".md") for p in os.environ["GPUBOOK_PAGES"].split(",") if p.strip()}
    _here = os.path.dirname(os.path.abspath(__file__))
    exclude_patterns += [f"chapters/{name}" for name in sorted(os.listdir(os.path.join(_here, "chapters")))
                         if name.endswith(".md") and f"chapters/{name[:-3]}" not in _keep]
    gpubook_preview = True  # the chapters' build-time record is the whole book's: left as it is

# -- execution: every chapter runs at build time -------------------------------------------
# Locally a jupyter-cache keeps unchanged chapters from running again; GPUBOOK_EXECUTION=force
# (CI, a B200 build) re-runs everything.
nb_execution_mode = os.environ.get("GPUBOOK_EXECUTION", "cache")
nb_execution_cache_path = os.path.join(
    os.path.dirname(os.path.abspath(__file__)), os.environ.get("GPUBOOK_CACHE", ".jupyter_cache")
)


def _inputs_digest() -> str:
    """A digest of what chapters read besides their own code: results/**/*.json and gpubook/**/*.py."""
    import hashlib
    from pathlib import Path

    here = Path(__file__).resolve().parent
    inputs = sorted((here / "results").rglob("*.json")) + sorted((here / "gpubook").rglob("*.py"))
    return hashlib.sha256(
        b"".join(p.relative_to(here).as_posix().encode() + p.read_bytes() for p in inputs)
    ).hexdigest()


def _reset_cache_when_inputs_change(cache: str, digest: str) -> None:
    """The execution cache keys on the chapters' code only: new results or a changed gpubook
    (a figure, a report) void it."""
    import shutil
    from pathlib import Path

    stamp = Path(cache) / "results.sha256"
    if stamp.exists() and stamp.read_text() == digest:
        return
    shutil.rmtree(cache, ignore_errors=True)
    Path(cache).mkdir(parents=True)
    stamp.write_text(digest)


# Sphinx re-reads every page when this value changes (gpubook.sphinxext registers it as an
# "env" setting), so a kept build folder does not serve outputs of the old inputs either.
gpubook_inputs_digest = _inputs_digest()
if nb_execution_mode == "cache":
    _reset_cache_when_inputs_change(nb_execution_cache_path, gpubook_inputs_digest)
# Locally, compiled kernels are kept too (gpubook.build.kernel_cache, keyed by script and
# toolchain): a chapter that runs again compiles only what changed. A forced build compiles all.
if nb_execution_mode == "cache" and "GPUBOOK_KERNEL_CACHE" not in os.environ:
    os.environ["GPUBOOK_KERNEL_CACHE"] = os.path.join(os.path.dirname(os.path.abspath(__file__)), ".kernel_cache")
    os.environ["GPUBOOK_KERNEL_CACHE_MODE"] = "update"
nb_execution_raise_on_error = True
nb_execution_timeout = 600  # seconds per cell: a kernel compile takes about a second
nb_execution_show_tb = True
nb_merge_streams = True
nb_render_markdown_format = "myst"  # Markdown outputs (tables built in cells) render as MyST
nb_kernel_rgx_aliases = {".*": "python3"}
myst_enable_extensions = ["colon_fence", "dollarmath", "amsmath", "deflist", "substitution"]
myst_heading_anchors = 3

# -- HTML ---------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = "Taming Blackwell"
html_static_path = ["_static"]
html_css_files = ["book.css", "print.css"]
# Figures open at full size on a click (a link to the image itself without the script); a
# code line that wraps hangs under its own indentation and breaks only between tokens.
html_js_files = [("lightbox.js", {"defer": "defer"}), ("codelines.js", {"defer": "defer"})]
html_favicon = "_static/favicon.svg"
# Search results take their summaries from the text the build writes (gpubook.book.reading), not
# from fetching each page, which a book opened from disk may not do.
html_show_search_summary = False
# Everything a page needs is served from the build itself: the book reads offline.
mathjax_path = "vendor/mathjax/tex-chtml-full.js"  # MathJax 3.2.2, see _static/vendor/mathjax
# Chapters listed in the left sidebar, from the root, instead of across the header.
templates_path = ["_templates"]
html_sidebars = {"**": ["sidebar-chapters"]}
html_theme_options = {
    "navbar_center": [],
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
    "footer_start": ["copyright"],
    "footer_end": [],
}
html_context = {"default_mode": "auto"}  # follow the reader's system; an empty mode logs a console error
html_last_updated_fmt = None
suppress_warnings = ["mystnb.unknown_mime_type"]
