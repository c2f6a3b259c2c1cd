"""gpubook.lint finds each broken ordering rule in PTX, and nothing in PTX that keeps the rules."""

from __future__ import annotations

import pytest

from gpubook import lint

GOOD = """
.visible .entry k(
.param .u64 k_param_0
)
{
.reg .b32 %r<9>;
.reg .f32 %f<3>;
mbarrier.init.shared.b64 [%r1], %r2;
fence.mbarrier_init.release.cluster;
tcgen05.alloc.cta_group::1.sync.aligned.shared::cta.b32 [%r3], 32;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
st.shared.v4.u32 [%r4], {%r5, %r6, %r7, %r8};
fence.proxy.async.shared::cta;
bar.sync 0;
tcgen05.fence::after_thread_sync;
{ .reg .pred ps0; setp.ne.b32 ps0, %r1, 0; tcgen05.mma.cta_group::1.kind::f16 [%r1], %rd1, %rd2, %r2, ps0; }
tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r1];
{
.reg .pred P1;
LAB_WAIT:
mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%r1], %r2, %r3;
@P1 bra.uni DONE;
bra.uni LAB_WAIT;
DONE:
}
tcgen05.fence::after_thread_sync;
tcgen05.ld.sync.aligned.32x32b.x2.b32 {%f1, %f2}, [%r1];
tcgen05.wait::ld.sync.aligned;
st.global.f32 [%rd3], %f1;
tcgen05.fence::before_thread_sync;
bar.sync 0;
tcgen05.fence::after_thread_sync;
tcgen05.dealloc.cta_group::1.sync.aligned.b32 %r3, 32;
ret;
}
"""


def _broken(old: str, new: str) -> str:
    assert old in GOOD
    return GOOD.replace(old, new, 1)


def test_ptx_that_keeps_every_rule_has_no_finding():
    assert lint.lint(GOOD) == []
    assert lint.report(GOOD).startswith("no finding")


@pytest.mark.parametrize("rule, old, new", [
    ("wait-ld", "tcgen05.wait::ld.sync.aligned;\n", ""),
    ("proxy-fence", "fence.proxy.async.shared::cta;\n", ""),
    ("after-sync", "DONE:\n}\ntcgen05.fence::after_thread_sync;\n", "DONE:\n}\n"),
    ("before-dealloc", "st.global.f32 [%rd3], %f1;\ntcgen05.fence::before_thread_sync;\nbar.sync 0;\n",
     "st.global.f32 [%rd3], %f1;\n"),
    ("init-fence", "fence.mbarrier_init.release.cluster;\n", ""),
])
def test_each_rule_finds_its_mistake(rule, old, new):
    found = lint.lint(_broken(old, new))
    assert [f.rule for f in found] == [rule], found


def test_remote_barriers_need_a_cluster_barrier():
    remote = GOOD.replace("st.global.f32 [%rd3], %f1;", "st.global.f32 [%rd3], %f1;\nmapa.shared::cluster.u32 %r4, %r5, %r6;")
    assert [f.rule for f in lint.lint(remote)] == ["cluster-init"]
    clustered = remote.replace("tcgen05.fence::before_thread_sync;\nbar.sync 0;\ntcgen05.fence::after_thread_sync;\nst.shared",
                               "tcgen05.fence::before_thread_sync;\nbarrier.cluster.arrive.aligned;\n"
                               "barrier.cluster.wait.aligned;\ntcgen05.fence::after_thread_sync;\nst.shared", 1)
    assert lint.lint(clustered) == []


def test_a_call_to_a_helper_that_waits_counts_as_a_wait():
    helper = (".func waiter(\n.param .b32 p\n)\n{\nmbarrier.try_wait.parity.acquire.cta.shared::cta.b64 %p1, [%r1], %r2;\nret;\n}\n")
    ptx = helper + _broken("mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 P1, [%r1], %r2, %r3;",
                           "call.uni waiter, (%r1);")
    assert lint.lint(ptx) == []
    no_fence = ptx.replace("DONE:\n}\ntcgen05.fence::after_thread_sync;\n", "DONE:\n}\n")
    assert [f.rule for f in lint.lint(no_fence)] == ["after-sync"]
