"""Sphinx extension of the book: a "Runs on" badge and a notebook download link on each chapter,
the facts the demos read, and a build output without the theme's template leftovers.

The badge counts the kernels appendix A lists for the chapter (`gpubook.verify.matrix`), the
count the chapter's opening box gives (`gpubook.book.headline`), grouped by where they run:
sm_90+ (portable), sm_90a (Hopper only, wgmma) and sm_100a (Blackwell only); a page of several
groups names each with its count. A page of no recorded kernel falls back on its compile
reports ("compiled for sm_100a (+sm_90a)", "... only"). Whether the page launches any kernel is
read off its checks, which say where they passed (here, or in a replay) or why they did not
run here. The download link points at the chapter's notebook under ``_notebooks/``
(its jupytext pair, glued values filled in: ``gpubook.book.reading``).

The interactive demos under ``_static/demos/`` take every hardware number they show from
``_static/demos/book-data.js``, written here at build time from ``gpubook.hardware``: the
demos never carry a spec number of their own.
"""

from __future__ import annotations

import html
import json
import os
import re
import time
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import sphinx.builders
from docutils import nodes
from sphinx.application import Sphinx
from sphinx.util import logging

from ..verify.describe import MATRIX_PAGE
from . import budget

logger = logging.getLogger(__name__)

NOTEBOOK_DIR = "_notebooks"
# "<name>: compiled for sm_100a (+sm_90a)" or "<name>: compiled for sm_100a only"
_REPORT = re.compile(r"([\w.\-]+): compiled for (sm_\w+)(?: \(\+([\w, ]+)\)| only)")
# data attributes on the report div, when the report carries them
_ATTR = re.compile(r'data-kernel="([^"]+)"[^>]*data-runs-on="([^"]+)"|data-runs-on="([^"]+)"[^>]*data-kernel="([^"]+)"')
# A check that passed on this machine (CheckResult: "PASSED <name> here, on an H200 (sm_90a): ...")
_PASS = re.compile(r"\bPASSED [\w.\-]+ here, on (?:an? )?(.+?) \((sm_\w+)\)")
# A check or a timing that could not run on this machine: its own NOT RUN / NOT MEASURED line,
# or the "not run here" / "not measured here" line under what a replay or a simulation found.
_NOT_RUN = re.compile(r"\bNOT (?:RUN|MEASURED)\b|\bnot (?:run|measured) here: ")
# The verification matrix: its page, and how a printed verdict names it.
MATRIX_DOC = "chapters/" + MATRIX_PAGE.removesuffix(".html")
_MATRIX_TEXT = re.compile(r" \(appendix A, " + re.escape(MATRIX_PAGE) + r"\)")


@dataclass
class PageTiers:
    """What the outputs of one executed page say about its kernels."""

    kernels: dict[str, tuple[str, ...]] = field(default_factory=dict)  # name -> runs_on
    passed_on: set[str] = field(default_factory=set)  # "B200 (sm_100a)"
    not_run: int = 0

    def read(self, text: str) -> None:
        """Collect the kernel reports and check results found in one output's text."""
        for m in _ATTR.finditer(text):
            name, runs = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
            self.kernels[name] = tuple(runs.split())
        for m in _REPORT.finditer(html.unescape(text)):
            also = tuple(a.strip() for a in (m.group(3) or "").split(",") if a.strip())
            self.kernels.setdefault(m.group(1), (m.group(2),) + also)
        for m in _PASS.finditer(text):
            self.passed_on.add(f"{m.group(1)} ({m.group(2)})")
        self.not_run += len(_NOT_RUN.findall(text))

    @property
    def checked(self) -> bool:
        return bool(self.passed_on) or self.not_run > 0

    def use_rows(self, kernel_archs: list[tuple[str, tuple[str, ...]]]) -> None:
        """Count the page's kernels from appendix A's rows (`matrix.kernel_archs` of the chapter's
        `matrix.kernel_rows`), the rows the opening box counts, instead of the reports shown."""
        self.kernels = {f"{name}#{i}": tuple(runs) for i, (name, runs) in enumerate(kernel_archs)}

    def names(self, keys: list[str]) -> list[str]:
        return [k.split("#", 1)[0] for k in keys]

    def groups(self) -> dict[str, list[str]]:
        """The page's kernels by where they run: 'sm_90+' (Hopper and Blackwell), 'sm_90a'
        (Hopper only: wgmma) and 'sm_100a' (Blackwell only), largest group first."""
        found: dict[str, list[str]] = {"sm_90+": [], "sm_90a": [], "sm_100a": []}
        for k, r in self.kernels.items():
            hopper, blackwell = any(a.startswith("sm_90") for a in r), any(a.startswith("sm_100") for a in r)
            found["sm_90+" if hopper and blackwell else "sm_90a" if hopper else "sm_100a"].append(k)
        return dict(sorted(((g, ks) for g, ks in found.items() if ks), key=lambda g: -len(g[1])))

    def tier(self) -> tuple[str, str, str]:
        """(css modifier, label, explanation) of the page's Runs-on badge. A page whose kernels
        run on different GPUs names each group with its count: 'sm_90a (35 kernels), sm_90+ (4)'."""
        n = len(self.kernels)
        if n == 0:
            return "any", "any machine", "This page builds no kernel: its cells run on any machine."
        one = n == 1
        count = kernels_of_the_page(n)
        is_, compiles, runs = ("is", "compiles", "runs") if one else ("are", "compile", "run")
        if not self.checked:
            return ("compile", "compile-only",
                    f"{count} {is_} compiled for sm_100a and inspected; none is launched on this page.")
        groups = self.groups()
        if len(groups) == 1:
            g = next(iter(groups))
            if g == "sm_90a":
                return ("sm90", "sm_90a only",
                        f"{count} {compiles} for and {runs} on Hopper (sm_90a) only: wgmma has no sm_100a form.")
            if g == "sm_90+":
                return ("sm90", "sm_90+",
                        f"{count} {compiles} anywhere and {runs} on Hopper (sm_90a) and Blackwell (sm_100a).")
            return ("b200", "B200 only",
                    f"{count} {compiles} anywhere and {runs} on a Blackwell B200 (sm_100a) only.")
        label = ", ".join(f"{g} ({len(ks)} kernel{'s' * (len(ks) > 1)})" if i == 0 else f"{g} ({len(ks)})"
                          for i, (g, ks) in enumerate(groups.items()))
        said = {"sm_90+": "{run} on Hopper (sm_90a) and Blackwell (sm_100a)",
                "sm_90a": "{run} on Hopper (sm_90a) only: wgmma has no sm_100a form",
                "sm_100a": "{need} a Blackwell B200 (sm_100a)"}
        parts = []
        for g, ks in groups.items():
            k = len(ks)
            who = ", ".join(self.names(ks)) if k <= 3 else str(k)
            parts.append(f"{who} " + said[g].format(run="runs" if k == 1 else "run", need="needs" if k == 1 else "need"))
        mod = {"sm_90+": "sm90", "sm_90a": "sm90", "sm_100a": "b200"}[next(iter(groups))]
        return f"{mod} gpubook-badge--mixed", label, f"Of the page's {n} kernels, " + "; ".join(parts) + "."

    def build_note(self) -> str | None:
        """What happened to the kernels on the machine that built this page."""
        if self.passed_on:
            return "This build: checked on " + ", ".join(sorted(self.passed_on))
        if self.not_run:
            return "This build: compiled only (no suitable GPU)"
        return None


_ROWS: dict[str, list[dict[str, Any]]] = {}


def chapter_kernels(chapter: str, table_rows: list[dict[str, Any]] | None = None) -> list[tuple[str, tuple[str, ...]]]:
    """(name, archs) of each kernel appendix A lists for `chapter` (`matrix.kernel_rows`, read
    once per process): the kernels the badge counts, the same the opening box counts."""
    from ..verify import matrix

    if table_rows is None:
        if "all" not in _ROWS:
            _ROWS["all"] = matrix.kernel_rows()
        table_rows = _ROWS["all"]
    return matrix.kernel_archs([r for r in table_rows if r["chapter"] == chapter])


def kernels_of_the_page(n: int) -> str:
    """How a badge names the page's kernels: 'The one kernel of the page', 'Both kernels of the
    page', 'All 5 kernels of the page'."""
    if n == 1:
        return "The one kernel of the page"
    if n == 2:
        return "Both kernels of the page"
    return f"All {n} kernels of the page"


def link_matrix(body: str, href: str) -> str:
    """A verdict printed as text names appendix A as " (appendix A, A-verification-matrix.html)"
    (gpubook.verify.check.CheckResult's plain form); in the page it becomes the link that a
    displayed verdict carries (" — <a href=...>appendix A</a>"), so every verdict reads alike."""
    return _MATRIX_TEXT.sub(f' — <a href="{html.escape(href)}">appendix A</a>', body)


def on_html_page_context(app: Sphinx, pagename: str, templatename: str, context: dict[str, Any],
                         doctree: Any) -> None:
    if "body" in context and _MATRIX_TEXT.search(context["body"]):
        context["body"] = link_matrix(context["body"], context["pathto"](MATRIX_DOC))


def _output_text(node: nodes.Node) -> str:
    if isinstance(node, nodes.raw):
        return node.astext() if "html" in node.get("format", "").split() else ""
    return node.astext()


def _in_cell_output(node: nodes.Node) -> bool:
    parent = node.parent
    while parent is not None:
        if "cell_output" in parent.get("classes", []):
            return True
        parent = parent.parent
    return False


def notebook_of(app: Sphinx, docname: str) -> Path | None:
    """The paired notebook of a chapter, or None when the page has none."""
    if not docname.startswith("chapters/"):
        return None
    path = Path(app.srcdir) / app.config.gpubook_notebooks / (Path(docname).name + ".ipynb")
    return path if path.is_file() else None


def read_page(doctree: nodes.document) -> PageTiers:
    """Scan the cell outputs of an executed page."""
    tiers = PageTiers()
    for node in doctree.findall(lambda n: isinstance(n, (nodes.raw, nodes.literal_block))):
        if _in_cell_output(node):
            tiers.read(_output_text(node))
    return tiers


def page_bar(app: Sphinx, docname: str, tiers: PageTiers) -> str:
    """The HTML of the bar under a chapter's title: badge, build note, download link."""
    mod, label, why = tiers.tier()
    parts = [
        f'<span class="gpubook-badge gpubook-badge--{mod}" data-tier="{html.escape(label)}" '
        f'title="{html.escape(why)}">Runs on <strong>{html.escape(label)}</strong></span>',
    ]
    # a mixed page says which kernels need what; otherwise the badge's title says it all
    shown = "gpubook-build-note" if "mixed" in mod else "gpubook-visually-hidden"
    parts.append(f'<span class="{shown}">{html.escape(why)}</span>')
    note = tiers.build_note()
    if note:
        parts.append(f'<span class="gpubook-build-note">{html.escape(note)}</span>')
    nb = notebook_of(app, docname)
    if nb is not None:
        up = "../" * docname.count("/")
        href = f"{up}{NOTEBOOK_DIR}/{nb.name}"
        parts.append(
            f'<a class="gpubook-download" href="{href}" download="{nb.name}" '
            f'type="application/x-ipynb+json">Download notebook (.ipynb)</a>'
        )
    return '<div class="gpubook-pagebar" role="note" aria-label="About this chapter">' + "".join(parts) + "</div>"


def on_doctree_resolved(app: Sphinx, doctree: nodes.document, docname: str) -> None:
    if app.builder.format != "html" or notebook_of(app, docname) is None:
        return
    tiers = read_page(doctree)
    archs = chapter_kernels(Path(docname).name)
    if archs:  # the kernels appendix A lists for this chapter, as the opening box counts them
        tiers.use_rows(archs)
    bar = nodes.raw("", page_bar(app, docname, tiers), format="html")
    section = next(iter(doctree.findall(nodes.section)), None)
    if section is not None and section.children and isinstance(section[0], nodes.title):
        section.insert(1, bar)
    else:
        doctree.insert(0, bar)


def demo_facts() -> dict[str, Any]:
    """The hardware facts the demos read (``window.GPUBOOK``), computed from gpubook.hardware."""
    from ..facts import hardware as hw

    gpus = {}
    for name in ("B200", "H200", "H100"):
        g = hw.GPUS[name]
        clock = g.tensor_clock_hz
        gpus[name] = {
            "name": g.name, "arch": g.arch, "sms": g.sms, "clock_hz": clock,
            "bf16_flops": g.bf16_flops, "fp8_flops": g.fp8_flops, "hbm_bandwidth": g.hbm_bandwidth,
            "ridge_bf16": g.ridge_bf16,
            # FMA = 2 FLOP per result; SFU ops count one per result
            "fp32_flops": g.fp32_flops, "sfu_ops": g.sfu_rate,
            "smem_per_sm": g.smem_per_sm, "tmem_per_sm": g.tmem_per_sm,
        }
    return {
        "source": hw.SOURCES, "gpus": gpus,
        "fp32_per_sm_per_clk": hw.B200.fp32_lanes_per_sm,
        "sfu_per_sm_per_clk": hw.B200.sfu_per_sm,
        "warp_size": hw.WARP_SIZE, "smem_banks": hw.SMEM_BANKS, "smem_bank_bytes": hw.SMEM_BANK_BYTES,
    }


def write_demo_facts(static: Path) -> Path:
    """Write ``demos/book-data.js`` (a script that sets ``window.GPUBOOK``) under `static`."""
    out = static / "demos" / "book-data.js"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text("// Written at build time from gpubook.hardware by gpubook.sphinxext; do not edit.\n"
                   f"window.GPUBOOK = {json.dumps(demo_facts(), indent=1, sort_keys=True)};\n")
    return out


# Files a theme keeps in its static folder for its own templates, never read by a page.
THEME_LEFTOVERS = ("webpack-macros.html",)


def on_build_finished(app: Sphinx, exc: Exception | None) -> None:
    if exc is not None or app.builder.format != "html":
        return
    static = Path(app.outdir) / "_static"
    # pydata-sphinx-theme ships its Jinja macros in its static folder, and Sphinx copies that
    # folder whole: the macros would be published as a page of template code.
    for name in THEME_LEFTOVERS:
        (static / name).unlink(missing_ok=True)
    write_demo_facts(static)  # the notebooks under _notebooks/: gpubook.book.reading


# -- build times: the reading order, and each executed chapter's seconds (gpubook.book.budget) --
_BUILD: dict[str, Any] = {}


def record_path(app: Sphinx) -> Path:
    return Path(app.srcdir) / app.config.gpubook_build_times


def on_builder_inited(app: Sphinx) -> None:
    _BUILD.clear()
    _BUILD.update(began=budget.process_start(), utc=datetime.now(timezone.utc).replace(tzinfo=None),
                  afresh=budget.kernels_afresh(os.environ))


def order_reading(app: Sphinx, env: Any, docnames: list[str]) -> None:
    """Hand the readers the recorded chapters longest first, pages of no record before them."""
    record = budget.load(record_path(app))
    docnames[:] = budget.reading_order(docnames, record.chapters if record else {},
                                       budget.source_size(Path(app.srcdir)))
    _BUILD.update(read=list(docnames), read_from=time.time())


def on_env_updated(app: Sphinx, env: Any) -> None:
    """Note the seconds of the pages myst-nb executed in this build. A page served from its
    cache reports the time of the run that filled the cache, so in cache mode a page counts
    only when its cache record was made during this build."""
    if "read" not in _BUILD:
        return
    from myst_nb.sphinx_ import NbMetadataCollector

    _BUILD["read_until"] = time.time()
    ran = budget.succeeded({d: NbMetadataCollector.get_exec_data(env, d) for d in _BUILD["read"]})
    fresh = set(ran)
    if app.config.nb_execution_mode == "cache":
        from jupyter_cache import get_cache

        records = get_cache(app.config.nb_execution_cache_path or ".jupyter_cache").list_cache_records()
        made = budget.made_since(((r.uri, r.created) for r in records), _BUILD["utc"])
        fresh = {d for d in ran if str(Path(env.doc2path(d)).absolute()) in made}
    _BUILD["executed"], _BUILD["cached"] = {d: ran[d] for d in fresh}, len(ran) - len(fresh)


def record_build_times(app: Sphinx, exc: Exception | None) -> None:
    """Write the seconds of the chapters this build executed, its kernels compiled afresh, into
    the record; a build that executed every page records what it spent outside the reading."""
    if not _BUILD.get("executed"):
        return
    if app.config.gpubook_preview:
        logger.info("build times: not recorded (a preview of some pages)")
        return
    if not _BUILD["afresh"]:
        logger.info("build times: not recorded (kernels read from a warm build cache)")
        return
    path, full = record_path(app), None
    if exc is None and not _BUILD["cached"] and set(_BUILD["read"]) == set(app.env.found_docs):
        reading = _BUILD["read_until"] - _BUILD["read_from"]
        full = (time.time() - _BUILD["began"] - reading, reading, app.parallel)
    times = budget.updated(budget.load(path), _BUILD["executed"], app.env.found_docs, full)
    if budget.write(path, times):
        n = len(_BUILD["executed"])
        logger.info(f"build times: {n} chapter time{'s' * (n != 1)} written to {path.name}")


def open_execution_cache(app: Sphinx) -> None:
    """Create the execution cache's database before the reading processes start.

    myst-nb opens the cache lazily in each process that executes a page; on a first build with
    `-j` two processes then create the same tables at once and one of them fails ("table settings
    already exists"). Opened once here, in the main process, every reader finds it made."""
    if app.config.nb_execution_mode != "cache":
        return
    from jupyter_cache import get_cache

    get_cache(app.config.nb_execution_cache_path or ".jupyter_cache").db  # noqa: B018 - creates the tables


def setup(app: Sphinx) -> dict[str, Any]:
    # The readers take one page at a time, in the order `order_reading` gives.
    sphinx.builders.make_chunks = budget.one_page_per_task
    sphinx.builders.ParallelTasks = budget.InOrderTasks
    from ..run.jupyter import quiet_kernels

    quiet_kernels()
    app.add_config_value("gpubook_notebooks", "notebooks", "html")
    # conf.py sets it to a digest of results/ and gpubook/: a change re-reads (re-executes) every page
    app.add_config_value("gpubook_inputs_digest", "", "env")
    app.add_config_value("gpubook_build_times", budget.RECORD, "")
    app.add_config_value("gpubook_preview", False, "")  # conf.py: True when GPUBOOK_PAGES leaves pages out
    app.connect("builder-inited", open_execution_cache)
    app.connect("builder-inited", on_builder_inited)
    app.connect("env-before-read-docs", order_reading)
    app.connect("env-updated", on_env_updated)
    app.connect("build-finished", record_build_times, priority=900)
    app.connect("doctree-resolved", on_doctree_resolved)
    app.connect("html-page-context", on_html_page_context)
    app.connect("build-finished", on_build_finished)
    return {"version": "1", "parallel_read_safe": True, "parallel_write_safe": True}
