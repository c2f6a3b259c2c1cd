"""The verification appendix from results files: stress runs, Hopper-only kernels, one table
per chapter that links the chapter (tests/test_manifest.py: the kernels the chapters build)."""

from __future__ import annotations

import json

from gpubook import matrix

RUN = {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-01", "torch": "2.11.0",
       "sanitizer": ["memcheck", "racecheck"]}


def check(name, chapter="05-tma", runs_on=("sm_100a", "sm_90a"), status="passed", stress=None, **kw):
    return {"case": f"{chapter}--{name}--check", "chapter": chapter, "name": name, "kind": "check",
            "runs_on": list(runs_on), "status": status, "max_abs_error": 0.0, "max_rel_error": 0.0,
            "sanitizer": {"memcheck": "clean", "racecheck": "clean"}, "stress": stress, **kw}


def perf(name, chapter="05-tma", runs_on=("sm_100a", "sm_90a")):
    return {"case": f"{chapter}--{name}--perf", "chapter": chapter, "name": name, "kind": "perf",
            "runs_on": list(runs_on), "status": "measured", "ms": 0.25, "bytes": 1e9,
            "bandwidth": 4.0e12, "percent_of_peak": 83.3}


def rows_of(tmp_path, cases, run=RUN):
    (tmp_path / "r.json").write_text(json.dumps({"format": 1, "run": run, "cases": cases}))
    return {r["name"]: r for r in matrix.rows(tmp_path)}


def test_stress_runs_are_shown_and_a_failing_one_is_a_failure(tmp_path):
    rows = rows_of(tmp_path, [
        check("tma_copy", stress={"launches": 2000, "failures": 0, "variants": 4}), perf("tma_copy"),
        check("racy", stress={"launches": 2000, "failures": 3, "variants": 4}),
        check("old", stress=None),
    ])
    assert matrix.tier(rows["tma_copy"]) == "passed on H200 (sm_90)"
    assert matrix.stress(rows["tma_copy"]) == "2000 launches over 4 input variants: 0 failures"
    assert matrix.tier(rows["racy"]) == "FAILED under stress on H200 (sm_90) (3 of 2000 launches)"
    assert rows["racy"]["failed"] and not rows["racy"]["passed_on"]
    assert matrix.stress(rows["racy"]) == "2000 launches over 4 input variants: 3 failures"
    assert matrix.stress(rows["old"]) == "—"
    assert matrix.never_run(list(rows.values())) == []


def test_a_hopper_only_kernel_says_why_it_has_no_sm100_build(tmp_path):
    rows = rows_of(tmp_path, [check("gemm_wgmma", runs_on=["sm_90a"]),
                              check("gemm_wgmma_v2", runs_on=["sm_90a"], status="not runnable")])
    table = matrix.chapter_tables(list(rows.values()))
    assert matrix.tier(rows["gemm_wgmma"]) == "passed on H200 (sm_90)"
    assert matrix.tier(rows["gemm_wgmma_v2"]) == "compiled for sm_90a — never run"
    assert table.count(matrix.HOPPER_ONLY) == 2 and "wgmma has no sm_100a form" in table


def test_chapter_tables_have_five_columns_and_link_existing_chapters(tmp_path):
    chapters = tmp_path / "chapters"
    chapters.mkdir()
    (chapters / "05-tma.md").write_text("# TMA\n")
    rows = rows_of(tmp_path, [check("tma_copy", stress={"launches": 10, "failures": 0, "variants": 2}),
                              perf("tma_copy"), check("lost", chapter="99-gone")])
    text = matrix.chapter_tables(sorted(rows.values(), key=lambda r: r["chapter"]), chapters)
    assert "**{doc}`05-tma`**" in text and "**`99-gone`**" in text
    table_lines = [ln for ln in text.splitlines() if ln.startswith("|")]
    assert all(ln.count("|") == 6 for ln in table_lines), table_lines
    line = next(ln for ln in table_lines if "`tma_copy`" in ln)
    assert ("**passed on H200 (sm_90)** · Hopper GPU: passed on H200, 2026-12-01, max error 0 (exact), memcheck and "
            "racecheck clean · Blackwell GPU: never run · CPU simulation: none") in line
    assert "250.0 µs (4.00 TB/s), 83% of peak" in line and "10 launches over 2 input variants: 0 failures" in line


def test_a_bench_of_several_baselines_shows_each_ratio(tmp_path):
    several = dict(perf("attn", chapter="11-x"), baseline="sdpa_flash", baseline_ms=0.5,
                   baselines={"sdpa_flash": 0.5, "sdpa": 0.125})
    one = dict(perf("copy", chapter="11-x"), baseline="copy", baseline_ms=0.5)
    rows = rows_of(tmp_path, [check("attn", chapter="11-x"), several, check("copy", chapter="11-x"), one])
    assert matrix.speedups(rows["attn"]["perf"]) == {"sdpa_flash": 2.0, "sdpa": 0.5}
    assert matrix.speedups(rows["copy"]["perf"]) == {"copy": 2.0}      # files of one baseline
    text = matrix.chapter_tables(list(rows.values()))
    line = next(ln for ln in text.splitlines() if "`attn`" in ln)
    assert "83% of peak · 2.00× `sdpa_flash`, 0.50× `sdpa`" in line
    line = next(ln for ln in text.splitlines() if "`copy`" in ln)
    assert "×" not in line


def test_a_timed_benchmark_build_is_not_called_never_run(tmp_path):
    rows = rows_of(tmp_path, [perf("attention_bench"), check("blackwell_only", status="not runnable")])
    assert matrix.tier(rows["attention_bench"]) == "timed on H200 (sm_90), not compared (no check of this build)"
    assert [r["name"] for r in matrix.never_run(list(rows.values()))] == ["blackwell_only"]


def test_a_timed_kernel_is_judged_by_the_output_check_at_its_timed_shape(tmp_path):
    ok = dict(perf("bench_ok"), output_check={"against": "sdpa_fp32", "passed": True, "max_abs_error": 1e-3})
    bad = dict(perf("bench_bad"), output_check={"against": "sdpa_fp32", "passed": False, "max_abs_error": 3.0})
    empty = dict(perf("bench_empty"), output_check={"unchecked": "the kernel writes nothing"})
    rows = rows_of(tmp_path, [ok, bad, empty])
    assert matrix.outcome(rows["bench_ok"]) == "matched"
    assert matrix.tier(rows["bench_ok"]) == "matched PyTorch at its timed shape on H200 (sm_90)"
    assert "output matched at the timed shape, max abs error 0.001" in matrix._on_gpu(rows["bench_ok"], "sm_90a")
    assert matrix.outcome(rows["bench_bad"]) == "failed"
    assert matrix.tier(rows["bench_bad"]) == "OUTPUT WRONG at its timed shape on H200 (sm_90)"
    assert matrix.outcome(rows["bench_empty"]) == "timed"
    assert matrix.counts(list(rows.values()))["failed"] == 1


def test_a_simulator_finding_reads_as_words_that_a_table_can_wrap() -> None:
    msg = ("unordered write/read between kernel:0/warp:3/seq:18/source:op:161/loops:[2]/lane:7 write "
           "and kernel:0/warp:0/seq:22/source:op:186/loops:[]/lane:0 read")
    out = matrix._readable(msg)
    assert out == "unordered write/read between warp 3, lane 7, op 161 write and warp 0, lane 0, op 186 read"
    assert max(len(w) for w in out.split()) < 20
    ranged = matrix._readable("write/read on allocation#0:[17408, 17410) between")
    assert ranged == "write/read on allocation 0, bytes [17408, 17410) between"


def test_the_opening_box_tally_reads_the_appendix_rows(tmp_path):
    from gpubook.book import headline

    ok = dict(perf("bench_ok", chapter="05-tma"), output_check={"against": "copy", "passed": True})
    rows = list(rows_of(tmp_path, [ok, check("blackwell_only", chapter="05-tma", status="not runnable")]).values())
    text = headline.tally("05-tma", rows)
    assert text.startswith("Of its 2 kernels, 1 matched PyTorch on an H200 and 1 never ran on a GPU")
    assert "none has run on a B200" in text
    assert headline.tally("02-roofline", rows).startswith("This chapter builds no kernel")


def test_every_record_names_its_gpu_and_its_error_against_the_whole_allowance(tmp_path):
    """Appendix A names the GPU of each record (an H100 replay is not an H200 one), and states an
    error as its fraction of atol + rtol |ref|; an older record, without the fraction, gives the
    absolute error beside both parts of its allowance."""
    h100 = dict(RUN, gpu="NVIDIA H100 80GB HBM3")
    rows = rows_of(tmp_path, [check("new", max_error_over_allowed=0.31, max_abs_error=2e-5),
                              check("old", max_abs_error=2e-5, tolerances=[[1.3e-6, 1e-5]])], run=h100)
    assert matrix.tier(rows["new"]) == "passed on H100 80GB HBM3 (sm_90)"
    line = matrix._on_gpu(rows["new"], "sm_90a")
    assert line.startswith("passed on H100 80GB HBM3, 2026-12-01, max error 31% of the allowance") and "2e-05" not in line
    assert "max abs error 2e-05 (allowance atol 1e-05 + rtol 1.3e-06·abs(ref))" in matrix._on_gpu(rows["old"], "sm_90a")
    assert "H200" not in matrix.chapter_tables(list(rows.values()))
