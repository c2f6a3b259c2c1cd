"""The Runs-on badge logic of gpubook.sphinxext, on outputs written out by hand."""

from __future__ import annotations

from pathlib import Path

import pytest

from gpubook.book.sphinxext import PageTiers

PORTABLE = '<div class="gpubook-report"><code>vadd: compiled for sm_100a (+sm_90a) · 12 regs</code></div>'
BLACKWELL = '<div class="gpubook-report"><code>gemm_tcgen05: compiled for sm_100a only · 90 regs</code></div>'
NOT_RUN = "NOT RUN vadd: no GPU on this machine (compiled for sm_100a or sm_90a); no record of this kernel yet"
REPLAYED = ("PASSED vadd on an H200 (replay of 2026-11-30): max error 0 (exact)\n"
            "  not run here: no GPU on this machine (compiled for sm_100a or sm_90a)")
PASSED = "PASSED vadd here, on a B200 (sm_100a): max error 0 (exact)"
HOPPER = '<div class="gpubook-report"><code>gemm_wgmma: compiled for sm_90a only · 90 regs</code></div>'


def tiers(*outputs: str) -> PageTiers:
    t = PageTiers()
    for o in outputs:
        t.read(o)
    return t


@pytest.mark.parametrize(("outputs", "label"), [
    ((), "any machine"),
    ((PORTABLE,), "compile-only"),
    ((PORTABLE, NOT_RUN), "sm_90+"),
    ((BLACKWELL, NOT_RUN), "B200 only"),
    ((PORTABLE, REPLAYED), "sm_90+"),
    ((PORTABLE, BLACKWELL, NOT_RUN), "sm_90+ (1 kernel), sm_100a (1)"),
    ((HOPPER, NOT_RUN), "sm_90a only"),
    ((HOPPER, PORTABLE.replace("vadd", "probe"), HOPPER.replace("gemm_wgmma", "gemm_wgmma2"), NOT_RUN),
     "sm_90a (2 kernels), sm_90+ (1)"),
    (('<div class="gpubook-report" data-kernel="k" data-runs-on="sm_100a sm_90a"><code>k</code></div>', NOT_RUN),
     "sm_90+"),
    (('<div class="gpubook-report" data-runs-on="sm_100a" data-kernel="k"><code>k</code></div>', NOT_RUN),
     "B200 only"),
])
def test_tier_of_a_page(outputs: tuple[str, ...], label: str) -> None:
    assert tiers(*outputs).tier()[1] == label


def test_a_mixed_page_names_the_blackwell_kernels() -> None:
    mod, _, why = tiers(PORTABLE, BLACKWELL, NOT_RUN).tier()
    assert "mixed" in mod and "gemm_tcgen05 needs a Blackwell B200" in why and "Of the page's 2 kernels" in why
    assert "vadd runs on Hopper (sm_90a) and Blackwell (sm_100a)" in why


def test_a_page_of_hopper_only_kernels_and_portable_probes_says_both() -> None:
    """Chapter 10H's case: wgmma kernels beside two portable probes is not 'sm_90+'."""
    t = PageTiers(not_run=1)
    t.use_rows([(f"gemm_h{i}", ("sm_90a",)) for i in range(12)] + [("probe_a", ("sm_100a", "sm_90a")),
                                                                  ("probe_b", ("sm_100a", "sm_90a"))])
    mod, label, why = t.tier()
    assert label == "sm_90a (12 kernels), sm_90+ (2)" and "mixed" in mod
    assert why.startswith("Of the page's 14 kernels, 12 run on Hopper (sm_90a) only")
    assert "probe_a, probe_b run on Hopper (sm_90a) and Blackwell (sm_100a)" in why


def _count(text: str) -> int:
    """The kernel count a badge's explanation or an opening box's sentence states."""
    import re

    for pattern, n in ((r"The one kernel of the page", 1), (r"Both kernels of the page", 2)):
        if re.search(pattern, text):
            return n
    m = re.search(r"(?:Of its|All|Of the page's) (\d+) kernels?\b", text)
    assert m, text
    return int(m.group(1))


def test_the_badge_counts_what_the_opening_box_counts_on_every_chapter() -> None:
    """For every chapter of appendix A's rows, the Runs-on badge and the opening box's sentence
    (gpubook.book.headline.tally) state one kernel count, from the same rows."""
    from gpubook.book import headline
    from gpubook.book.sphinxext import chapter_kernels
    from gpubook.verify import matrix

    rows = matrix.kernel_rows()
    chapters = sorted({r["chapter"] for r in rows})
    assert len(chapters) >= 15, chapters
    total = 0
    for chapter in chapters:
        box = headline.tally(chapter, rows)
        for checked in (True, False):          # the compile-only badge counts the same kernels
            t = PageTiers(not_run=int(checked))
            t.use_rows(chapter_kernels(chapter, rows))
            _, label, why = t.tier()
            assert _count(why) == _count(box), (chapter, why, box)
        total += _count(box)
    assert total == matrix.counts(rows)["kernels"]  # the badges sum to appendix A's count
    # and the badge's groups are the builds' archs: 10H mixes wgmma kernels and portable probes
    t = PageTiers(not_run=1)
    t.use_rows(chapter_kernels("10H-gemm-hopper", rows))
    assert set(t.groups()) == {"sm_90a", "sm_90+"}


def test_the_build_note_says_what_ran() -> None:
    assert tiers(PORTABLE, NOT_RUN).build_note() == "This build: compiled only (no suitable GPU)"
    assert tiers(PORTABLE, REPLAYED).build_note() == "This build: compiled only (no suitable GPU)"
    assert tiers(PORTABLE, PASSED).build_note() == "This build: checked on B200 (sm_100a)"
    assert tiers(PORTABLE).build_note() is None


def test_a_kernel_repeated_in_a_check_counts_once() -> None:
    t = tiers(PORTABLE, NOT_RUN + "\n  static facts: vadd: compiled for sm_100a (+sm_90a) · 12 regs")
    assert list(t.kernels) == ["vadd"]


def test_parallel_reading_takes_one_page_per_task_largest_first(tmp_path):
    """With no recorded build times, the largest sources first (gpubook.book.budget)."""
    from sphinx.util.parallel import make_chunks as sphinx_chunks

    from gpubook.book import budget

    (tmp_path / "chapters").mkdir()
    sizes = {"chapters/01-a": 10, "chapters/02-b": 500, "chapters/03-c": 40, "chapters/11B-d": 900, "index": 5}
    for name, n in sizes.items():
        (tmp_path / f"{name}.md").write_text("x" * n)
    names = sorted(sizes)
    chunks = budget.one_page_per_task(budget.reading_order(names, {}, budget.source_size(tmp_path)), 2)
    assert chunks == [["chapters/11B-d"], ["chapters/02-b"], ["chapters/03-c"], ["chapters/01-a"], ["index"]]
    # Sphinx's own split would put the two largest pages into the same process
    many = [f"chapters/{i:02d}" for i in range(18)]
    assert len(sphinx_chunks(many, 2)[0]) == 9


def test_the_execution_cache_is_made_before_the_readers_fork(tmp_path):
    """A first build with -j: every reading process opens the execution cache; made once in the
    main process, none of them creates its tables (two at once fail: "table settings already exists")."""
    import sqlite3
    import subprocess
    import sys
    from types import SimpleNamespace

    from gpubook.book.sphinxext import open_execution_cache

    cache = tmp_path / "cache"
    off = SimpleNamespace(config=SimpleNamespace(nb_execution_mode="force", nb_execution_cache_path=str(cache)))
    open_execution_cache(off)
    assert not cache.exists()  # a forced build keeps no cache
    app = SimpleNamespace(config=SimpleNamespace(nb_execution_mode="cache", nb_execution_cache_path=str(cache)))
    open_execution_cache(app)
    tables = {r[0] for r in sqlite3.connect(cache / "global.db").execute("select name from sqlite_master")}
    assert {"settings", "nbcache", "nbproject"} <= tables
    # what each reading process then does, two at once: both find the tables made
    code = f"from jupyter_cache import get_cache; get_cache({str(cache)!r}).db; print('ok')"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(2)]
    outs = [p.communicate(timeout=120) for p in procs]
    assert all(p.returncode == 0 and o.strip() == "ok" for p, (o, _) in zip(procs, outs)), outs


@pytest.mark.parametrize(("n", "count"), [
    (1, "The one kernel of the page is"), (2, "Both kernels of the page are"), (3, "All 3 kernels of the page are"),
])
def test_the_badge_names_a_few_kernels_as_one_would_say_it(n: int, count: str) -> None:
    reports = [f'<div class="gpubook-report" data-kernel="k{i}" data-runs-on="sm_100a sm_90a"><code>k{i}</code></div>'
               for i in range(n)]
    _, label, why = tiers(*reports).tier()
    assert label == "compile-only" and why.startswith(f"{count} compiled for sm_100a and inspected")
    _, _, why = tiers(*reports, NOT_RUN).tier()
    assert why.startswith(count.rsplit(" ", 1)[0] + (" compiles" if n == 1 else " compile"))


def test_a_printed_verdict_links_the_matrix_as_a_displayed_one_does() -> None:
    """A verdict printed (the plain form, CheckResult.__repr__) and one displayed (its HTML form)
    both end in a link to appendix A on the page."""
    from types import SimpleNamespace

    from gpubook.book.sphinxext import link_matrix, on_html_page_context
    from gpubook.verify.check import CheckResult

    result = CheckResult("vadd", "not run", reason="no GPU (compiled for sm_100a)", facts="vadd: …",
                         recorded={"status": "passed", "max_abs_error": 0.0, "sanitizer": {"memcheck": "clean"},
                                   "run": {"gpu": "NVIDIA H200", "date": "2026-12-01"}})
    printed = "<pre>" + html_escape(repr(result)) + "</pre>"
    linked = ' — <a href="A-verification-matrix.html">appendix A</a>'
    assert linked in result._repr_html_()
    assert link_matrix(printed, "A-verification-matrix.html").count(linked) == 1
    assert "A-verification-matrix.html)" not in link_matrix(printed, "A-verification-matrix.html")
    context = {"body": printed, "pathto": lambda doc: {"chapters/A-verification-matrix": "../x/A.html"}[doc]}
    on_html_page_context(SimpleNamespace(), "chapters/10H-gemm-hopper", "page.html", context, None)
    assert ' — <a href="../x/A.html">appendix A</a>' in context["body"]
    untouched = {"body": "<p>appendix A</p>", "pathto": None}
    on_html_page_context(SimpleNamespace(), "index", "page.html", untouched, None)
    assert untouched["body"] == "<p>appendix A</p>"


def html_escape(text: str) -> str:
    import html

    return html.escape(text)


def test_chapter_kernels_start_without_the_kernel_applications_warnings(tmp_path) -> None:
    """A chapter's kernel prints no warning of its own (the unencrypted-TCP line, once per chapter)
    and still runs cells, from a working directory other than the client's, as chapters do."""
    import subprocess
    import sys

    script = ("import nbformat\n"
              "from nbclient import NotebookClient\n"
              "from gpubook.run.jupyter import quiet_kernels\n"
              "quiet_kernels()\n"
              "nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell('print(6 * 7)')])\n"
              f"NotebookClient(nb, timeout=60, resources={{'metadata': {{'path': {str(tmp_path)!r}}}}}).execute()\n"
              "print(nb.cells[0].outputs[0]['text'].strip())\n")
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=120,
                          cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip().endswith("42")
    assert "WARNING" not in proc.stderr, proc.stderr
