"""`static.wgmma_async`: the SASS of a wgmma kernel keeps one WARPGROUP.DEPBAR per wgmma.wait_group
(and an ARRIVE per wgmma.fence at least), which ptxas breaks when it serializes the MMAs."""

from types import SimpleNamespace

import pytest

from gpubook.verify import static

PTX = """
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1, %f2}, %rd1, %rd2, p, 1, 1, 0, 0;
    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f1, %f2}, %rd3, %rd4, p, 1, 1, 0, 0;
    wgmma.commit_group.sync.aligned;
    @%p1 bra $L__BB0_2;
$L__BB0_2:
    wgmma.fence.sync.aligned;
    wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {%f3, %f4}, {%r1, %r2, %r3, %r4}, %rd5, p, 1, 1, 1;
    wgmma.commit_group.sync.aligned;
    wgmma.wait_group.sync.aligned 1;
    wgmma.wait_group.sync.aligned 0;
"""


def sass(*ops: str) -> str:
    return "\n".join(f"        /*{16 * i:04x}*/                   {op} ;" for i, op in enumerate(ops))


ASYNC = sass("WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0",
             "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0", "@P0 BRA 0x100", "WARPGROUP.ARRIVE",
             "HGMMA.64x128x16.F32.BF16 R88, R16, gdesc[UR12], R88, gsb0",
             "WARPGROUP.DEPBAR.LE gsb0, 0x1", "WARPGROUP.DEPBAR.LE gsb0, 0x0")
# ptxas's serialized form: every HGMMA fenced and waited for on its own
SERIAL = sass("WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR4], RZ, !UPT, gsb0",
              "WARPGROUP.DEPBAR.LE gsb0, 0x0", "WARPGROUP.ARRIVE",
              "HGMMA.64x128x16.F32.BF16 R24, gdesc[UR8], R24, gsb0", "WARPGROUP.DEPBAR.LE gsb0, 0x0",
              "WARPGROUP.ARRIVE", "HGMMA.64x128x16.F32.BF16 R88, R16, gdesc[UR12], R88, gsb0",
              "WARPGROUP.DEPBAR.LE gsb0, 0x0", "WARPGROUP.DEPBAR.LE gsb0, 0x1", "WARPGROUP.DEPBAR.LE gsb0, 0x0")


def test_asynchronous_wgmma_counts_match_the_ptx():
    k = SimpleNamespace(name="k", ptx=PTX, sass=ASYNC)
    assert static.wgmma_async(k) == {"ARRIVE": 2, "DEPBAR": 2}


def test_serialized_wgmma_is_refused_with_both_counts():
    k = SimpleNamespace(name="serial", ptx=PTX, sass=SERIAL)
    with pytest.raises(AssertionError, match=r"serial.*'ARRIVE': 3, 'DEPBAR': 5.*'ARRIVE': 2, 'DEPBAR': 2"):
        static.wgmma_async(k)


def test_an_arrive_added_without_a_wait_is_not_serialization():
    extra = ASYNC.replace("WARPGROUP.ARRIVE", "WARPGROUP.ARRIVE ;\n        /*ffff*/ WARPGROUP.ARRIVE", 1)
    k = SimpleNamespace(name="k", ptx=PTX, sass=extra)
    assert static.wgmma_async(k) == {"ARRIVE": 3, "DEPBAR": 2}


def test_a_kernel_without_wgmma_proves_nothing():
    k = SimpleNamespace(name="none", ptx="bar.sync 0;\n", sass=sass("BAR.SYNC.DEFER_BLOCKING 0x0"))
    with pytest.raises(AssertionError):
        static.wgmma_async(k)
