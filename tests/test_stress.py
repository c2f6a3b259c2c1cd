"""Stress runs: input variants made on the CPU, exported, and replayed launch after launch with
the outputs poisoned each time; one bad launch in thousands is counted and named."""

from __future__ import annotations

import json

import pytest
import torch

import gpubook as gb
from gpubook import export, replay, runtime
from gpubook.verify.check import STRESS_VARIANTS, make_variants
from gpubook.compile.signature import KernelCallError

import kernels
from gpu_stubs import fake_gpu, no_gpu, vadd  # noqa: F401 - fixtures

N = kernels.N


def vadd_args():
    return [gb.seeded((N,), seed=1), gb.seeded((N,), seed=2), torch.empty(N)]


def add(x, y, out):
    return x + y


def test_variants_shuffle_floating_inputs_and_keep_integer_ones():
    params = [gb.Param("x", (64,), "float32"), gb.Param("idx", (64,), "int32"),
              gb.Param("out", (64,), "float32")]
    x = gb.seeded((64,), seed=3)
    idx = torch.randperm(64).to(torch.int32)
    vs = make_variants("k", params, [x, idx, torch.empty(64)], [2],
                             lambda x, idx, out: x[idx.long()], 8)
    assert len(vs) == 8
    seen = set()
    for args, expected in vs:
        vx, vidx, vout = args
        assert vout is None  # outputs are not shipped
        assert torch.equal(vidx, idx)  # index tensors are kept
        assert torch.equal(vx.sort().values, x.sort().values) and not torch.equal(vx, x)
        torch.testing.assert_close(expected[0], vx[idx.long()], rtol=0, atol=0)
        seen.add(tuple(vx[:4].tolist()))
    assert len(seen) == 8  # every variant differs
    again = make_variants("k", params, [x, idx, torch.empty(64)], [2], lambda x, idx, out: x[idx.long()], 8)
    assert all(torch.equal(a[0][0], b[0][0]) for a, b in zip(vs, again))  # seeded


def test_variants_from_a_callable_are_validated():
    params = [gb.Param("x", (8,), "float32"), gb.Param("out", (8,), "float32")]
    vs = make_variants("k", params, [torch.zeros(8), torch.empty(8)], [1],
                             lambda x, out: 2 * x, lambda seed: [torch.full((8,), float(seed)), torch.empty(8)])
    assert len(vs) == STRESS_VARIANTS and vs[1][1][0][0] == 2.0 * 1001
    with pytest.raises(KernelCallError, match="has shape"):
        make_variants("k", params, [torch.zeros(8), torch.empty(8)], [1], lambda x, out: x,
                            lambda seed: [torch.zeros(9), torch.empty(8)])


def test_a_correct_kernel_survives_a_stress_run(vadd, monkeypatch):
    fake_gpu(monkeypatch, lambda x, y, out: out.copy_(x + y))
    res = gb.check(vadd, vadd_args(), ref=add, stress=500)
    assert res.passed
    assert res.stress == {"launches": 500, "failures": 0, "variants": 8, "first_failure": None}
    assert "stress: 500 launches over 8 input variants, 0 failed" in repr(res)


def test_one_bad_launch_in_two_thousand_is_caught(vadd, monkeypatch):
    calls = []

    def flaky(x, y, out):
        calls.append(1)
        out.copy_(x + y)
        if len(calls) == 1 + 137:  # the plain check launch, then stress launch 137
            out[5] = 0.0

    fake_gpu(monkeypatch, flaky)
    with pytest.raises(gb.CheckError) as err:
        gb.check(vadd, vadd_args(), ref=add, stress=2000)
    st = err.value.stress
    assert st["launches"] == 2000 and st["failures"] == 1 and st["variants"] == 8
    assert st["first_failure"].startswith("launch 137 (variant 0): 1 of 4096 output elements differ")
    assert len(calls) == 2001
    assert "stress: 2000 launches over 8 input variants, 1 failed" in str(err.value)


def test_a_kernel_that_misses_some_launches_is_caught(vadd, monkeypatch):
    calls = []

    def lazy(x, y, out):  # writes only on some launches: the poisoned output stays NaN
        calls.append(1)
        if len(calls) % 3:
            out.copy_(x + y)

    fake_gpu(monkeypatch, lazy)
    with pytest.raises(gb.CheckError) as err:
        gb.check(vadd, vadd_args(), ref=add, stress=30)
    assert err.value.stress["failures"] == 10


def test_a_kernel_that_ignores_new_inputs_is_caught(vadd, monkeypatch):
    first = {}

    def stale(x, y, out):  # remembers the first inputs' answer
        out.copy_(first.setdefault("r", x + y))

    fake_gpu(monkeypatch, stale)
    with pytest.raises(gb.CheckError) as err:
        gb.check(vadd, vadd_args(), ref=add, stress=16)
    assert err.value.stress["failures"] == 16


def test_not_run_says_the_stress_run_did_not_run_either(vadd):
    res = gb.check(vadd, vadd_args(), ref=add, stress=2000)
    assert res.status == "not run" and "stress test of 2000 launches: not run either" in repr(res)


def test_stress_cases_round_trip_through_export_and_replay(vadd, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path))
    export.set_chapter("99-stress")
    try:
        gb.check(vadd, vadd_args(), ref=add, stress=64)
    finally:
        export.set_chapter("unknown")
    d = tmp_path / "cases" / "99-stress--vadd--check"
    meta = json.loads((d / "case.json").read_text())
    assert meta["format"] == export.FORMAT_VERSION >= 2
    assert meta["stress"] == 64 and meta["variants"] == 8
    data = torch.load(d / "tensors.pt")
    assert len(data["variants"]) == 8
    for v in data["variants"]:
        x, y, out = v["args"]
        assert out is None
        torch.testing.assert_close(v["expected"][0], x + y, rtol=0, atol=0)

    fake_gpu(monkeypatch, lambda x, y, out: out.copy_(x + y))
    rec = replay.run_case(d)
    assert rec["status"] == "passed"
    assert rec["stress"] == {"launches": 64, "failures": 0, "variants": 8, "first_failure": None}
    assert "stress" not in replay.run_case(d, stress=False)  # the sanitizer runs launch once

    calls = []

    def flaky(x, y, out):
        calls.append(1)
        out.copy_(x + y)
        if len(calls) == 1 + 40:
            out[0] = float("nan")

    fake_gpu(monkeypatch, flaky)
    rec = replay.run_case(d)
    assert rec["status"] == "failed" and rec["stress"]["failures"] == 1
    assert rec["stress"]["first_failure"].startswith("launch 40 (variant 7)")
    assert replay.exit_code([rec]) == 1
