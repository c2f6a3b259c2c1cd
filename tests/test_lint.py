"""gpubook.lint finds each broken ordering rule in PTX, on the path of the role that breaks it, and
nothing in PTX that keeps the rules; gb.build lints every asynchronous kernel and checks `breaks=`."""

from __future__ import annotations

import re

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


# -- the rules added to the first six, each on a fragment that breaks it and one that keeps it --
def _entry(body: str, ntid: int = 64) -> str:
    return (".visible .entry k(\n.param .u64 k_param_0\n)\n.maxntid " + str(ntid) + ", 1, 1\n{\n"
            ".reg .pred %p<8>;\n.reg .b32 %r<16>;\n.reg .b64 %rd<4>;\n.reg .b128 %rq<2>;\n" + body + "ret;\n}\n")


def _rules(ptx: str) -> list[str]:
    return [f.rule for f in lint.lint(ptx)]


WAIT_ST = _entry("tcgen05.st.sync.aligned.32x32b.x1.b32 [%r1], {%r2};\n"
                 "tcgen05.wait::st.sync.aligned;\n"
                 "mbarrier.arrive.shared.b64 _, [%r3], %r4;\n")


@pytest.mark.parametrize("handoff", ["mbarrier.arrive.shared.b64 _, [%r3], %r4;\n", "bar.sync 0;\n",
                                     "tcgen05.mma.cta_group::1.kind::f16 [%r5], [%r1], %rd2, %r6, 1;\n"])
def test_wait_st_a_tcgen05_st_is_waited_for_before_its_handoff(handoff):
    assert _rules(WAIT_ST) == []
    broken = WAIT_ST.replace("tcgen05.wait::st.sync.aligned;\n", "").replace(
        "mbarrier.arrive.shared.b64 _, [%r3], %r4;\n", handoff)
    assert _rules(broken) == ["wait-st"], lint.report(broken)


HANDOFF = _entry("tcgen05.ld.sync.aligned.32x32b.x1.b32 {%r2}, [%r1];\n"
                 "tcgen05.fence::before_thread_sync;\n"
                 "mbarrier.arrive.shared.b64 _, [%r3], %r4;\n"
                 "tcgen05.wait::ld.sync.aligned;\n"
                 "st.global.u32 [%rd1], %r2;\n")


def test_before_handoff_an_unfinished_tcgen05_ld_is_not_handed_off():
    assert _rules(HANDOFF) == []
    broken = HANDOFF.replace("tcgen05.fence::before_thread_sync;\n", "")
    found = lint.lint(broken)
    assert [f.rule for f in found] == ["before-handoff"] and found[0].instruction.startswith("mbarrier.arrive")
    waited = broken.replace("mbarrier.arrive.shared.b64 _, [%r3], %r4;\ntcgen05.wait::ld.sync.aligned;\n",
                            "tcgen05.wait::ld.sync.aligned;\nmbarrier.arrive.shared.b64 _, [%r3], %r4;\n")
    assert _rules(waited) == []               # a completed load is no hazard: the wait suffices
    committed = broken.replace("mbarrier.arrive.shared.b64", "tcgen05.commit.cta_group::1.mbarrier::arrive::one"
                               ".shared::cluster.b64 [%r3];\nmbarrier.arrive.shared.b64", 1)
    assert _rules(committed) == []            # tcgen05.commit fences like before_thread_sync


CLC = _entry("LOOP:\n"
             "mbarrier.arrive.expect_tx.shared.b64 _, [%r2], 16;\n"
             "clusterlaunchcontrol.try_cancel.async.shared::cta.mbarrier::complete_tx::bytes.b128 [%r1], [%r2];\n"
             "WAIT:\n"
             "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %r3;\n"
             "@!%p1 bra WAIT;\n"
             "ld.shared.b128 %rq1, [%r1];\n"
             "{ .reg .pred pd0; clusterlaunchcontrol.query_cancel.is_canceled.pred.b128 pd0, %rq1; "
             "selp.b32 %r4, 1, 0, pd0; }\n"
             "fence.proxy.async.shared::cta;\n"
             "bar.sync 0;\n"
             "setp.ne.s32 %p2, %r4, 0;\n"
             "@%p2 bra LOOP;\n")


def test_clc_response_is_read_after_its_wait_and_fenced_before_the_slot_is_reused():
    assert _rules(CLC) == []
    unfenced = CLC.replace("fence.proxy.async.shared::cta;\n", "")
    found = lint.lint(unfenced)
    assert [f.rule for f in found] == ["clc-response"] and "fence.proxy.async" in found[0].detail
    early = CLC.replace("WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 %p1, [%r2], %r3;\n@!%p1 bra WAIT;\n"
                        "ld.shared.b128 %rq1, [%r1];\n", "ld.shared.b128 %rq1, [%r1];\n")
    found = lint.lint(early)
    assert [f.rule for f in found] == ["clc-response"] and "before any mbarrier wait" in found[0].detail
    # the next request in the same thread needs the fence too, not only a barrier or an arrive
    alone = unfenced.replace("bar.sync 0;\n", "").replace("mbarrier.arrive.expect_tx.shared.b64 _, [%r2], 16;\n", "")
    assert _rules(alone) == ["clc-response"]


BULK = _entry("mov.u32 %r9, 0;\n"
              "LOOP:\n"
              "st.shared.v4.u32 [%r4], {%r5, %r6, %r7, %r8};\n"
              "fence.proxy.async.shared::cta;\n"
              "bar.sync 0;\n"
              "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {%r1, %r2}], [%r4];\n"
              "cp.async.bulk.commit_group;\n"
              "cp.async.bulk.wait_group.read 0;\n"
              "bar.sync 0;\n"
              "add.s32 %r9, %r9, 1;\n"
              "setp.lt.u32 %p1, %r9, 4;\n"
              "@%p1 bra LOOP;\n")


def test_bulk_store_reuse_the_source_is_not_rewritten_before_wait_group():
    assert _rules(BULK) == []
    broken = BULK.replace("cp.async.bulk.wait_group.read 0;\n", "")
    found = lint.lint(broken)
    assert [f.rule for f in found] == ["bulk-store-reuse"] and found[0].instruction.startswith("st.shared")
    plain = broken.replace("cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {%r1, %r2}], [%r4];",
                           "cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r4], 64;")
    assert _rules(plain) == ["bulk-store-reuse"]
    # two staging buffers, each written once and stored, then one wait: no reuse
    unrolled = _entry("st.shared.v4.u32 [%r4], {%r5, %r6, %r7, %r8};\nfence.proxy.async.shared::cta;\n"
                      "cp.async.bulk.global.shared::cta.bulk_group [%rd1], [%r4], 64;\ncp.async.bulk.commit_group;\n"
                      "st.shared.v4.u32 [%r10], {%r5, %r6, %r7, %r8};\nfence.proxy.async.shared::cta;\n"
                      "cp.async.bulk.global.shared::cta.bulk_group [%rd2], [%r10], 64;\ncp.async.bulk.commit_group;\n"
                      "cp.async.bulk.wait_group.read 0;\n")
    assert _rules(unrolled) == []


WGMMA = _entry("st.shared.v4.u32 [%r4], {%r5, %r6, %r7, %r8};\n"
               "fence.proxy.async.shared::cta;\n"
               "bar.sync 0;\n"
               "wgmma.fence.sync.aligned;\n"
               "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%r1, %r2, %r3, %r9}, %rd1, %rd2, 1, 1, 1, 0, 0;\n"
               "wgmma.commit_group.sync.aligned;\n"
               "wgmma.wait_group.sync.aligned 0;\n", ntid=128)


def test_proxy_fence_covers_wgmma_operands():
    assert _rules(WGMMA) == []
    assert _rules(WGMMA.replace("fence.proxy.async.shared::cta;\n", "")) == ["proxy-fence"]
    assert _rules(WGMMA.replace("fence.proxy.async.shared::cta;\n", "fence.proxy.async.global;\n")) == ["proxy-fence"]


# -- roles: a fence in one role's branch does not keep another role's rule --------------------
ROLES = _entry("mov.u32 %r1, %tid.x;\n"
               "shr.u32 %r2, %r1, 5;\n"
               "setp.eq.s32 %p1, %r2, 0;\n"
               "@%p1 bra PRODUCER;\n"
               "st.shared.u32 [%r5], %r4;\n"      # warp 1: its own store ...
               "CONSUMER_FENCE"
               "bra.uni MMA;\n"
               "PRODUCER:\n"
               "st.shared.u32 [%r3], %r4;\n"      # warp 0: a store and its fence
               "fence.proxy.async.shared::cta;\n"
               "MMA:\n"
               "bar.sync 0;\n"
               "tcgen05.fence::after_thread_sync;\n"
               "tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd1, %rd2, %r7, 1;\n")


def test_a_fence_in_the_producers_branch_does_not_keep_the_consumers_rule():
    # In program order the producer's fence stands between the consumer's store and the MMA; the
    # consumer never executes it.
    one_sided = ROLES.replace("CONSUMER_FENCE", "")
    found = lint.lint(one_sided)
    assert [f.rule for f in found] == ["proxy-fence"] and "st.shared.u32 [%r5]" in found[0].detail
    assert _rules(ROLES.replace("CONSUMER_FENCE", "fence.proxy.async.shared::cta;\n")) == []
    guarded = ROLES.replace("CONSUMER_FENCE", "@%p1 fence.proxy.async.shared::cta;\n")
    assert _rules(guarded) == ["proxy-fence"]        # a guarded fence closes nothing


def test_branches_on_the_role_are_followed_only_the_way_the_role_goes():
    # Warp 0 stores, and later (a second branch on the same %tid condition) fences and issues
    # the MMA; the other warp does neither. No path of one thread stores without fencing.
    ptx = _entry("mov.u32 %r1, %tid.x;\nshr.u32 %r2, %r1, 5;\nsetp.ne.s32 %p1, %r2, 0;\n"
                 "@%p1 bra SKIP1;\nst.shared.u32 [%r3], %r4;\nSKIP1:\nbar.sync 0;\n"
                 "setp.eq.s32 %p2, %r1, 0;\n@!%p2 bra SKIP2;\nfence.proxy.async.shared::cta;\n"
                 "tcgen05.fence::after_thread_sync;\n"
                 "tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd1, %rd2, %r7, 1;\nSKIP2:\n")
    # thread 0 fences; threads 1-31 store and never fence, but they issue no MMA either
    assert _rules(ptx) == []
    # the MMA issued by every thread of warp 0, the fence by thread 0 only: threads 1-31 break it
    wider = ptx.replace("fence.proxy.async.shared::cta;\ntcgen05.fence::after_thread_sync;\n"
                        "tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd1, %rd2, %r7, 1;\nSKIP2:\n",
                        "fence.proxy.async.shared::cta;\nSKIP2:\n@%p1 bra SKIP3;\ntcgen05.fence::after_thread_sync;\n"
                        "tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd1, %rd2, %r7, 1;\nSKIP3:\n")
    assert _rules(wider) == ["proxy-fence"]


def test_labels_are_resolved_in_their_inline_asm_scope():
    # Two inline-asm waits reuse the label names; each loop must branch within its own block.
    wait = ("{\n.reg .pred P1;\nLAB_WAIT:\nmbarrier.try_wait.parity.shared::cta.b64 P1, [%r1], %r2;\n"
            "@P1 bra.uni DONE;\nbra.uni LAB_WAIT;\nDONE:\n}\n")
    ptx = _entry(wait + "tcgen05.fence::after_thread_sync;\n" + wait +
                 "tcgen05.fence::after_thread_sync;\ntcgen05.ld.sync.aligned.32x32b.x1.b32 {%r5}, [%r6];\n"
                 "tcgen05.wait::ld.sync.aligned;\n")
    assert _rules(ptx) == []
    assert _rules(ptx.replace("tcgen05.fence::after_thread_sync;\ntcgen05.ld", "tcgen05.ld")) == ["after-sync"]


# -- the build lints every asynchronous kernel, and checks what a kernel declares it breaks ----
def _init_kernel(fenced: bool, fencing_thread: int = 0):
    from tvm.script import tirx as T

    @T.prim_func
    def init_publish(out: T.Buffer((128,), "int32")):
        T.device_entry()
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        bar = pool.alloc((1,), "uint64", align=8)
        pool.commit()
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
        if fenced and tid == fencing_thread:
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        out[tid] = tid

    return init_publish


def test_build_lints_an_asynchronous_kernel_and_reports_it_in_its_facts():
    import gpubook as gb

    k = gb.build(_init_kernel(True), name="init_fenced", archs=(gb.BLACKWELL,))
    assert k.lint_breaks == () and k.facts()["lint"] == "clean"
    with pytest.raises(ValueError, match=r"(?s)init_unfenced breaks the PTX ordering rules.*\[init-fence\]"):
        gb.build(_init_kernel(False), name="init_unfenced", archs=(gb.BLACKWELL,))
    k = gb.build(_init_kernel(False), name="init_unfenced", archs=(gb.BLACKWELL,), breaks=("init-fence",))
    assert k.lint_breaks == ("init-fence",) and k.facts()["lint"] == ["init-fence"]


def test_build_fails_when_a_declared_break_is_not_found():
    import gpubook as gb

    with pytest.raises(ValueError, match="declares breaks=.*finds no init-fence"):
        gb.build(_init_kernel(True), name="init_fenced", archs=(gb.BLACKWELL,), breaks=("init-fence",))
    with pytest.raises(ValueError, match="names no lint rule: init-fences"):
        gb.build(_init_kernel(True), name="init_fenced", archs=(gb.BLACKWELL,), breaks=("init-fences",))
    with pytest.raises(ValueError, match="no asynchronous operation"):
        lint.check_declared("plain", ".visible .entry k()\n{\nret;\n}\n", ("wait-ld",))


def test_a_real_kernel_whose_fence_runs_in_another_thread_than_its_init_is_found():
    import gpubook as gb

    # Thread 1 fences what thread 0 initialised: in program order the fence stands between the
    # init and the barrier, but on thread 0's path there is none.
    with pytest.raises(ValueError, match=r"\[init-fence\]"):
        gb.build(_init_kernel(True, fencing_thread=1), name="init_other_fence", archs=(gb.BLACKWELL,))


# -- wgmma groups: the slot a wgmma reads and the registers it writes wait for its wait_group --
# A consumer's loop as in chapter 11H, step 3: S = Q K_j^T and O += P V_{j-1} in flight at once;
# K_j handed back after the wait_group 1 that retires S, V after the wait_group 0 that retires
# P V. The barriers' addresses change with the loop counter, so the lint cannot compute them.
RING = _entry("mov.u32 %r9, 0;\n"
              "LOOP:\n"
              "and.b32 %r10, %r9, 1;\nshl.b32 %r11, %r10, 3;\nadd.s32 %r1, %r11, 8;\n"
              "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;\n"          # K_j is full
              "wgmma.fence.sync.aligned;\n"
              "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;\n"
              "wgmma.commit_group.sync.aligned;\n"
              "add.s32 %r3, %r11, 24;\n"
              "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r3], %r2;\n"          # V_{j-1} is full
              "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f5, %f6, %f7, %f8}, {%r4, %r5, %r6, %r7}, "
              "%rd3, 1, 1, 1, 1;\n"
              "wgmma.commit_group.sync.aligned;\n"
              "wgmma.wait_group.sync.aligned 1;\n"
              "add.s32 %r12, %r11, 40;\n"
              "mbarrier.arrive.shared.b64 _, [%r12], 1;\n"                           # K_j is free
              "add.f32 %f9, %f1, %f2;\n"                                              # softmax reads S
              "wgmma.wait_group.sync.aligned 0;\n"
              "add.s32 %r13, %r11, 56;\n"
              "mbarrier.arrive.shared.b64 _, [%r13], 1;\n"                           # V_{j-1} is free
              "add.f32 %f10, %f5, %f6;\n"                                             # O rescaled
              "add.s32 %r9, %r9, 1;\nsetp.lt.u32 %p2, %r9, 8;\n@%p2 bra LOOP;\n", ntid=128)
V_FREE = "wgmma.wait_group.sync.aligned 0;\nadd.s32 %r13, %r11, 56;\nmbarrier.arrive.shared.b64 _, [%r13], 1;\n"


def _moved(ptx: str, old: str, after: str, new: str | None = None) -> str:
    """ptx with `old` taken out and `new` (by default `old`) put right after `after`."""
    assert old in ptx and after in ptx
    return ptx.replace(old, "", 1).replace(after, after + (old if new is None else new), 1)


def test_wgmma_release_a_slot_goes_back_after_the_wait_group_that_retires_its_reader():
    assert _rules(RING) == []
    # V handed back one wgmma early: after the wait_group 1 that retires S only, while P V reads it
    early = _moved(RING, "add.s32 %r13, %r11, 56;\nmbarrier.arrive.shared.b64 _, [%r13], 1;\n",
                   "mbarrier.arrive.shared.b64 _, [%r12], 1;\n")
    found = lint.lint(early)
    assert [f.rule for f in found] == ["wgmma-release"] and "[%r13]" in found[0].instruction, found
    # the same arrive before the K arrive: the count cannot tell which of the two is early,
    # and one of them is found
    assert _rules(_moved(RING, "add.s32 %r13, %r11, 56;\nmbarrier.arrive.shared.b64 _, [%r13], 1;\n",
                         "wgmma.wait_group.sync.aligned 1;\n")) == ["wgmma-release"]
    # both handed back with no wait at all
    unwaited = RING.replace("wgmma.wait_group.sync.aligned 1;\n", "").replace(V_FREE, "add.s32 %r13, %r11, 56;\n"
                                                                              "mbarrier.arrive.shared.b64 _, [%r13], 1;\n"
                                                                              "wgmma.wait_group.sync.aligned 0;\n")
    assert "wgmma-release" in _rules(unwaited)


def test_wgmma_release_counts_what_each_wait_group_retires():
    # wait_group 0 in place of 1 retires both groups: more waiting is always allowed
    assert _rules(RING.replace("wait_group.sync.aligned 1", "wait_group.sync.aligned 0")) == []
    # a second wait_group 1 in place of the 0 retires nothing more: V's arrive is early, O unread
    twice = RING.replace(V_FREE, V_FREE.replace("aligned 0", "aligned 1"))
    assert sorted(_rules(twice)) == ["wgmma-acc", "wgmma-release"]
    assert _rules(twice.replace("add.f32 %f10, %f5, %f6;\n", "")) == ["wgmma-release"]


# A GEMM's main loop as in chapter 10H: one group in flight; stage it - 1 handed back after the
# wait_group 1 that retires it, from the second iteration on (a branch on the loop counter).
GEMM_LOOP = _entry("mov.u32 %r9, 0;\n"
                   "LOOP:\n"
                   "shl.b32 %r11, %r9, 3;\nand.b32 %r1, %r11, 24;\n"
                   "mbarrier.try_wait.parity.shared::cta.b64 %p1, [%r1], %r2;\n"
                   "wgmma.fence.sync.aligned;\n"
                   "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, 1, 1, 1, 0, 0;\n"
                   "wgmma.commit_group.sync.aligned;\n"
                   "wgmma.wait_group.sync.aligned 1;\n"
                   "setp.eq.s32 %p3, %r9, 0;\n@%p3 bra SKIP;\n"
                   "add.s32 %r12, %r1, 32;\n"
                   "mbarrier.arrive.shared.b64 _, [%r12], 1;\n"
                   "SKIP:\n"
                   "add.s32 %r9, %r9, 1;\nsetp.lt.u32 %p2, %r9, 8;\n@%p2 bra LOOP;\n"
                   "wgmma.wait_group.sync.aligned 0;\n"
                   "mbarrier.arrive.shared.b64 _, [%r12], 1;\n"
                   "st.global.f32 [%rd3], %f1;\n", ntid=128)


def test_wgmma_release_in_a_loop_and_its_fill():
    # the first iteration's path with the arrive is one no thread takes (the fill): not judged
    assert _rules(GEMM_LOOP) == []
    # the current stage handed back: the loop keeps two groups in flight and has no grant left
    current = GEMM_LOOP.replace("wgmma.wait_group.sync.aligned 1;\n", "", 1)
    assert _rules(current) == ["wgmma-release"]
    # the accumulator stored before the last wait_group
    assert _rules(_moved(GEMM_LOOP, "st.global.f32 [%rd3], %f1;\n", "@%p2 bra LOOP;\n")) == ["wgmma-acc"]


def test_wgmma_acc_registers_wait_for_their_wait_group():
    # S read by the softmax before the wait_group 1 that retires it
    early = _moved(RING, "add.f32 %f9, %f1, %f2;\n", "wgmma.commit_group.sync.aligned;\n")
    found = lint.lint(early)
    assert [f.rule for f in found] == ["wgmma-acc"] and "%f1" in found[0].detail, found
    # O rescaled after the wait_group 1, which leaves P V in flight
    assert _rules(_moved(RING, "add.f32 %f10, %f5, %f6;\n", "mbarrier.arrive.shared.b64 _, [%r12], 1;\n")) \
        == ["wgmma-acc"]
    # the A fragment of the register form written while P V reads it
    frag = RING.replace("add.f32 %f9, %f1, %f2;\n", "add.f32 %f9, %f1, %f2;\nmov.b32 %r5, %r9;\n")
    found = lint.lint(frag)
    assert [f.rule for f in found] == ["wgmma-acc"] and "A fragment" in found[0].detail
    # P V taking S's accumulator as its A fragment while S = Q K^T is still in flight
    unretired = RING.replace("{%r4, %r5, %r6, %r7}", "{%f1, %f2, %f3, %f4}")
    found = lint.lint(unretired)   # and the softmax then reads P V's A fragment while P V runs
    assert [f.rule for f in found] == ["wgmma-acc"] * 2, found
    assert "the wgmma at instruction" in found[0].detail and "A fragment" in found[1].detail, found
    # a second wgmma chaining on the same accumulator needs no wait
    chained = RING.replace("wgmma.commit_group.sync.aligned;\nadd.s32 %r3",
                           "wgmma.mma_async.sync.aligned.m64n8k16.f32.f16.f16 {%f1, %f2, %f3, %f4}, %rd1, %rd2, "
                           "1, 1, 1, 0, 0;\nwgmma.commit_group.sync.aligned;\nadd.s32 %r3", 1)
    assert _rules(chained) == []


# -- bulk-store-reuse counts bulk groups: two staging buffers written in turn by an unrolled
# epilogue (addresses the lint computes: the shared array at 0), one bulk store each
def _epilogue(wait: int, chunks: int = 4) -> str:
    body = ""
    for c in range(chunks):
        buf = 1024 * (c % 2)
        body += (f"cp.async.bulk.wait_group.read {wait};\n"
                 f"st.shared.v4.u32 [smem+{buf}], {{%r5, %r6, %r7, %r8}};\n"
                 "fence.proxy.async.shared::cta;\n"
                 f"cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {{%r1, %r{c + 2}}}], [smem+{buf}];\n"
                 "cp.async.bulk.commit_group;\n")
    return _entry(".shared .align 1024 .b8 smem[2048];\n" + body + "cp.async.bulk.wait_group 0;\n", ntid=32)


def test_bulk_store_reuse_counts_the_buffers_between_stores():
    # two buffers: the one about to be rewritten was stored one group before the newest
    assert _rules(_epilogue(1)) == [] and _rules(_epilogue(0)) == []
    found = lint.lint(_epilogue(2))   # chunk 2 rewrites buffer 0, chunk 3 buffer 1
    assert [f.rule for f in found] == ["bulk-store-reuse"] * 2 and "N <= 1" in found[0].detail, found
    # two chunks only: no buffer is written twice, whatever N
    assert _rules(_epilogue(5, chunks=2)) == []
    # a store at an address the lint cannot compute is the same buffer as itself only
    blind = _epilogue(2).replace("[smem+1024], {", "[%r11], {")
    assert _rules(blind) == ["bulk-store-reuse"]   # buffer 0 (chunks 0 and 2) is still found


def test_bulk_store_reuse_in_a_rolled_loop_needs_wait_group_0():
    assert _rules(BULK) == []
    assert _rules(BULK.replace("wait_group.read 0", "wait_group.read 1")) == ["bulk-store-reuse"]
    # a wait before the commit retires nothing of the store it should cover
    early = _moved(BULK, "cp.async.bulk.wait_group.read 0;\n",
                   "cp.async.bulk.tensor.2d.global.shared::cta.tile.bulk_group [%rd1, {%r1, %r2}], [%r4];\n")
    assert _rules(early) == ["bulk-store-reuse"]


def test_wgmma_release_leaves_a_barrier_at_a_fixed_address_out_of_the_count():
    # Q's one slot, at an address the lint computes, handed back with K after the wait_group 1
    # (chapter 11H, step 6, after a tile's last S): neither counted nor judged
    q_free = "mov.u32 %r14, 16;\nmbarrier.arrive.shared.b64 _, [%r14], 1;\n"
    with_q = RING.replace("mbarrier.arrive.shared.b64 _, [%r12], 1;\n",
                          "mbarrier.arrive.shared.b64 _, [%r12], 1;\n" + q_free)
    assert _rules(with_q) == []
    # the same arrive at an address that changes with the loop counter is counted
    ring_q = with_q.replace("mov.u32 %r14, 16;\n", "add.s32 %r14, %r11, 72;\n")
    assert _rules(ring_q) == ["wgmma-release"]


def _states(ptx: str, monkeypatch, every_step: bool) -> tuple[list, list]:
    """The lint's findings and the state entering every reached instruction, role by role; with
    `every_step` the scan calls the transfer function at every instruction (no inert one)."""
    from gpubook.compile import lint as mod
    seen: list = []
    scan = mod.scan
    monkeypatch.setattr(mod, "scan", lambda *a: seen.append(scan(*a)) or seen[-1])
    if every_step:
        monkeypatch.setattr(mod, "_ACTIVE", re.compile(""))
    found = [str(f) for f in mod._scan(ptx)]
    monkeypatch.undo()
    return found, seen


@pytest.mark.parametrize("name", ["good", "wait-ld", "proxy-fence", "ring", "ring-early", "frag", "epilogue"])
def test_passing_an_inert_instruction_through_changes_no_state(name, monkeypatch):
    ptx = {
        "good": GOOD,
        "wait-ld": _broken("tcgen05.wait::ld.sync.aligned;\n", ""),
        "proxy-fence": _broken("fence.proxy.async.shared::cta;\n", ""),
        "ring": RING,
        "ring-early": _moved(RING, "add.f32 %f9, %f1, %f2;\n", "wgmma.commit_group.sync.aligned;\n"),
        "frag": RING.replace("add.f32 %f9, %f1, %f2;\n", "add.f32 %f9, %f1, %f2;\nmov.b32 %r5, %r9;\n"),
        "epilogue": _epilogue(1, 4),
    }[name]
    fast, slow = _states(ptx, monkeypatch, False), _states(ptx, monkeypatch, True)
    assert fast == slow and slow[1] and any(len(s) > 1 for s in slow[1])
