"""Chapter 10's GEMM steps on the CPU: the configuration, the budgets, the diffs, the refusals."""

import re

import pytest
import torch

import gpubook as gb
from gpubook import gemm as gg
from gpubook.facts.hardware import B200, REGISTERS_PER_SM
from gpubook.compile.tmem import COLUMNS

CHAPTER = "10-gemm-full-speed"


# -- the configuration of the fastest published kernels --------------------------------------------
def test_sota_config_is_the_published_one():
    c = gg.SOTA
    assert c.cluster == (2, 1) and (c.mma_m, c.mma_n) == (256, 256) and c.blk_k == 64
    assert c.stages == 4 and (c.regs_producer, c.regs_consumer) == (56, 224) and c.consumers == 2
    assert (c.blk_m, c.b_rows, c.threads) == (128, 128, 384)   # per CTA: half the MMA's M and N


def test_the_register_exchange_is_exact_for_three_warpgroups():
    assert gg.launch_registers(384) == 168 and gg.launch_registers(256) == 256
    assert gg.register_exchange_fits(gg.SOTA)
    assert 384 * gg.launch_registers(384) == 128 * 56 + 256 * 224 <= REGISTERS_PER_SM


@pytest.mark.parametrize("change", [
    dict(regs_consumer=232),   # the pool would be short by 2048 registers: .inc waits forever
    dict(regs_consumer=164),   # below the launch's 168: .inc would lower the count
    dict(regs_producer=172),   # above the launch's 168: .dec would raise it
    dict(regs_producer=60),    # not a multiple of 8
    dict(regs_producer=16),    # below setmaxnreg's minimum of 24
])
def test_register_exchanges_that_break_a_rule_are_rejected(change):
    from dataclasses import replace

    assert not gg.register_exchange_fits(replace(gg.SOTA, **change))


def test_tmem_budget_of_the_accumulators():
    assert gg.tmem_budget(1, 256) == 256 and gg.tmem_budget(2, 256) == COLUMNS
    assert gg.tmem_budget(1, 200) == 256                       # rounded up to a power of two
    with pytest.raises(ValueError, match="not 768"):
        gg.tmem_budget(3, 256)


def test_smem_budgets_of_steps_8_and_9_fit_one_cta_per_sm():
    c = gg.SOTA
    v8 = gg.smem_budget(c.stages, c.blk_m, c.b_rows, c.blk_k, d_bytes=128 * 256 * 2)
    v9 = gg.smem_budget(c.stages, c.blk_m, c.b_rows, c.blk_k, d_bytes=2 * 2 * 128 * 32 * 2)
    assert (v8, v9) == (197632, 164864)                        # what the chapter's builds report
    for smem in (v8, v9):
        assert smem + 1024 <= B200.smem_per_sm < 2 * (smem + 1024)
    published = gg.smem_budget(c.stages, 2 * c.blk_m, c.b_rows, c.blk_k, d_bytes=2 * 2 * 128 * 32 * 2)
    assert published + 1024 <= B200.smem_per_sm                # 256 rows of A per CTA: still fits
    assert gg.smem_budget(c.stages + 1, 2 * c.blk_m, c.b_rows, c.blk_k, 2 * 2 * 128 * 32 * 2) > B200.smem_per_sm


# -- published figures ---------------------------------------------------------------------------------
def test_published_figures_of_steps_8_to_11():
    # a figure sits beside the step whose division of the work it measured: 9 and 10 have none
    assert [gg.published_tflops(s) for s in (8, 9, 10, 11)] == [1321.0, None, None, 1411.0]
    assert gg.published_tflops(7) < gg.published_tflops(8) < gg.published_tflops(11)
    assert gg.PUBLISHED_LADDER_STEP9 == 1462.0
    assert "f495258" in gg.PUBLISHED_SOTA_SOURCE


def test_the_model_sees_larger_tiles_quantized_into_fewer_rounds():
    c = gg.SOTA
    plan10 = gg.Plan(c.blk_m, c.mma_n, c.blk_k, in_flight=c.stages, overlap=True, refill_per_tile=False)
    stages7 = (B200.smem_per_sm - 2048 - 128 * 128 * 2) // (256 * 64 * 2)     # chapter 9's ring
    plan7 = gg.Plan(128, 128, 64, in_flight=stages7, overlap=True, refill_per_tile=False)
    b10, b7 = gg.bound(4096, 4096, 4096, plan10), gg.bound(4096, 4096, 4096, plan7)
    assert b10.limit == b7.limit == "MMAs in waves"
    assert b10.tflops < b7.tflops < B200.bf16_flops / 1e12          # 4 rounds of 512 tiles vs 7 of 1024


# -- the chapter's kernels: diffs and refusals ---------------------------------------------------------
def test_step_8_differs_from_step_7_by_the_pair():
    v7 = gg.chapter_source("09-gemm-pipelines", "make_gemm_v7")
    v8 = gg.chapter_source(CHAPTER, "make_gemm_v8")
    diff = gg.source_diff(v7, v8)
    added = [ln for ln in diff.splitlines() if ln.startswith("+")]
    assert any('dispatch="tcgen05", cta_group=2)' in ln for ln in added)
    assert any("cta_mask=3" in ln for ln in added) and any("remote_view(0)" in ln for ln in added)
    assert any("cluster_sync" in ln for ln in added) and not re.search(r"^\+.*cta_sync\(\)", diff, re.M)
    removed, plus = gg.diff_counts(v7, v8)
    assert 0 < removed < len(v7.splitlines()) // 2 and plus < len(v8.splitlines()) // 2   # a diff, not a rewrite


def test_steps_9_and_10_each_change_one_idea():
    v8, v9, v10 = (gg.chapter_source(CHAPTER, f"make_gemm_v{s}") for s in (8, 9, 10))
    d9 = gg.source_diff(v8, v9)
    assert "+        handoff = Pipeline(pool, ACCS," in d9 and "wait_group.read(1)" in d9
    assert "ClusterLaunchControlScheduler" not in d9
    d10 = gg.source_diff(v9, v10)
    assert "+        clc = ClusterLaunchControlScheduler(" in d10 and "+                clc.run_scheduler(rank)" in d10
    assert "-        sched = ClusterPersistentScheduler2D(" in d10
    changed = [ln for ln in d10.splitlines() if ln[:1] in "+-" and not ln.startswith(("+++", "---"))]
    assert not any("gemm_async" in ln or "handoff = Pipeline" in ln for ln in changed)   # the MMAs are step 9's
    for src in (v8, v9, v10):
        assert "cta_sync()" not in src and src.count("T.cuda.cluster_sync()") == 2   # setup and teardown
        assert "cta_group=1" not in src
        # the accumulator goes back to the leader with a cluster-scope release, never the default .cta one
        assert src.count("mbarrier.arrive.release.cluster.shared__cluster.b64(leader_empty[0])") == 1
        assert "handoff.empty.arrive(" not in src


def test_every_tcgen05_ld_of_the_chapter_is_waited_for():
    for s in (8, 9, 10):
        src = gg.chapter_source(CHAPTER, f"make_gemm_v{s}")
        lines = src.splitlines()
        for i, ln in enumerate(lines):
            if "Tx.wg.copy_async(" in ln:
                assert "tcgen05.wait__ld" in lines[i + 1], (s, ln)


@pytest.fixture(scope="module")
def gemm_v11():
    def never(*args, **kwargs):
        raise AssertionError("a refused call must not build anything")

    assert "def make_gemm_v11(M, N, K, dtype" in gg.chapter_source(CHAPTER, "make_gemm_v11")
    return gg.Gemm(never, "gemm_v11", gg.SOTA.blk_k)


def _half(*shape):
    return torch.zeros(*shape, dtype=torch.float16)


@pytest.mark.parametrize("make, words", [
    (lambda: (torch.zeros(256, 128), torch.zeros(256, 128)), ["unsupported dtypes", "float32"]),
    (lambda: (_half(256, 128).bfloat16(), _half(256, 128)), ["unsupported dtypes"]),
    (lambda: (_half(256, 96), _half(256, 96)), ["K = 96", "BLK_K = 64"]),
    (lambda: (_half(256, 32), _half(256, 32)), ["K = 32", "BLK_K = 64"]),
    (lambda: (_half(128, 256).t(), _half(256, 128)), ["stride 1", "K-major"]),
    (lambda: (_half(256, 136)[:, :128], _half(256, 128)), ["dense rows"]),
    (lambda: (_half(256 * 128 + 1)[1:].view(256, 128), _half(256, 128)), ["multiple of 16 bytes"]),
    (lambda: (_half(256, 128), _half(100, 128)), ["N = 100", "multiple of 8"]),
])
def test_the_final_kernel_refuses_before_building(gemm_v11, make, words):
    A, B = make()
    with pytest.raises(gb.KernelCallError) as err:
        gemm_v11(A, B)
    assert all(w in str(err.value) for w in words), str(err.value)


def test_ragged_m_and_n_are_accepted(gemm_v11):
    A, B = torch.zeros(328, 256, dtype=torch.bfloat16), torch.zeros(456, 256, dtype=torch.bfloat16)
    assert gg.problem(A, B, gg.SOTA.blk_k) == (328, 456, 256, "bfloat16")
    with pytest.raises(AssertionError, match="must not build"):
        gemm_v11(A, B)                      # accepted: it goes on to build
