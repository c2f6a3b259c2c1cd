"""The bounded mbarrier wait, and the replay's handling of kernels that are expected to trap."""

from __future__ import annotations

import json
import re

import pytest
from tvm.script import tirx as T

import gpubook as gb
from gpubook import mbarrier, replay, runtime


def make_wait_kernel(bounded):
    """One CTA that initialises a barrier, arrives once and waits for phase 0."""

    @T.prim_func
    def one_barrier(out: T.Buffer((32,), "int32")):
        T.device_entry()
        tid = T.thread_id([32])
        pool = T.SMEMPool()
        bar = pool.alloc((1,), "uint64", align=8)
        pool.commit()
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.shared.b64(bar.ptr_to([0]), T.uint32(1))
        mbarrier.wait(bar.ptr_to([0]), 0, bar_id=3, bounded=bounded)
        out[tid] = tid

    return one_barrier


def make_pipeline_kernel():
    from tvm.tirx.lang.pipeline import Pipeline

    @T.prim_func
    def ring(out: T.Buffer((32,), "int32")):
        T.device_entry()
        tid = T.thread_id([32])
        pool = T.SMEMPool()
        pipe = Pipeline(pool, 2, full="mbar", empty="mbar")
        pool.commit()
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid == 0:
            pipe.full.arrive(0)
        pipe.full.wait(0, 0)
        out[tid] = tid

    return ring


def test_plain_and_bounded_waits_generate_what_they_claim():
    plain = gb.build(make_wait_kernel(False), name="plain_wait")
    bounded = gb.build(make_wait_kernel(True), name="bounded_wait")
    assert plain.ptx_counts["mbarrier wait"] == 1 and bounded.ptx_counts["mbarrier wait"] == 1
    assert "globaltimer" not in plain.ptx and "trap;" not in plain.ptx
    assert "%globaltimer" in bounded.ptx and re.search(r"^\s*trap;", bounded.ptx, re.M)
    assert "gpubook_mbarrier_wait_bounded(" in bounded.source
    assert re.search(r"gpubook_mbarrier_wait_bounded\(.*, 0, 3, ", bounded.source)  # phase, id
    assert "vprintf" in bounded.ptx and bounded.sass_counts.get("BPT", 0) >= 1  # report, trap


def test_the_environment_switch_is_read_when_the_kernel_is_parsed(monkeypatch):
    monkeypatch.setenv(mbarrier.BOUNDED_ENV, "1")
    assert mbarrier.bounded_default()
    assert "gpubook_mbarrier_wait_bounded" in gb.lower(make_wait_kernel(None), "sm_90a")[1].script()
    monkeypatch.setenv(mbarrier.BOUNDED_ENV, "0")
    assert "gpubook_mbarrier_wait_bounded" not in gb.lower(make_wait_kernel(None), "sm_90a")[1].script()


def test_bounded_waits_reach_the_waits_of_a_pipeline():
    from tvm.script import tirx as T_

    plain = gb.lower(make_pipeline_kernel(), "sm_90a")[1].script()
    with mbarrier.bounded_waits():
        debug = gb.lower(make_pipeline_kernel(), "sm_90a")[1].script()
    assert "mbarrier_wait" in plain and "gpubook_mbarrier_wait_bounded" not in plain
    assert "gpubook_mbarrier_wait_bounded" in debug
    assert T_.cuda.mbarrier_wait.__name__ != "<lambda>"  # restored after the block


def test_ptx_counts_see_an_instruction_behind_a_label():
    from gpubook.compile.report import count_ptx

    ptx = """
	{
.reg .pred P1;
LAB_WAIT:
mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%r1], %r2, %r3;
@P1 bra.uni DONE;
bra.uni LAB_WAIT;
DONE:
}
$L__BB0_2:
	ld.global.f32 %f5, [%rd6];
"""
    c = count_ptx(ptx)
    assert c["mbarrier wait"] == 1 and c["ld.global"] == 1


REPORT = ("gpubook: mbarrier wait timed out: barrier 0 at shared 0x400 waiting for phase parity 0; "
          "block (0,0,0) thread (0,0,0), 32 waiting lanes, 812 polls in 2000001024 ns")
META = {"case": "c", "chapter": "05", "name": "k", "kind": "check", "runs_on": ["sm_90a"],
        "fingerprint": "f", "expect": "trap", "expect_message": mbarrier.REPORT_PATTERN}


@pytest.mark.parametrize("rec, out, timed_out, status", [
    (None, REPORT + "\nRuntimeError: CUDA error: unspecified launch failure\n", False, "trapped"),
    (None, "RuntimeError: CUDA error: unspecified launch failure\n", False, "failed"),  # no report
    (None, REPORT + "\nImportError: no module\n", False, "failed"),                    # no CUDA error
    ({"status": "passed"}, "", False, "failed"),                                       # it completed
    ({"status": "failed"}, "", False, "failed"),
    (None, "", True, "timeout"),                                                       # it hung
    ({"status": "not runnable"}, "", False, "not runnable"),
])
def test_a_case_expected_to_trap_passes_only_by_trapping_with_its_report(rec, out, timed_out, status):
    res = replay.judge_trap(META, rec, out, timed_out, 120)
    assert res["status"] == status
    if status == "trapped":
        assert REPORT in res["message"] and "launch failure" in res["message"]
        assert replay.exit_code([res]) == 0
    elif status != "not runnable":
        assert replay.exit_code([res]) == 1


def test_check_never_runs_a_kernel_expected_to_trap_and_exports_the_expectation(tmp_path, monkeypatch):
    monkeypatch.setattr(runtime, "why_not_here", lambda runs_on: None)   # even where a GPU could run it
    monkeypatch.setattr(runtime, "load", lambda *a: pytest.fail("a trapping kernel was launched"))
    monkeypatch.setenv("GPUBOOK_EXPORT_DIR", str(tmp_path))
    monkeypatch.setenv("GPUBOOK_STRICT", "1")
    import torch

    k = gb.build(make_wait_kernel(True), name="bounded_wait")
    res = gb.check(k, [torch.empty(32, dtype=torch.int32)], ref=lambda out: torch.arange(32, dtype=torch.int32),
                   expect="trap", expect_output=mbarrier.REPORT_PATTERN, stress=10)
    assert not res.passed and "expected to trap" in res.reason
    case = json.loads(next(tmp_path.glob("cases/*/case.json")).read_text())
    assert case["expect"] == "trap" and case["expect_message"] == mbarrier.REPORT_PATTERN
    assert case["stress"] == 10
    with pytest.raises(ValueError):
        gb.check(k, [torch.empty(32, dtype=torch.int32)], ref=lambda out: out, expect="hang")
