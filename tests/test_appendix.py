"""Appendix A's builders (gpubook.verify.appendix) and the Sphinx side of its links
(gpubook.book.kernel_links): the summary, a section per chapter, an anchor per kernel, the cell
of each kernel recorded in the manifest, and the folded run log."""

from __future__ import annotations

import re
from types import SimpleNamespace

from docutils import nodes
from docutils.frontend import get_default_settings
from docutils.parsers.rst import Parser
from docutils.utils import new_document

from gpubook.book import kernel_links
from gpubook.compile import hooks
from gpubook.verify import appendix, manifest
from test_manifest import BUILT, RUN, SIM, joined


def test_a_kernel_anchor_is_made_of_its_chapter_and_name_and_numbers_a_repeated_name():
    assert appendix.kernel_id("05-tma-mbarriers", "tma_copy") == "kernel-05-tma-copy"
    assert appendix.kernel_id("10H-gemm-hopper", "gemm_h1", 2) == "kernel-10h-gemm-h1-2"
    ids = appendix.kernel_ids(BUILT["01-execution-model"], "01-execution-model")
    assert ids == ["kernel-01-vadd", "kernel-01-vadd-2", "kernel-01-inspect-only"]
    assert appendix.section_id("10H-gemm-hopper") == "kernels-10h-gemm-hopper"


def test_each_kernel_has_one_anchor_and_the_cell_the_manifest_names():
    built = {c: [dict(k, cell=i + 3) for i, k in enumerate(ks)] for c, ks in BUILT.items()}
    built["08-gemm-basics"][1].pop("cell")  # a build recorded outside a notebook
    from gpubook import matrix

    rows = matrix.kernel_rows_from(built, joined()[1], joined()[2])
    got = appendix.anchors(rows)
    assert len(got) == matrix.counts(rows)["kernels"] == 6
    assert got["01-execution-model", "vadd", "large"] == ("kernel-01-vadd-2", 4)
    assert got["08-gemm-basics", "fa4", "f4"] == ("kernel-08-fa4", None)


def test_the_summary_counts_each_chapter_and_links_its_section(tmp_path):
    rows, _, _ = joined()
    (tmp_path / "01-execution-model.md").write_text("---\n---\n\n# 1. Map the machine\n")
    text = appendix.summary(rows, tmp_path)
    assert text.startswith("```{list-table}") and ":class: gpubook-matrix gpubook-matrix-summary" in text
    items = text.split("\n* - ")[1:]
    assert [i.split("\n")[0] for i in items] == ["chapter", "[1. Map the machine](#kernels-01-execution-model)",
                                                 "[08-gemm-basics](#kernels-08-gemm-basics)",
                                                 "[10H-gemm-hopper](#kernels-10h-gemm-hopper)"]
    cells = lambda item: [ln.removeprefix("  - ") for ln in item.splitlines()[1:] if ln.startswith("  - ")]  # noqa: E731
    # 01: three kernels, all compiled; vadd passed on the H200, its large build was timed (nothing compared)
    assert cells(items[1]) == ["3", "3", "0", "1", "0", "1", "passed on Hopper"]
    assert cells(items[2]) == ["2", "2", "1", "0", "0", "0", "simulated"]
    assert cells(items[3]) == ["1", "1", "0", "1", "0", "0", "passed on Hopper"]


def test_a_failure_leads_its_chapters_strongest_tier():
    from test_manifest import case
    from gpubook import matrix

    bad = case("10H-gemm-hopper", "gemm_h1", "check", "h1", status="failed", runs_on=["sm_90a"])
    rows = matrix.kernel_rows_from({"10H-gemm-hopper": BUILT["10H-gemm-hopper"]}, [{"run": RUN, "cases": [bad]}])
    assert appendix.chapter_counts(rows)["strongest"] == "**1 FAILED** · compiled only"


def test_each_chapter_has_a_heading_and_each_kernel_row_an_anchor(tmp_path):
    from gpubook import matrix

    built = {c: [dict(k, cell=7) for k in ks] for c, ks in BUILT.items()}
    rows = matrix.kernel_rows_from(built, joined()[1], joined()[2])
    (tmp_path / "01-execution-model.md").write_text("# 1. Map the machine\n")
    text = appendix.chapter_sections(rows, tmp_path)
    assert ("(kernels-01-execution-model)=\n## 1. Map the machine\n\n"
            "3 kernels, built in **{doc}`the chapter <01-execution-model>`**.") in text
    assert "(kernels-08-gemm-basics)=\n## 08-gemm-basics\n\n2 kernels, built in **`08-gemm-basics`**." in text
    # a chapter the build holds: a link to its cell; one it lacks: the anchor alone
    assert '* - <a class="gpubook-kernel" id="kernel-01-vadd" href="01-execution-model.html#kernel-01-vadd">' in text
    assert '* - <span class="gpubook-kernel" id="kernel-08-gemm-v1">`gemm_v1`</span>' in text
    # vadd's large build is timed under a case name of its own: one anchor for its build
    assert text.count('id="kernel-01-vadd-2"') == 1
    assert text.count('class="gpubook-kernel"') == matrix.counts(rows)["kernels"]
    assert text.count("\n* - ") == len(rows) + 3  # a header row per table


def test_the_run_log_is_a_dropdown_of_one_line_per_run():
    sims = [{"run": SIM, "cases": [{}, {}]}]
    text = appendix.run_log([{"run": RUN, "cases": []}] * 2, sims)
    assert text.startswith("````{dropdown} Run log: 2 GPU runs, 1 CPU simulation\n")
    assert text.count("\n- 2026-12-01: NVIDIA H200 (sm_90a); torch 2.11.0; sanitizer: memcheck, racecheck") == 2
    assert "\n- 2026-12-02: simulated on the CPU, tirx-harness 0.1 (sm_100a); tools: numbers, synccheck, racecheck; 2 cases" in text
    assert text.rstrip().endswith("````")


def test_a_build_in_a_notebook_records_its_cell(tmp_path, monkeypatch):
    monkeypatch.setenv(manifest.MANIFEST_ENV, str(tmp_path))
    monkeypatch.setattr(manifest, "current_cell", lambda: 12)
    from gpubook.run import record

    before = record.current_chapter()
    record.set_chapter("01-cell")
    try:
        hooks.built(SimpleNamespace(name="vadd", arch="sm_100a", runs_on=("sm_100a",), not_built={}, fingerprint="c"))
    finally:
        record.set_chapter(before)
    assert manifest.recorded(tmp_path)["01-cell"][0]["cell"] == 12
    monkeypatch.undo()
    assert manifest.current_cell() is None  # outside a notebook (this test's process)


def _doc(rst: str) -> nodes.document:
    doc = new_document("<test>", get_default_settings(Parser))
    Parser().parse(rst, doc)
    return doc


def _cell(doc: nodes.document, *outputs: nodes.Node, tags=("output-sections",), count=1) -> nodes.container:
    cell = nodes.container("", nodes.container("", *outputs, classes=["cell_output"]), nb_element="cell_code",
                           cell_metadata={"tags": list(tags)}, exec_count=count, classes=["cell"])
    return cell


def test_headings_of_a_tagged_cells_output_become_sections_after_it():
    doc = _doc("Top\n===\n\nIntro.\n\nLater\n-----\n\nText.\n")
    top = doc[0]
    target = nodes.target("", "", ids=["kernels-01"], names=["kernels-01"])
    second = nodes.target("", "", refid="kernels-02")  # as docutils leaves a target it propagated
    cell = _cell(doc, nodes.paragraph("", "summary"), target, nodes.rubric("", "One", ids=["one"]),
                 nodes.paragraph("", "table one"), second, nodes.rubric("", "Two", ids=["two", "kernels-02"]),
                 nodes.paragraph("", "table two"))
    top.insert(top.index(top[1]) + 1, cell)  # after "Intro.", before the section "Later"
    assert kernel_links.split_into_sections(cell, doc) == 2
    sections = [n for n in top.children if isinstance(n, nodes.section)]
    assert [s[0].astext() for s in sections] == ["One", "Two", "Later"]
    assert sections[0]["ids"][0] == "kernels-01" and doc.ids["kernels-01"] is sections[0]
    assert sections[0][1].astext() == "table one" and cell.astext() == "summary"
    assert sections[1]["ids"] == ["kernels-02", "two"] and len(sections[0]) == 2  # title, table one


def test_a_cell_followed_by_text_keeps_its_headings():
    doc = _doc("Top\n===\n\nIntro.\n")
    cell = _cell(doc, nodes.rubric("", "One"), nodes.paragraph("", "table"))
    doc[0].insert(1, cell)  # "Intro." follows the cell: a section cannot go there
    assert kernel_links.split_into_sections(cell, doc) == 0 and cell.astext() == "One\n\ntable"


def test_a_cell_that_built_kernels_carries_their_anchors_and_one_back_link():
    kernels = [{"name": "tma_copy", "cell": 4}, {"name": "tma_copy", "cell": 4}, {"name": "other"}]
    by_cell = kernel_links.cell_anchors(kernels, "05-tma-mbarriers")
    assert by_cell == {4: [("kernel-05-tma-copy", "tma_copy"), ("kernel-05-tma-copy-2", "tma_copy")]}
    para = kernel_links.back_link(by_cell[4], "A-verification-matrix.html")
    assert para.astext() == "In appendix A: tma_copy, tma_copy"
    assert [r["refuri"] for r in para.findall(nodes.reference)] == [
        "A-verification-matrix.html#kernel-05-tma-copy", "A-verification-matrix.html#kernel-05-tma-copy-2"]


def test_the_cell_a_build_records_is_the_count_the_executed_page_shows():
    """In a notebook, `current_cell` is the execution count of the cell running it, the number
    the executed page gives that cell (the shell's own count already names the next cell)."""
    import inspect

    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(inspect.getsource(manifest.current_cell)),
                                         nbformat.v4.new_code_cell("x = 1"),
                                         nbformat.v4.new_code_cell("print(current_cell())"),
                                         nbformat.v4.new_code_cell("print(current_cell())")])
    NotebookClient(nb, timeout=60, kernel_name="python3").execute()
    for cell in nb.cells[2:]:
        assert cell.outputs[0]["text"].strip() == str(cell.execution_count)


def test_a_chapter_of_many_cases_shows_its_first_rows_and_folds_the_rest(tmp_path, monkeypatch):
    from gpubook import matrix

    built = {c: [dict(k, cell=7) for k in ks] for c, ks in BUILT.items()}
    rows = matrix.kernel_rows_from(built, joined()[1], joined()[2])
    whole = appendix.chapter_sections(rows, tmp_path)
    assert "{dropdown}" not in whole
    monkeypatch.setattr(appendix, "ROWS_SHOWN", 1)
    folded = appendix.chapter_sections(rows, tmp_path)
    chapters = len(appendix.by_chapter(rows))
    many = [rs for rs in appendix.by_chapter(rows).values() if len(rs) > 1]
    assert folded.count("{dropdown} The other") == len(many) >= 1
    assert folded.count("\n* - ") == whole.count("\n* - ") + len(many)  # every row kept, a header per fold
    assert folded.count("gpubook-kernel") == whole.count("gpubook-kernel") and chapters >= 2


def test_a_dropdowns_title_stays_in_its_dropdown():
    doc = _doc("Top\n===\n\nIntro.\n\nLater\n-----\n\nText.\n")
    top = doc[0]
    fold = nodes.container("", nodes.rubric("", "The other rows"), nodes.paragraph("", "rows"),
                           design_component="dropdown")
    cell = _cell(doc, nodes.paragraph("", "summary"), nodes.rubric("", "One", ids=["one"]),
                 nodes.paragraph("", "table one"), fold)
    top.insert(top.index(top[1]) + 1, cell)
    assert kernel_links.split_into_sections(cell, doc) == 1
    section = next(n for n in top.children if isinstance(n, nodes.section))
    assert section[0].astext() == "One" and section[2] is fold
    assert isinstance(fold[0], nodes.rubric) and fold[0].astext() == "The other rows"


def test_a_long_kernel_name_breaks_only_between_its_parameters():
    name = "fa3_h6_bfloat16_d128_h6kv3_s600_hard_causal_ctas5_l2_section614400"
    html = appendix.breakable(f"`attention_fast` (case `{name}`)")
    assert html.startswith("`attention_fast` (case <code")  # a short name stays a code span
    pieces = re.findall(r'<span class="pre">([^<]*)</span>', html)
    assert "".join(pieces) == name and all(p.endswith("_") for p in pieces[:-1])
    assert html.count("<wbr>") == name.count("_") == len(pieces) - 1  # a break after each underscore, none inside
    assert appendix.breakable("`gemm_v1` (script `0123abcd`)") == "`gemm_v1` (script `0123abcd`)"
