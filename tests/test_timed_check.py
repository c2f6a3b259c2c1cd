"""A timed kernel is a checked kernel: its output at the timed shape is compared with its
baseline's before anything is timed, kernel and baselines are timed interleaved, and the SM
clock is sampled while they run (gpubook.run.bench, outcheck, clocks)."""

from __future__ import annotations

import json
import sys

import pytest
import torch

import gpubook as gb
import kernels
from gpubook.run import clocks, outcheck
from gpubook.verify import replay
from test_verification import case, exported, exporting, fake_gpu  # noqa: F401  (fixtures)

bench = sys.modules["gpubook.run.bench"]  # the module (gpubook.bench is the function)


def no_timing(*a, **k):
    raise AssertionError("a kernel whose output failed its check must not be timed")


def test_a_timed_kernel_with_one_wrong_element_fails_before_it_is_timed(exported, monkeypatch):
    out, _ = exported

    def wrong(x, y, o):
        o.copy_(x + y)
        o[17] += 1.0

    fake_gpu(monkeypatch, wrong)
    monkeypatch.setattr(bench, "time_interleaved", no_timing)
    rec = replay.run_case(case(out, "vadd", "perf"))
    assert rec["status"] == "failed" and "ms" not in rec
    chk = rec["output_check"]
    assert chk["mismatches"] == 1 and chk["first_mismatch"]["index"] == [17] and not chk["passed"]
    assert "1 of 4096 elements outside the exact match" in rec["message"]
    t = gb.Timing.from_record(dict(rec, run={"gpu": "NVIDIA H200", "date": "2026-12-02"}))
    assert t.status == "failed" and repr(t).startswith("FAILED vadd on an H200: output checked against add")


def test_an_element_the_kernel_never_writes_is_a_mismatch(exported, monkeypatch):
    out, _ = exported

    def short(x, y, o):  # writes every element but the last
        o[:-1] = x[:-1] + y[:-1]

    fake_gpu(monkeypatch, short)
    monkeypatch.setattr(bench, "time_interleaved", no_timing)
    rec = replay.run_case(case(out, "vadd", "perf"))
    assert rec["status"] == "failed" and rec["output_check"]["first_mismatch"]["index"] == [kernels.N - 1]
    assert rec["output_check"]["nonfinite"] == 1  # the poison the kernel left


def test_a_correct_timed_kernel_records_its_check_the_interleaving_and_the_clocks(exported, monkeypatch):
    out, _ = exported
    fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x + y))
    calls = []

    def fake(fns, warmup, repeat, flush, flush_bytes=0, sample=None, report=None):
        calls.append(list(fns))
        return {name: [0.002, 0.003, 0.004, 0.005] for name in fns}

    monkeypatch.setattr(bench, "time_interleaved", fake)
    rec = replay.run_case(case(out, "vadd", "perf"))
    assert rec["status"] == "measured" and rec["interleaved"] is True
    assert calls == [["kernel", "baseline:add"]]
    assert rec["output_check"]["passed"] and rec["output_check"]["against"] == "add"
    assert rec["output_check"]["tolerance"] == {"exact": True}
    assert rec["clocks"]["source"] is None or "sm_mhz_min" in rec["clocks"]
    assert rec["within_noise"] is True  # identical samples: no gap at all
    t = gb.Timing.from_record(dict(rec, run={"gpu": "NVIDIA H200", "date": "2026-12-02"}))
    assert "output checked against add at the timed shape: 0 of 4096 elements" in repr(t)


def test_the_notebook_path_raises_on_a_wrong_output(exporting, monkeypatch):
    vadd = gb.build(kernels.vadd, name="vadd")
    fake_gpu(monkeypatch, lambda x, y, o: o.copy_(x - y))
    monkeypatch.setattr(bench, "time_interleaved", no_timing)
    with pytest.raises(outcheck.OutputMismatch, match="vadd: output checked against add"):
        gb.bench(vadd, bytes=1, baseline="add", tolerance="exact")


def test_bench_refuses_a_timed_case_without_an_output_check(exporting):
    vadd = gb.build(kernels.vadd, name="vadd")
    with pytest.raises(ValueError, match="give a tolerance"):
        gb.bench(vadd, bytes=1, baseline="add")
    with pytest.raises(ValueError, match="nothing to compare the output with"):
        gb.bench(vadd, bytes=1, tolerance="exact")
    with pytest.raises(ValueError, match="exclude each other"):
        gb.bench(vadd, bytes=1, baseline="add", tolerance="exact", unchecked="no reason")
    with pytest.raises(ValueError, match="unknown reference"):
        gb.bench(vadd, bytes=1, reference="nope", tolerance="exact")
    gb.bench(vadd, bytes=1, name="vadd_unchecked", unchecked="only the launch is timed")
    meta = json.loads((exporting / "99-test--vadd_unchecked--perf" / "case.json").read_text())
    assert meta["unchecked"] == "only the launch is timed" and "tolerance" not in meta


def _gemm_inputs(m=96, n=80, k=512, seed=0):
    g = torch.Generator().manual_seed(seed)
    a = torch.randn(m, k, generator=g).to(torch.bfloat16)
    b = torch.randn(n, k, generator=g).to(torch.bfloat16)
    return a, b


def _chunked(a, b, chunk=64, skip=None, twice=None):
    """fp32 sums of A Bᵀ accumulated K tile by K tile (another order than one matmul), rounded to bf16;
    `skip` leaves one K tile out, `twice` adds one twice (a stale ring slot)."""
    acc = torch.zeros(a.shape[0], b.shape[0])
    for i, k0 in enumerate(range(0, a.shape[1], chunk)):
        if i == skip:
            continue
        part = a[:, k0:k0 + chunk].float() @ b[:, k0:k0 + chunk].float().t()
        acc += part * (2 if i == twice else 1)
    return acc.to(torch.bfloat16)


def test_the_gemm_bound_passes_another_summation_order_and_fails_a_lost_or_repeated_k_tile():
    a, b = _gemm_inputs()
    cublas_like = (a.float() @ b.float().t()).to(torch.bfloat16)
    spec = outcheck.tolerance_spec({"bound": "gemm"})
    ok = outcheck.compare_output(_chunked(a, b), cublas_like, spec, [a, b], "matmul_nt")
    assert ok["passed"] and ok["max_error_over_allowed"] < 1
    for bad in (dict(skip=3), dict(twice=5)):
        rec = outcheck.compare_output(_chunked(a, b, **bad), cublas_like, spec, [a, b], "matmul_nt")
        assert not rec["passed"] and rec["mismatches"] > a.shape[0] * b.shape[0] // 2, bad
    # torch's default bf16 tolerance (rtol 1.6e-2) would pass a tile lost at one element in ten:
    # the argued bound does not
    lost = _chunked(a, b, skip=7)
    assert outcheck.compare_output(lost, cublas_like, spec, [a, b], "matmul_nt")["mismatches"] > 0


def test_the_attention_bound_is_the_checks_and_catches_a_row_of_v_out_of_place():
    g = torch.Generator().manual_seed(3)
    q, k, v = (torch.randn(1, 2, 200, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    ref = outcheck.REFERENCES["sdpa_fp32"](q, k, v)
    spec = outcheck.tolerance_spec({"bound": "attention", "factor": 4})
    assert outcheck.compare_output(ref.to(torch.bfloat16), ref, spec, [q, k, v], "sdpa_fp32")["passed"]
    v2 = v.clone()
    v2[:, :, [10, 11]] = v2[:, :, [11, 10]]
    wrong = outcheck.REFERENCES["sdpa_fp32"](q, k, v2).to(torch.bfloat16)
    assert not outcheck.compare_output(wrong, ref, spec, [q, k, v], "sdpa_fp32")["passed"]
    with pytest.raises(ValueError, match="positive 'factor'"):
        outcheck.tolerance_spec({"bound": "attention"})


def test_kernel_and_baselines_alternate_order_repeat_by_repeat(monkeypatch):
    order = []

    class Event:
        def __init__(self, enable_timing=False):
            pass

        def record(self):
            pass

        def synchronize(self):
            pass

        def elapsed_time(self, other):
            return 1.0

    monkeypatch.setattr(torch.cuda, "Event", Event)
    monkeypatch.setattr(bench.runtime, "DEVICE", "cpu")
    fns = {n: (lambda n=n: order.append(n)) for n in ("k", "a", "b")}
    samples = []
    times = bench.time_interleaved(fns, warmup=1, repeat=4, flush="none", sample=lambda: samples.append(1))
    assert order[:3] == ["k", "a", "b"]  # warm-up, then the timed repeats
    assert order[3:] == ["k", "a", "b", "b", "a", "k", "k", "a", "b", "b", "a", "k"]
    assert times == {n: [1.0] * 4 for n in fns} and len(samples) == 3


def test_a_gap_smaller_than_the_baselines_spread_is_parity():
    base = [1.00, 1.10, 0.90, 1.05, 0.95, 1.20, 0.80]
    t = gb.Timing("k", "measured", gpu="NVIDIA H200", ms=0.97, baseline_ms=1.0, samples=[0.97] * 7,
                  baseline_samples=base, baselines={"b": 1.0}, baselines_samples={"b": base})
    assert t.within_noise() and "parity" in repr(t)
    t.ms, t.samples = 0.7, [0.7] * 7
    assert t.within_noise() is False and "parity" not in repr(t) and ": faster" in repr(t)


def test_clock_samples_name_the_slowdowns_and_leave_out_idle():
    assert clocks.reasons(0x1 | 0x4) == ["gpu idle", "software power cap"]
    s = clocks.summarize([{"sm_mhz": 1980, "max_sm_mhz": 1980, "reasons": ["gpu idle"]},
                          {"sm_mhz": 1755, "max_sm_mhz": 1980, "reasons": ["software power cap"]}], "nvml")
    assert s["sm_mhz_min"] == 1755 and s["slowed"] == ["software power cap"]
    assert clocks.describe(s) == "SM clock 1755–1980 MHz of 1980, slowed by software power cap"
    calm = clocks.summarize([{"sm_mhz": 1980, "max_sm_mhz": 1980, "reasons": ["gpu idle"]}], "nvml")
    assert calm["slowed"] == [] and clocks.describe(calm).endswith("no slowdown reported")
    assert clocks.describe(clocks.summarize([], None)).startswith("clocks not sampled")


def test_a_timing_of_another_case_of_the_script_is_not_reported_as_this_one(exporting, tmp_path, monkeypatch):
    from gpubook.facts import results

    vadd = gb.build(kernels.vadd, name="vadd")
    meta = json.loads(json.dumps({"bytes": 1, "flops": None, "baseline": "add", "dtype": None, "flush": "read",
                                  "warmup": 10, "repeat": 50, "interleaved": True, "tolerance": {"exact": True},
                                  "reference": None}))
    rec = {"case": "99-test--vadd--perf", "chapter": "99-test", "name": "vadd", "kind": "perf",
           "runs_on": list(vadd.runs_on), "fingerprint": vadd.fingerprint, "status": "measured", "ms": 0.01,
           "baseline": "add", "baseline_ms": 0.02, "toolchain": gb.record.toolchain_identity(),
           "case_digest": gb.record.perf_digest(vadd, meta)}
    folder = tmp_path / "res"
    folder.mkdir()
    monkeypatch.setattr(results, "RESULTS_DIR", folder)

    def write(r):
        (folder / "2026-12-02-h200.json").write_text(json.dumps(
            {"format": 2, "run": {"gpu": "NVIDIA H200", "arch": "sm_90a", "date": "2026-12-02"}, "cases": [r]}))

    write(rec)
    same = gb.bench(vadd, bytes=1, baseline="add", tolerance="exact")
    assert same.provenance == "this case" and same.best().ms == 0.01
    lines = repr(same).splitlines()   # what the replay measured first, then what this machine could not do
    assert lines[0].startswith("MEASURED vadd on an H200 (replay of 2026-12-02): 10.0 µs")
    assert lines[-1] == "  not measured here: no GPU on this machine"
    other = gb.bench(vadd, bytes=1, baseline="add", tolerance=(1e-3, 0))   # another output check
    assert other.provenance == "other" and other.best() is None
    assert repr(other).startswith("NOT MEASURED vadd: no GPU on this machine; no replay of this very case yet")
    assert "the same kernel script was timed for another case" in repr(other) and "MEASURED vadd on an H200" in repr(other)


def _attention_with_lse(seed=5, n=150):
    g = torch.Generator().manual_seed(seed)
    q, k, v = (torch.randn(1, 2, n, 64, generator=g).to(torch.bfloat16) for _ in range(3))
    return [q, k, v, torch.empty_like(q), torch.empty(1, 2, n)]


def test_a_kernel_with_two_outputs_is_checked_on_both_and_a_wrong_lse_fails(monkeypatch):
    """O and the LSE, each against the float reference with its own tolerance; the LSE in base 2
    (a missing ln 2) and one row the kernel never writes are both refused, O alone is not enough."""
    from gpubook.models import fa4_features as fa4x

    monkeypatch.setattr(bench.runtime, "synchronize", lambda: None)   # the fake kernel runs on the CPU
    args = _attention_with_lse()
    o_ref, lse_ref = outcheck.REFERENCES["sdpa_fp32_lse"](*args[:3])
    tol = [{"bound": "attention", "factor": 4}, {"bound": "lse", "causal": False}]

    def kernel(lse_of):
        def launch(q, k, v, o, lse):
            o.copy_(o_ref.to(o.dtype))
            lse.copy_(lse_of(lse_ref).float())
        return launch

    ok = bench.check_output(kernel(lambda x: x), args, [], tol, "sdpa_fp32_lse", None, outputs=(3, 4))
    assert ok["passed"] and [r["index"] for r in ok["outputs"]] == [3, 4] and ok["mismatches"] == 0
    assert "parameter 4: output checked against sdpa_fp32_lse" in outcheck.describe(ok)
    base2 = bench.check_output(kernel(lambda x: x / torch.log(torch.tensor(2.0))), args, [], tol,
                               "sdpa_fp32_lse", None, outputs=(3, 4))
    assert not base2["passed"] and base2["outputs"][0]["passed"] and not base2["outputs"][1]["passed"]

    def one_row_short(q, k, v, o, lse):
        kernel(lambda x: x)(q, k, v, o, lse)
        lse[0, 1, 7] = float("nan")
    short = bench.check_output(one_row_short, args, [], tol, "sdpa_fp32_lse", None, outputs=(3, 4))
    assert not short["passed"] and short["mismatches"] == 1
    # the bound is the chapters' LSE allowance for a kernel whose exponentials are all on the MUFU
    atol = outcheck._limits(outcheck.tolerance_spec(tol[1]), args[:3], lse_ref, "float32")[0]
    assert atol == pytest.approx(fa4x.lse_tolerance(*args[:2], False, cubic=False), rel=1e-6)


def test_bench_refuses_several_outputs_without_a_tolerance_each(exporting):
    k = gb.build(kernels.vadd, name="vadd_two_outputs")
    with pytest.raises(ValueError, match="need a reference and a tolerance each"):
        gb.bench(k, bytes=1.0, reference="copy", tolerance=["exact"], outputs=(1, 2))
