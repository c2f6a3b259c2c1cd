"""The GEMM ladder's helpers on the CPU: refused calls, tolerances, the model, tables, diffs."""

import math

import pytest
import torch

import gpubook as gb
from gpubook import gemm as gg
from gpubook.facts.hardware import B200


def _ab(M=256, N=136, K=128, dtype=torch.float16):
    return torch.randn(M, K).to(dtype), torch.randn(N, K).to(dtype)


# -- refused calls --------------------------------------------------------------------------------
def test_a_valid_call_is_described():
    A, B = _ab()
    assert gg.problem(A, B, 64) == (256, 136, 128, "float16")
    A, B = _ab(dtype=torch.bfloat16)
    assert gg.problem(A, B, 64)[3] == "bfloat16"


@pytest.mark.parametrize("make, words", [
    (lambda: (torch.randn(128, 128), torch.randn(128, 128)), ["unsupported dtypes", "float32"]),
    (lambda: (_ab()[0], _ab(dtype=torch.bfloat16)[1]), ["unsupported dtypes", "bfloat16"]),
    (lambda: (_ab(K=96)[0], _ab(K=96)[1]), ["K = 96", "multiple of BLK_K = 64"]),
    (lambda: (_ab(K=128)[0], _ab(K=192)[1]), ["same K"]),
    (lambda: (_ab()[0].t().contiguous().t(), _ab()[1]), ["stride 1", "K-major"]),
    (lambda: (torch.randn(256, 136).half()[:, :128], _ab()[1]), ["272 bytes apart", "dense rows"]),
    (lambda: (torch.randn(256 * 128 + 1).half()[1:].view(256, 128), _ab()[1]), ["multiple of 16 bytes"]),
    (lambda: _ab(N=100), ["N = 100", "200 bytes apart", "multiple of 8"]),
    (lambda: (torch.randn(0, 128).half(), _ab()[1]), ["empty output"]),
    (lambda: (torch.randn(4, 4, 4).half(), _ab()[1]), ["must be a matrix"]),
])
def test_bad_calls_are_refused_naming_the_rule(make, words):
    A, B = make()
    with pytest.raises(gg.GemmCallError) as err:
        gg.problem(A, B, 64)
    assert all(w in str(err.value) for w in words), str(err.value)
    assert isinstance(err.value, gb.KernelCallError)


def test_both_ladders_share_the_operand_rules():
    from gpubook.book.gemm_hopper import gemm_problem

    A, B = _ab(K=96)
    for refuse in (lambda: gg.problem(A, B, 64), lambda: gemm_problem(A, B, 64)):
        with pytest.raises(gg.GemmCallError, match="K = 96 is not a positive multiple of BLK_K = 64"):
            refuse()
    A, B = _ab(M=64, N=64, K=4)  # dense rows of 8 bytes: no tensor map can stride by them
    with pytest.raises(gg.GemmCallError, match="rows are 8 bytes apart, and tensor maps need a row stride"):
        gg.validate_operands(A, B, 4, mma="wgmma", reads="tensor maps", writes="TMA stores")


def test_pinned_sizes_are_refused():
    A, B = _ab(M=256, N=128, K=64)
    with pytest.raises(gg.GemmCallError, match="M = 256: this step computes M = 128 only"):
        gg.problem(A, B, 64, m=128, n=128, k=64)


def test_the_wrapper_refuses_before_building():
    def never(*args, **kwargs):
        raise AssertionError("a refused call must not build anything")

    gemm = gg.Gemm(never, "never", 64)
    A, B = _ab(K=100)
    with pytest.raises(gg.GemmCallError):
        gemm(A, B)


# -- tolerances -----------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_fp32_accumulation_stays_inside_the_tolerance(dtype):
    torch.manual_seed(0)
    A, B = _ab(M=64, N=48, K=512, dtype=dtype)
    rtol, atol = gg.tolerance(A, B)
    # fp32 accumulation in K order, as a tensor core might add, then one rounding
    acc = torch.zeros(64, 48)
    for k in range(512):
        acc += A[:, k : k + 1].float() * B[:, k : k + 1].float().T
    D = acc.to(dtype)
    ref = gg.reference(A, B)
    diff = (D.double() - ref.double()).abs()
    assert bool((diff <= atol + rtol * ref.double().abs()).all())


def test_the_tolerance_catches_one_wrong_product():
    A, B = _ab(M=32, N=32, K=128)
    rtol, atol = gg.tolerance(A, B)
    ref = gg.reference(A, B)
    D = ref.clone()
    D[3, 5] += 1.0  # one product of size about one, misplaced
    diff = (D.double() - ref.double()).abs()
    assert not bool((diff <= atol + rtol * ref.double().abs()).all())


def test_tolerance_is_argued_from_unit_roundoff():
    A, B = _ab(M=8, N=8, K=64)
    rtol, atol = gg.tolerance(A, B)
    assert rtol == pytest.approx(2 * 2**-11 / (1 - 2**-11))
    assert atol == pytest.approx((gg.fp32_sum_atol(A, B) + 2**-24) / (1 - 2**-11))


# -- the model ------------------------------------------------------------------------------------
def test_compute_and_memory_floors_are_chapter_2s():
    plan = gg.Plan(128, 128, 64, in_flight=4, overlap=True)
    b = gg.bound(4096, 4096, 4096, plan)
    assert b.compute_s == pytest.approx(2 * 4096**3 / B200.bf16_flops)
    assert b.memory_s == pytest.approx(3 * 4096**2 * 2 / B200.hbm_bandwidth)
    assert b.seconds == max(b.compute_s, b.memory_s, b.latency_s)
    assert b.tflops == pytest.approx(2 * 4096**3 / b.seconds / 1e12)


def test_synchronous_steps_pay_a_round_trip_per_k_tile():
    plan = gg.Plan(128, 128, 64, ctas_per_sm=4)
    b = gg.bound(4096, 4096, 4096, plan, latency_ns=800)
    rounds = math.ceil(32 * 32 / (B200.sms * 4))
    mma = 2 * 128 * 128 * 64 / (B200.bf16_flops / B200.sms)
    assert b.latency_s == pytest.approx(rounds * 64 * (800e-9 + mma))
    assert b.limit == "latency"


def test_a_deeper_ring_never_makes_the_bound_worse():
    times = [gg.bound(4096, 4096, 4096, gg.Plan(128, 128, 64, in_flight=s, overlap=True)).seconds
             for s in (1, 2, 4, 8)]
    assert times == sorted(times, reverse=True)
    ahead = gg.bound(4096, 4096, 4096, gg.Plan(128, 128, 64, in_flight=4, overlap=True,
                                               refill_per_tile=False))
    assert ahead.seconds <= times[2]


# -- published figures, tables, figures, diffs ----------------------------------------------------
def test_published_figures_match_the_reference_note():
    assert gg.published_tflops(4) == pytest.approx(280, rel=0.01)
    assert gg.published_tflops(7) == pytest.approx(598, rel=0.01)
    assert 1.9 < gg.published_tflops(1) < gg.published_tflops(3) < 2.6
    assert gg.published_tflops(5) is None


def test_ladder_table_says_not_measured_without_results():
    plan = gg.Plan(128, 128, 64)
    rows = [gg.Row(3, "gemm_v3", "a grid", (4096,) * 3, gg.bound(4096, 4096, 4096, plan),
                   gg.published_tflops(3), None)]
    md = gg.ladder_markdown(rows)
    assert "not measured" in md and "(latency)" in md and "2.56" in md
    rows[0].measured = {"ms": 0.5, "run": {"gpu": "NVIDIA B200", "date": "2026-12-01"}}
    md = gg.ladder_markdown(rows)
    assert f"{2 * 4096**3 / 0.5e-3 / 1e12:,.0f} (B200, 2026-12-01)" in md


def test_ladder_figure_draws_every_step():
    plan = gg.Plan(128, 128, 64)
    rows = [gg.Row(s, f"gemm_v{s}", "", (4096,) * 3, gg.bound(4096, 4096, 4096, plan),
                   gg.published_tflops(s), None) for s in (3, 4, 5)]
    fig = gg.plot_ladder(rows)
    ax = fig.axes[0]
    assert len([p for p in ax.patches]) == 3
    assert any("none yet" in t.get_text() for t in ax.get_legend().get_texts())
    # one shape for all: named once under the axis, so five labels never run into each other
    assert [t.get_text() for t in ax.get_xticklabels()] == ["step 3", "step 4", "step 5"]
    assert "4096 × 4096 × 4096" in ax.get_xlabel()


def _old(x):
    y = x + 1
    return y


def _new(x):
    y = x + 2
    return y


def test_source_diff_shows_only_the_change():
    diff = gg.source_diff(_old, _new)
    assert "-    y = x + 1" in diff and "+    y = x + 2" in diff
    assert gg.diff_counts(_old, _new) == (2, 2)  # the def line and the body line


def test_a_shown_diff_names_both_functions_and_counts_the_lines():
    page = gg.diff_html(_old, _new)
    caption, block = page.split("</p>", 1)
    assert "<code class=\"docutils literal notranslate\">_old</code> to <code class=\"docutils literal notranslate\">_new</code>" in caption
    assert "2 lines out, 2 in" in caption
    assert '<div class="highlight-diff notranslate"><div class="highlight"><pre>' in block
    assert '<span class="gi">+    y = x + <ins class="gpubook-diff-x">2</ins></span>' in block


# -- static facts and sources from the chapters ---------------------------------------------------
PTX_FENCED = """
    st.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};
    fence.proxy.async.shared::cta;
    bar.sync 0;
    tcgen05.mma.cta_group::1.kind::f16 [%r6], %rd1, %rd2, %r7, p;
"""


def test_proxy_fenced_wants_fence_then_barrier_after_the_last_store():
    assert gg.proxy_fenced(PTX_FENCED, r"tcgen05\.mma")
    fence_first = PTX_FENCED.replace("    st.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};\n", "")
    fence_first = fence_first.replace("    fence.proxy.async.shared::cta;\n",
                                      "    fence.proxy.async.shared::cta;\n    st.shared.u32 [%r1], %r2;\n")
    assert not gg.proxy_fenced(fence_first, r"tcgen05\.mma")                 # the fence orders nothing
    assert not gg.proxy_fenced(PTX_FENCED.replace("    bar.sync 0;\n", ""), r"tcgen05\.mma")
    assert not gg.proxy_fenced(PTX_FENCED, r"cp\.async\.bulk\.tensor")       # no such consumer


PTX_REFILL = PTX_FENCED + """    tcgen05.commit.cta_group::1.mbarrier::arrive::one.shared::cluster.b64 [%r8];
    mbarrier.try_wait.parity.shared::cta.b64 p, [%r8], %r9;
    fence.proxy.async.shared::cta;
    st.shared.v4.u32 [%r1], {%r2, %r3, %r4, %r5};
"""


def test_refill_fenced_wants_a_fence_between_the_wait_and_the_next_store():
    assert gg.refill_fenced(PTX_REFILL)
    wait_then_store = PTX_REFILL.replace(
        "    mbarrier.try_wait.parity.shared::cta.b64 p, [%r8], %r9;\n    fence.proxy.async.shared::cta;\n",
        "    fence.proxy.async.shared::cta;\n    mbarrier.try_wait.parity.shared::cta.b64 p, [%r8], %r9;\n")
    assert not gg.refill_fenced(wait_then_store)                  # a fence before the wait orders nothing
    assert not gg.refill_fenced(PTX_REFILL.replace("tcgen05.mma", "mov.u32"))   # no MMA at all


def test_setmaxnreg_values_are_read_from_ptx():
    ptx = "setmaxnreg.dec.sync.aligned.u32 56;\n@%p1 bra L;\nsetmaxnreg.inc.sync.aligned.u32 232;\n"
    assert gg.setmaxnreg_values(ptx) == {"dec": [56], "inc": [232]}


def test_chapter_source_extracts_a_top_level_function(tmp_path):
    (tmp_path / "99-x.md").write_text(
        "text\n\n```{code-cell} ipython3\nA = 1\n\n\ndef make_k(n):\n    def inner():\n"
        "        return n\n\n    return inner\n\n\nB = 2\n```\n")
    src = gg.chapter_source("99-x", "make_k", tmp_path)
    assert src.startswith("def make_k(n):") and src.endswith("    return inner") and "B = 2" not in src
    with pytest.raises(KeyError):
        gg.chapter_source("99-x", "missing", tmp_path)


def test_chapter_8_kernels_can_be_diffed_from_their_source():
    v2 = gg.chapter_source("08-gemm-basics", "make_gemm_v2")
    v3 = gg.chapter_source("08-gemm-basics", "make_gemm_v3")
    removed, added = gg.diff_counts(v2, v3)
    assert 0 < removed < added  # step 3 adds the grid and the guards
    assert "-def make_gemm_v2" in gg.source_diff(v2, v3)


def test_tmem_columns_are_read_from_the_cuda_source():
    class K:
        source = ("x(); tvm_builtin_ptx_tcgen05_alloc_alloc_cta_group__1_sync_aligned_shared__cta_b32("
                  "tvm_builtin_cuda_cvta_generic_to_shared((&(((uint*)pool_buf_ptr)[0]))), (uint)128);\n"
                  "tvm_builtin_ptx_tcgen05_dealloc_dealloc_cta_group__1_sync_aligned_b32("
                  "((uint*)pool_buf_ptr)[0], (uint)128);\n")
    assert gg.tmem_columns(K) == {"alloc": [128], "dealloc": [128]}


ELECTED = """
    elect.sync %r1|%p1, -1;
    @%p1 bra $L_elected;
    cp.async.bulk.commit_group;
$L_elected:
    bar.warp.sync -1;
    bar.sync 0;
    tcgen05.ld.sync.aligned.32x32b.x32.b32 {%r2}, [%r3];
"""


def test_an_aligned_instruction_reached_before_the_elected_lane_rejoins_is_found():
    assert gg.not_rejoined(ELECTED) == []
    apart = ELECTED.replace("    bar.warp.sync -1;\n", "")
    assert gg.not_rejoined(apart) == ["bar.sync"]
    late = ELECTED.replace("    bar.warp.sync -1;\n    bar.sync 0;\n", "")
    assert gg.not_rejoined(late) == ["tcgen05.ld.sync.aligned.32x32b.x32.b32"]
