"""Deliberate failures shown as lessons: the dispatcher's reasons, wrapped, without the noise."""

from __future__ import annotations

import pytest

import gpubook as gb
from gpubook.book.lessons import parse_failure

REPORT = """TIRx schedule dispatch failed: op=tirx.tile.gemm target=cuda
+-----------------------+------------------------------------------------------------------------------------------+
| Variant               | Error                                                                                    |
+-----------------------+------------------------------------------------------------------------------------------+
| mma.m16n8k* (prio=10) | rejected: no_replica — A layout has replica (T.Iter(32, 1, "laneid"),)                   |
|                       | opcall:                                                                                  |
|                       | T.warp.gemm(d[0:16, 0:64], a[0:16, 0:32], b[0:64, 0:32], d[0:16, 0:64], False, True)     |
| tcgen05 (prio=5)      | exception — ValueError: gemm_async: no-swizzle SMEM descriptors currently require the penultimate matrix dimension to be contiguous or 16B-packed |
|                       | opcall:                                                                                  |
|                       | Traceback (most recent call last):                                                       |
|                       |   File "tcgen05.py", line 1, in impl                                                     |
| other (prio=0)        | declined — no mma instruction fits M=16, N=64, K=32                                      |
+-----------------------+------------------------------------------------------------------------------------------+

Error in pass: _pipeline
@I.ir_module
class Module:
    def main(A: T.Buffer((64, 32), "float16")):
"""


def test_a_dispatch_report_becomes_one_reason_per_variant():
    r = parse_failure(REPORT)
    assert r.op == "tirx.tile.gemm"
    assert [v for v, _ in r.reasons] == ["mma.m16n8k*", "tcgen05", "other"]
    assert r.reasons[0][1] == 'A layout has replica (T.Iter(32, 1, "laneid"),) (condition no_replica)'
    assert r.reasons[1][1].startswith("ValueError: gemm_async: no-swizzle")
    assert r.reasons[2][1] == "no mma instruction fits M=16, N=64, K=32"
    text = str(r)
    for noise in ("opcall", "Traceback", "Error in pass", "ir_module", "+---", "prio="):
        assert noise not in text
    assert r.mentions("replica", "no_replica") and not r.mentions("wgmma")


@pytest.mark.parametrize("width", [60, 88])
def test_the_explanation_is_wrapped_to_the_page(width):
    r = parse_failure(REPORT)
    r.width = width
    assert all(len(line) <= width for line in r.lines())
    assert "contiguous or 16B-packed" in " ".join(r.lines())  # wrapped, not cut


def test_an_unknown_variant_is_named_with_the_registered_ones():
    r = parse_failure("TIRx schedule dispatch failed: op=tirx.tile.gemm_async target=cuda\n"
                      "no variant named 'wgmma' is registered\n\nError in pass: x\nmodule text")
    assert r.reasons == []
    assert r.note.startswith("no variant named 'wgmma' is registered; the registered ones: ")
    assert "tcgen05" in r.note
    assert "module text" not in str(r)


def test_an_error_that_is_no_dispatch_report_keeps_its_first_lines():
    r = parse_failure("InternalError: Check failed: x == y\nmore detail\n\nError in pass: p\nbody")
    assert "frame" not in str(parse_failure("ValueError: bad\nTraceback (most recent call last):\n  frame"))
    assert r.op is None and r.reasons == []
    assert str(r).startswith("InternalError: Check failed: x == y:")
    assert "more detail" in str(r) and "body" not in str(r)


def test_a_lesson_that_does_not_fail_fails():
    with pytest.raises(AssertionError, match="expected to fail"):
        gb.explain_failure(lambda: 42)


def test_a_real_refusal_from_the_mma_dispatcher():
    import lesson_kernels

    r = gb.explain_failure(gb.build, lesson_kernels.gemm_mma_replicated_a, name="gemm_mma_replicated_a")
    assert r.op == "tirx.tile.gemm"
    assert r.reasons and r.reasons[0][0] == "mma.m16n8k*"
    assert r.mentions("A layout has replica", "no_replica")
    assert all(len(line) <= gb.lessons.WIDTH for line in r.lines())
