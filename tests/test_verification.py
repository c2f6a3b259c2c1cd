"""Export writes what replay needs; replay compares honestly; the matrix page follows the results."""

from __future__ import annotations

import json
import re

import pytest
import torch

import gpubook as gb
from gpubook import export, matrix, replay, results, runtime, verdicts
from gpubook.compile import toolchain

import kernels


@pytest.fixture
def exported(tmp_path, monkeypatch):
    """Export the harness's two test kernels (a check each, and a perf case for vadd)."""
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path / "out"))
    monkeypatch.delenv("GPUBOOK_STRICT", raising=False)
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    export.set_chapter("99-test")
    vadd = gb.build(kernels.vadd, name="vadd")
    n = kernels.N
    gb.check(vadd, [gb.seeded((n,), seed=1), gb.seeded((n,), seed=2), torch.empty(n)],
             ref=lambda x, y, out: x + y)
    timing = gb.bench(vadd, bytes=3 * n * 4, baseline="add", tolerance="exact")
    assert timing.status == "not measured"
    tmem = gb.build(kernels.tmem_roundtrip, name="tmem")
    gb.check(tmem, [torch.empty(128, dtype=torch.int32)], ref=lambda out: torch.zeros(128, dtype=torch.int32))
    yield tmp_path / "out", vadd
    export.set_chapter("unknown")


@pytest.fixture
def exporting(tmp_path, monkeypatch):
    """Cases of chapter "99-test" exported into tmp_path, as on a machine without a GPU."""
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path))
    monkeypatch.setattr(toolchain, "local_arch", lambda: None)
    export.set_chapter("99-test")
    yield tmp_path / "cases"
    export.set_chapter("unknown")


def case(out, name, kind="check"):
    return out / "cases" / f"99-test--{name}--{kind}"


def test_export_writes_a_self_contained_case(exported):
    out, vadd = exported
    d = case(out, "vadd")
    meta = json.loads((d / "case.json").read_text())
    assert meta["kind"] == "check" and meta["chapter"] == "99-test" and meta["name"] == "vadd"
    assert meta["runs_on"] == ["sm_100a", "sm_90a"] and meta["outputs"] == [2]
    assert meta["tolerances"] == [list(gb.tolerance("float32"))]
    assert meta["fingerprint"] == vadd.fingerprint
    assert meta["facts"]["registers"] == vadd.registers
    for arch in ("sm_100a", "sm_90a"):
        so = d / f"module-{arch}.so"
        assert so.stat().st_size > 0 and b"vadd_kernel" in so.read_bytes()
    assert (d / "kernel.py").read_text() == vadd.script()
    data = torch.load(d / "tensors.pt")
    assert data["args"][2] is None  # outputs are not shipped, only their shapes
    torch.testing.assert_close(data["expected"][0], data["args"][0] + data["args"][1])
    loaded = replay.load_case(d)
    assert loaded["param_objs"] == vadd.params
    perf = json.loads((case(out, "vadd", "perf") / "case.json").read_text())
    assert perf["kind"] == "perf" and perf["baseline"] == "add" and perf["bytes"] == 3 * kernels.N * 4
    assert not (case(out, "vadd", "perf") / "tensors.pt").exists()
    tmem = json.loads((case(out, "tmem") / "case.json").read_text())
    assert tmem["runs_on"] == ["sm_100a"] and not (case(out, "tmem") / "module-sm_90a.so").exists()


def fake_gpu(monkeypatch, body, arch="sm_90a"):
    monkeypatch.setattr(toolchain, "local_arch", lambda: arch)
    monkeypatch.setattr(runtime, "local_gpu_name", lambda: "NVIDIA H200")
    monkeypatch.setattr(runtime, "DEVICE", "cpu")
    monkeypatch.setattr(runtime, "synchronize", lambda: None)
    loads = []

    def load(so, name, params, arch):
        loads.append(so)
        return runtime.Launcher(body, name, params, arch)

    monkeypatch.setattr(runtime, "load", load)
    return loads


def test_replay_passes_a_correct_kernel(exported, monkeypatch):
    out, _ = exported
    loads = fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x + y))
    rec = replay.run_case(case(out, "vadd"))
    assert rec["status"] == "passed" and rec["max_abs_error"] == 0.0
    assert loads == [str(case(out, "vadd") / "module-sm_90a.so")]
    assert rec["fingerprint"] == json.loads((case(out, "vadd") / "case.json").read_text())["fingerprint"]


def test_replay_fails_a_planted_wrong_output(exported, monkeypatch):
    out, _ = exported
    d = case(out, "vadd")
    data = torch.load(d / "tensors.pt")
    data["expected"][0][17] += 1.0
    torch.save(data, d / "tensors.pt")
    fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x + y))
    rec = replay.run_case(d)
    assert rec["status"] == "failed"
    assert "1 of 4096 elements differ" in rec["message"] and "(17,)" in rec["message"]
    assert re.search(r"max abs error 1(\.0+)?\b", rec["message"])
    assert replay.exit_code([rec]) == 1


def test_replay_fails_a_kernel_that_writes_nothing(exported, monkeypatch):
    out, _ = exported
    fake_gpu(monkeypatch, lambda x, y, o: None)
    assert replay.run_case(case(out, "vadd"))["status"] == "failed"


def test_not_runnable_is_never_counted_as_passed(exported, monkeypatch):
    out, _ = exported
    fake_gpu(monkeypatch, lambda *a: pytest.fail("a Blackwell-only kernel must not be launched on sm_90a"))
    rec = replay.run_case(case(out, "tmem"))
    assert rec["status"] == "not runnable" and rec["message"] == "not runnable on sm_90a"
    doc = {"run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-01-01"}, "cases": [rec]}
    assert replay.summary(doc).endswith("1 not runnable") and "passed" not in replay.summary(doc)
    assert replay.exit_code([rec]) == 0
    (row,) = matrix.rows_from([dict(doc, format=1)])
    assert matrix.tier(row) == "compiled for sm_100a — never run" and matrix.never_run([row]) == [row]


@pytest.mark.parametrize("output, counts", [
    ("========= ERROR SUMMARY: 0 errors\n", (0, 0)),
    ("========= Invalid __global__ write of size 4 bytes\n========= ERROR SUMMARY: 3 errors\n", (3, 0)),
    ("========= RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)\n", (0, 0)),
    ("========= RACECHECK SUMMARY: 2 hazards displayed (1 error, 1 warning)\n", (1, 1)),
    ("Traceback (most recent call last): ...\n", None),
])
def test_sanitizer_summaries_are_parsed(output, counts):
    assert verdicts._sanitizer_counts(output) == counts


SAMPLE = {
    "format": 1,
    "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-01-02", "torch": "2.11.0",
            "sanitizer": ["memcheck", "racecheck"]},
    "cases": [
        {"case": "01--copy_vec4--check", "chapter": "01-execution-model", "name": "copy_vec4",
         "kind": "check", "runs_on": ["sm_100a", "sm_90a"], "status": "passed",
         "max_abs_error": 0.0, "max_rel_error": 0.0,
         "sanitizer": {"memcheck": "clean", "racecheck": "clean"}},
        {"case": "01--copy_vec4--perf", "chapter": "01-execution-model", "name": "copy_vec4",
         "kind": "perf", "runs_on": ["sm_100a", "sm_90a"], "status": "measured", "ms": 0.125,
         "bytes": 5.0e8, "bandwidth": 4.0e12, "percent_of_peak": 83.3, "baseline": "copy",
         "baseline_ms": 0.13},
        {"case": "03--gemm_tcgen05--check", "chapter": "03-meet-tirx", "name": "gemm_tcgen05",
         "kind": "check", "runs_on": ["sm_100a"], "status": "not runnable",
         "message": "not runnable on sm_90a"},
    ],
}


def test_matrix_renders_from_a_sample_results_file(tmp_path):
    (tmp_path / "2026-01-02-h200.json").write_text(json.dumps(SAMPLE))
    rows = matrix.rows(tmp_path)
    assert [r["name"] for r in rows] == ["copy_vec4", "gemm_tcgen05"]
    text = matrix.markdown(rows)
    assert "| 01-execution-model | `copy_vec4` | passed on H200 (sm_90) | max error 0 (exact) | 125.0 µs (4.00 TB/s) | 83% |" in text
    assert "memcheck clean; racecheck clean | 2026-01-02, NVIDIA H200 |" in text
    assert "| 03-meet-tirx | `gemm_tcgen05` | compiled for sm_100a — never run | — | not measured |" in text
    assert [r["name"] for r in matrix.never_run(rows)] == ["gemm_tcgen05"]
    rec = results.latest("copy_vec4", "perf", directory=tmp_path)
    assert rec["ms"] == 0.125 and rec["run"]["gpu"] == "NVIDIA H200"
    assert results.latest("copy_vec4", "perf", fingerprint="other", directory=tmp_path) is None


def test_a_newer_failure_is_not_hidden_by_an_older_pass(tmp_path):
    newer = json.loads(json.dumps(SAMPLE))
    newer["run"]["date"] = "2026-02-01"
    newer["cases"][0].update(status="failed", max_abs_error=None, message="1 of 10 elements differ")
    (tmp_path / "a.json").write_text(json.dumps(SAMPLE))
    (tmp_path / "b.json").write_text(json.dumps(newer))
    row = matrix.rows(tmp_path)[0]
    assert row["check"]["status"] == "failed"


@pytest.mark.book
def test_the_appendix_agrees_with_the_committed_results(built_book):
    page = (built_book / "chapters" / "A-verification-matrix.html").read_text()
    # a long name is written with break points after its underscores: read it whole
    page = page.replace('</span><wbr><span class="pre">', "").replace(" gpubook-long-name", "")
    rows = matrix.rows()
    if not rows:
        assert "No results file exists yet" in page
    for r in rows:
        assert f"<code class=\"docutils literal notranslate\"><span class=\"pre\">{r['name']}</span></code>" in page
        assert matrix.tier(r) in page


@pytest.mark.book
def test_the_export_command_executes_chapters_into_cases(tmp_path):
    import subprocess
    import sys
    from pathlib import Path

    tests = Path(__file__).resolve().parent
    chapter = tmp_path / "chapters" / "01-mini.md"
    chapter.parent.mkdir()
    chapter.write_text(
        "---\njupytext:\n  text_representation:\n    format_name: myst\n"
        "kernelspec:\n  display_name: Python 3\n  language: python\n  name: python3\n---\n\n"
        "# Mini\n\n```{code-cell} ipython3\n"
        f"import sys, torch\nsys.path.insert(0, {str(tests)!r})\n"
        "import gpubook as gb, kernels\ngb.set_chapter('01-mini')\n"
        "k = gb.build(kernels.vadd, name='vadd')\n"
        "gb.check(k, [gb.seeded((4096,)), gb.seeded((4096,), seed=1), torch.empty(4096)], "
        "ref=lambda x, y, o: x + y)\n```\n"
    )
    out = tmp_path / "export"
    env = {k: v for k, v in __import__("os").environ.items() if k != "GPUBOOK_STRICT"}
    proc = subprocess.run([sys.executable, "-m", "gpubook", "export", str(out), str(chapter)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "export: 1 cases" in proc.stdout
    meta = json.loads((out / "cases" / "01-mini--vadd--check" / "case.json").read_text())
    assert meta["chapter"] == "01-mini" and meta["runs_on"] == ["sm_100a", "sm_90a"]


def test_a_case_that_outlives_its_timeout_is_stopped(exported, tmp_path):
    out, _ = exported
    rec, output, timed_out = replay._child(case(out, "vadd"), tmp_path / "r.json", True, timeout=0.05)
    assert timed_out and rec is None


def test_replay_times_a_perf_case_with_its_flush_and_keeps_every_sample(exported, monkeypatch):
    import sys

    bench = sys.modules["gpubook.run.bench"]  # the module (gpubook.bench is the function)
    out, vadd = exported
    d = case(out, "vadd", "perf")
    meta = json.loads((d / "case.json").read_text())
    assert meta["flush"] == "read" and meta["dtype"] is None and meta["repeat"] == 50
    fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x + y))
    seen = []

    def fake_samples(fns, warmup, repeat, flush, flush_bytes=0, sample=None, report=None):
        for fn in fns.values():
            fn()
            seen.append(flush)
        return {name: [0.004, 0.002, 0.003] for name in fns}

    monkeypatch.setattr(bench, "time_interleaved", fake_samples)
    rec = replay.run_case(d)
    assert rec["status"] == "measured" and rec["flush"] == "read" and seen == ["read", "read"]
    assert rec["samples"] == [0.004, 0.002, 0.003] and rec["ms"] == 0.003
    assert rec["baseline_samples"] == [0.004, 0.002, 0.003]
    n = kernels.N
    assert rec["bandwidth"] == pytest.approx(3 * n * 4 / 3e-6)
    assert rec["percent_of_peak"] == pytest.approx(100 * rec["bandwidth"] / gb.H200.hbm_bandwidth)
    t = gb.Timing.from_record(dict(rec, run={"gpu": "NVIDIA H200", "date": "2026-12-01"}))
    assert t.samples == rec["samples"] and t.flush == "read"
    assert "(median of 3, read flush)" in repr(t)

    meta["flush"] = "none"
    (d / "case.json").write_text(json.dumps(meta))
    assert replay.run_case(d)["flush"] == "none" and seen[-1] == "none"


def test_a_perf_case_of_several_baselines_times_each_and_reads_back(exported, monkeypatch):
    import sys

    bench = sys.modules["gpubook.run.bench"]
    out, vadd = exported
    d = case(out, "vadd", "perf")
    meta = json.loads((d / "case.json").read_text())
    meta["baselines"] = ["add", "add_again"]
    (d / "case.json").write_text(json.dumps(meta))
    fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x + y))
    monkeypatch.setitem(bench.BASELINES, "add_again", bench.BASELINES["add"])
    times = [[0.002] * 3, [0.004] * 3, [0.001] * 3]
    monkeypatch.setattr(bench, "time_interleaved",
                        lambda fns, *a, **k: {name: (fn(), t)[1] for (name, fn), t in zip(fns.items(), times)})
    rec = replay.run_case(d)
    assert rec["ms"] == 0.002 and rec["baseline"] == "add" and rec["baseline_ms"] == 0.004
    assert rec["baselines"] == {"add": 0.004, "add_again": 0.001}
    assert rec["baselines_samples"]["add_again"] == [0.001] * 3
    t = gb.Timing.from_record(dict(rec, run={"gpu": "NVIDIA H200", "date": "2026-12-01"}))
    assert t.speedup() == 2.0 and t.speedup("add_again") == 0.5
    assert "add 4.0 µs, add_again 1.0 µs" in repr(t)
    old = gb.Timing.from_record({"name": "k", "ms": 1.0, "baseline": "copy", "baseline_ms": 3.0,
                                 "run": {"gpu": "NVIDIA H200"}})     # a file of one baseline
    assert old.baselines == {"copy": 3.0} and old.speedup("copy") == 3.0


def test_bench_names_several_baselines_and_refuses_unknown_ones(exporting):
    vadd = gb.build(kernels.vadd, name="vadd")
    gb.bench(vadd, bytes=1, baseline=("add", "copy"), tolerance="exact")
    with pytest.raises(ValueError, match="unknown baseline 'sdpa_nope'"):
        gb.bench(vadd, bytes=1, baseline=("add", "sdpa_nope"), tolerance="exact")
    with pytest.raises(ValueError, match="named twice"):
        gb.bench(vadd, bytes=1, baseline=("add", "add"), tolerance="exact")
    meta = json.loads((exporting / "99-test--vadd--perf" / "case.json").read_text())
    assert meta["baseline"] == "add" and meta["baselines"] == ["add", "copy"]


def test_bench_records_dtype_and_flush_for_the_replay(exporting):
    vadd = gb.build(kernels.vadd, name="vadd")
    t = gb.bench(vadd, flops=kernels.N, flush="write", baseline="add", tolerance="exact")
    assert t.status == "not measured" and t.dtype == "float32" and t.flush == "write"
    meta = json.loads((exporting / "99-test--vadd--perf" / "case.json").read_text())
    assert meta["dtype"] == "float32" and meta["flush"] == "write"


def test_old_results_without_a_flush_were_timed_with_the_write_flush():
    t = gb.Timing.from_record({"name": "k", "ms": 1.0, "run": {"gpu": "NVIDIA H200"}})
    assert t.flush == "write" and t.samples == []


def test_a_hopper_only_kernel_exports_and_replays_on_sm_90a_only(exporting, monkeypatch):
    k = gb.build(kernels.wgmma_fence, name="wgmma_fence", archs=(gb.HOPPER,))
    ref = lambda out: torch.arange(128, dtype=torch.int32)  # noqa: E731
    res = gb.check(k, [torch.empty(128, dtype=torch.int32)], ref=ref, stress=10)
    timing = gb.bench(k, bytes=512, unchecked="a fence test: its output is a pattern, not a result")
    assert res.status == "not run" and repr(res).startswith("NOT RUN wgmma_fence: no GPU on this machine (compiled for sm_90a)")
    assert timing.status == "not measured"
    d = exporting / "99-test--wgmma_fence--check"
    meta = json.loads((d / "case.json").read_text())
    assert meta["runs_on"] == ["sm_90a"] and meta["facts"]["arch"] == "sm_90a"
    assert meta["facts"]["not_built"]["sm_100a"].startswith("ptxas: Instruction 'wgmma.fence'")
    assert (d / "module-sm_90a.so").exists() and not (d / "module-sm_100a.so").exists()
    assert meta["fingerprint"] == k.fingerprint

    fake_gpu(monkeypatch, lambda out: out.copy_(torch.arange(128, dtype=torch.int32)))
    rec = replay.run_case(d)
    assert rec["status"] == "passed" and rec["stress"]["failures"] == 0
    fake_gpu(monkeypatch, lambda out: pytest.fail("must not launch on sm_100a"), arch="sm_100a")
    assert replay.run_case(d)["status"] == "not runnable"
