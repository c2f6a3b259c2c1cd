"""Chapter 11B's Flash Attention 4 kernel: what it refuses, its budgets, its software exp2, a CPU
model of its arithmetic against SDPA, its barrier protocol, and the build of the kernel itself."""

from __future__ import annotations

import math
import re

import numpy as np
import pytest
import torch

from gpubook import fa4, tmem
from gpubook.facts.hardware import B200

GOOD = dict(batch=1, heads=8, kv_heads=2, seqlen=256, head_dim=128, dtype="float16", causal=True)


@pytest.mark.parametrize("bad, word", [
    (dict(head_dim=64), "head_dim"), (dict(dtype="float32"), "dtype"), (dict(kv_heads=3), "GQA"),
    (dict(seqlen=200), "seqlen"), (dict(seqlen=0), "seqlen"), (dict(causal=1), "causal"),
    (dict(batch=0), "batch"),
])
def test_validate_refuses_naming_the_constraint(bad, word):
    with pytest.raises(fa4.FA4CallError, match=word):
        fa4.validate(**(GOOD | bad))


def test_validate_accepts_the_supported_set():
    for ratio in (1, 4, 8):
        for dtype in fa4.DTYPES:
            for causal in (False, True):
                fa4.validate(1, 8, 8 // ratio, 384, 128, dtype, causal)


def _t(*shape, dtype=torch.float16):
    return torch.zeros(*shape, dtype=dtype)


def test_problem_refuses_layouts_lengths_and_dtypes():
    q, kv = _t(1, 8, 256, 128), _t(1, 2, 256, 128)
    with pytest.raises(fa4.FA4CallError, match="layout"):
        fa4.problem(q.transpose(1, 2), kv, kv, causal=False)
    with pytest.raises(fa4.FA4CallError, match="layout"):
        fa4.problem(q[0], kv, kv, causal=False)
    with pytest.raises(fa4.FA4CallError, match="seqlen"):
        fa4.problem(q, _t(1, 2, 128, 128), _t(1, 2, 128, 128), causal=True)
    with pytest.raises(fa4.FA4CallError, match="dtype"):
        fa4.problem(q, kv.bfloat16(), kv.bfloat16(), causal=False)
    with pytest.raises(fa4.FA4CallError, match="GQA"):
        fa4.problem(_t(1, 6, 256, 128), _t(1, 4, 256, 128), _t(1, 4, 256, 128), causal=False)
    assert fa4.problem(q, kv, kv, causal=True) == (1, 8, 2, 256, "float16")


def test_tmem_budget():
    plan = fa4.tmem_plan()
    assert plan == {"S0": (0, 128), "S1": (128, 128), "O": (256, 128)}
    assert tmem.alloc_columns(max(a + n for a, n in plan.values())) == fa4.TMEM_COLUMNS
    full = fa4.tmem_plan(two_q_tiles=True)
    assert max(a + n for a, n in full.values()) == fa4.TMEM_COLUMNS == B200.tmem_per_sm // 512
    for sb in (0, 1):                                         # P: the upper half of its own S
        first, n = fa4.p_columns(sb)
        s_first, s_n = plan[f"S{sb}"]
        assert first == s_first + s_n // 2 and first + n == s_first + s_n
        assert n == tmem.columns_for(fa4.BLK, 16)


def test_smem_budget_takes_as_many_stages_as_fit():
    limit = B200.smem_per_sm - 1024
    tile = fa4.BLK * fa4.HEAD_DIM * 2
    stages = (limit - sum(fa4.smem_plan(0).values())) // tile
    assert stages == 5
    assert sum(fa4.smem_plan(stages).values()) <= limit < sum(fa4.smem_plan(stages + 1).values())


def test_exp2_soft_error_and_exact_powers():
    xs = np.linspace(-126.0, 0.0, 400_001, dtype=np.float32)
    rel = np.abs(fa4.exp2_soft(xs).astype(np.float64) / np.exp2(xs.astype(np.float64)) - 1)
    assert rel.max() < fa4.UNIT_ROUNDOFF["float16"] / 4
    ints = np.arange(-126, 1, dtype=np.float32)
    assert np.array_equal(fa4.exp2_soft(ints), np.exp2(ints))   # c0 = 1: integers are exact
    # the floor is add.rm's: just below an integer still takes the lower one
    below = np.nextafter(np.float32(-3.0), np.float32(-4.0))
    assert fa4.exp2_soft(np.array([below]))[0] < 0.125


def test_fma32_rounds_once():
    """fma32 is fma.rn.f32: the exact a * b + c, rounded once, ties to even."""
    from fractions import Fraction

    rng = np.random.default_rng(11)
    a = (rng.integers(1, 1 << 12, 4000) / 2.0**11).astype(np.float32)       # short mantissas:
    b = (1 + rng.integers(0, 1 << 13, 4000) / 2.0**13).astype(np.float32)   # many exact ties
    c = (2.0 ** rng.integers(-30, 3, 4000) * (1 + rng.integers(0, 1 << 23, 4000) / 2.0**23)).astype(np.float32)
    a[:2000] = rng.uniform(0, 2, 2000).astype(np.float32)
    got = fa4.fma32(a, b, c)
    for x, y, z, r in zip(a, b, c, got):
        exact = Fraction(float(x)) * Fraction(float(y)) + Fraction(float(z))
        near = np.float32(float(exact))
        cands = [near, np.nextafter(near, np.float32(np.inf)), np.nextafter(near, np.float32(-np.inf))]
        best = min(cands, key=lambda v: (abs(Fraction(float(v)) - exact), int(np.array(v).view(np.int32)) & 1))
        assert r == best, (x, y, z)
    twice = ((a * b).astype(np.float32) + c).astype(np.float32)             # two roundings differ
    assert (twice != got).any()


def test_exp2_soft_floors_like_add_rm():
    """add.rm leaves floor(x) = -1 for a tiny negative x, where x + 1.5 * 2^23 rounded to
    nearest would give 0: the result is 2^-1 p(1), with f = x + 1 rounded to 1."""
    c = fa4.COEFFS
    one = np.float32(1.0)
    p1 = fa4.fma32(fa4.fma32(fa4.fma32(one, c[3], c[2]), one, c[1]), one, c[0])
    assert fa4.exp2_soft(np.array([-1e-30], np.float32))[0] == p1 / 2
    assert fa4.exp2_soft(np.array([-0.0, 0.0], np.float32)).tolist() == [1.0, 1.0]
    assert fa4.exp2_soft(np.array([-200.0], np.float32))[0] == fa4.exp2_soft(np.array([-127.0], np.float32))[0]


PTX_EXP2 = """
	mov.f32 	%f3, 0fC2FE0000;
	// begin inline asm
	max.f32 %f1, %f2, %f3;
	// end inline asm
	mov.f32 	%f9, 0f4B400000;
	add.rm.f32 %f4, %f1, %f9;
	sub.rn.f32 %f7, %f4, %f9;
	sub.rn.f32 %f10, %f1, %f7;
	mov.f32 	%f15, 0f3D9DD255;
	mov.f32 	%f16, 0f3E691D67;
	fma.rn.f32 %f13, %f10, %f15, %f16;
	mov.f32 	%f20, 0f3F31F315;
	fma.rn.f32 %f17, %f13, %f10, %f20;
	mov.f32 	%f24, 0f3F800000;
	fma.rn.f32 %f21, %f17, %f10, %f24;
	mov.b32 	%r2, %f4;
	mov.b32 	%r3, 23;
	shl.b32 %r1, %r2, %r3;
	mov.b32 	%r5, %f21;
	add.s32 %r4, %r5, %r1;
"""


def test_exp2_listing_reads_one_exp2_from_ptx():
    got = fa4.exp2_listing(PTX_EXP2)
    assert tuple(ln.split(" ")[0] for ln in got) == fa4.EXP2_OPS
    assert got[0] == "max.f32 %f1, %f2, 0fC2FE0000;" and got[7] == "shl.b32 %r1, %r2, 23;"
    text = "\n".join(got)
    for v in (*fa4.COEFFS[1:], fa4.ROUND_CONST):
        assert fa4.hexf(v) in text
    assert fa4.hexf(1.0) == "0f3F800000" and fa4.hexf(-127.0) == "0fC2FE0000"
    with pytest.raises(ValueError, match="no complete software exp2"):
        fa4.exp2_listing(PTX_EXP2.split("\tshl")[0])


def test_soft_share():
    cols = fa4.soft_columns()
    assert len(cols) == fa4.BLK // fa4.SOFT_EVERY and all(c % 4 == 3 for c in cols)


def _inputs(batch, heads, kv_heads, seqlen, dtype, seed, hard):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seqlen, 128, generator=g)
    k = torch.randn(batch, kv_heads, seqlen, 128, generator=g)
    v = torch.randn(batch, kv_heads, seqlen, 128, generator=g)
    if hard:
        q, k = 3 * q, 3 * k
        rows = torch.arange(seqlen - 40, seqlen)
        k[:, :, rows] = 1.5 * q[:, ::heads // kv_heads, rows]
    dt = getattr(torch, dtype)
    return q.to(dt), k.to(dt), v.to(dt)


@pytest.mark.parametrize("case", [
    (1, 4, 1, 256, "float16", True, True),
    (1, 2, 2, 384, "bfloat16", False, True),
    (2, 8, 1, 128, "float16", True, False),
])
def test_cpu_model_of_the_kernel_matches_sdpa(case):
    *shape, dtype, causal, hard = case
    q, k, v = _inputs(*shape, dtype, seed=7, hard=hard)
    out, stats = fa4.simulate(q, k, v, causal)
    err = float((out.float() - fa4.reference(q, k, v, causal)).abs().max())
    assert err <= fa4.tolerance(v, dtype), err
    if hard and shape[3] > fa4.BLK:
        assert stats["rescales"] > 0                              # the late maxima force rescales


def test_the_tolerance_catches_a_wrong_mask():
    q, k, v = _inputs(1, 2, 2, 256, "float16", seed=3, hard=False)
    out, _ = fa4.simulate(q, k, v, causal=False)                  # non-causal against a causal reference
    assert float((out.float() - fa4.reference(q, k, v, True)).abs().max()) > fa4.tolerance(v, "float16")


def test_protocol_orders_loads_as_the_mma_warp_uses_them():
    for n in (1, 2, 3, 6):
        ev = fa4.protocol_events(n)
        loads = [e[1] for e in ev if e[3] == "ring.full"]
        assert len(loads) == 2 * n and loads[0] == "K0"
        mma = [e[1] for e in ev if e[0] == "MMA warp"]
        used = [("K" + m.split("K")[1].rstrip("ᵀ")) if "Q K" in m else "V" + m.split("V")[-1] for m in mma]
        assert used == loads, (n, used, loads)
        assert sum(e[3].startswith("p_full") for e in ev) == n == sum(e[3].startswith("pv_done") for e in ev)


def test_bound_is_tensor_core_bound_at_the_published_shape():
    b = fa4.bound(1, 32, 8192, causal=False)
    assert b.limit == "tensor cores" and b.mufu_s < b.tensor_s
    no_soft = fa4.bound(1, 32, 8192, causal=False, soft_share=0.0)
    assert no_soft.mufu_s == pytest.approx(b.mufu_s / 0.75)
    assert fa4.bound(1, 32, 8192, causal=True).flops == pytest.approx(b.flops / 2)


def test_protocol_figure_draws():
    fig = fa4.plot_protocol(3)
    ax = fig.axes[0]
    texts = [t.get_text() for t in ax.texts] + [t.get_text() for t in ax.get_yticklabels()]
    texts += [t.get_text().split(":")[0] for t in ax.get_legend().get_texts()]
    for label in ("TMA warp", "MMA warp", "softmax warpgroup", "q_full", "ring.full[stage]", "s_full[b]",
                  "p_full[b]", "pv_done[b]", "epilogue", "QK2", "PV2", "V2", "softmax 2"):
        assert label in texts, label
    from gpubook import plots
    assert min(plots.drawn_font_sizes(fig)) >= plots.MIN_FONT_PT


def _exp2_helper(ns):
    """The chapter's software exp2 (an inline TIRx helper) and its constants, defined in ns."""
    from gpubook import gemm as gg
    from tvm.script import tirx as T

    ns["C0"], ns["C1"], ns["C2"], ns["C3"] = (float(v) for v in fa4.COEFFS)
    ns["BIG"] = fa4.ROUND_CONST
    ns["exp2_poly"] = T.inline(gg.load_factory("11B-fa4-blackwell", "exp2_poly", ns))


def chapter_namespace() -> dict:
    """The names the first kernel of chapter 11B (`make_fa4`, and `make_fa4_tails` after it) uses:
    its imports, constants and software exp2, as the chapter defines them."""
    import gpubook as gb
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.lang.pipeline import MBarrier, Pipeline, PipelineState, TCGen05Bar, TMABar
    from tvm.tirx.layout import S, TileLayout, tid_in_wg

    ns = dict(T=T, Tx=Tx, S=S, TileLayout=TileLayout, tid_in_wg=tid_in_wg, MBarrier=MBarrier,
              Pipeline=Pipeline, PipelineState=PipelineState, TCGen05Bar=TCGen05Bar, TMABar=TMABar,
              gb=gb, fa4=fa4, math=math, BLK=128, D=128, CH=32, TMEM_COLS=512, STAGES=5,
              TILE_BYTES=128 * 128 * 2, REGS_PRODUCER=120, REGS_SOFTMAX=232)
    ns["ROW"] = TileLayout(S[(128, 128) : (1 @ tid_in_wg, 1)])
    ns["ROW_CH"] = TileLayout(S[(128, 32) : (1 @ tid_in_wg, 1)])
    _exp2_helper(ns)
    return ns


def test_the_chapter_kernel_builds_and_keeps_the_rules():
    """Build chapter 11B's make_fa4 (causal, GQA 4) and assert its budgets and ordering rules."""
    import gpubook as gb
    from gpubook import gemm as gg
    from gpubook import lint

    ns = chapter_namespace()
    make = gg.load_factory("11B-fa4-blackwell", "make_fa4", ns)
    k = gb.build(make(1, 8, 2, 256, "float16", True), name="fa4_test")
    assert lint.lint(k.ptx) == [], lint.report(k.ptx)
    assert gg.tmem_columns(k) == {"alloc": [512], "dealloc": [512]}
    assert k.dynamic_smem == sum(fa4.smem_plan(5).values()) and k.spill_instructions == 0
    assert k.sass_counts["UTCHMMA"] == k.ptx_counts["tcgen05.mma"] > 0
    assert len(re.findall(r"UTCHMMA\s+tmem\[", k.sass)) % 8 == 0
    assert k.sass_counts["LDTM"] == k.ptx_counts["tcgen05.ld"]
    assert tuple(ln.split(" ")[0] for ln in fa4.exp2_listing(k.ptx)) == fa4.EXP2_OPS
    assert len(re.findall(r"add\.rm\.f32", k.ptx)) == 2 * len(fa4.soft_columns())   # the copies off the diagonal


# -- the two-Q-tile kernel ----------------------------------------------------------------------------
def test_two_q_tiles_need_whole_work_tiles():
    fa4.validate(1, 8, 2, 512, 128, "float16", True, q_tiles=2)
    for seqlen in (128, 384, 640):
        fa4.validate(1, 8, 2, seqlen, 128, "float16", True)              # fine for one Q tile
        with pytest.raises(fa4.FA4CallError, match="multiple of 256"):
            fa4.validate(1, 8, 2, seqlen, 128, "float16", True, q_tiles=2)
    with pytest.raises(ValueError):
        fa4.validate(1, 8, 2, 512, 128, "float16", True, q_tiles=3)
    q, kv = _t(1, 8, 384, 128), _t(1, 2, 384, 128)
    assert fa4.problem(q, kv, kv, causal=True) == (1, 8, 2, 384, "float16")
    with pytest.raises(fa4.FA4CallError, match="256"):
        fa4.problem(q, kv, kv, causal=True, q_tiles=2)


def test_head_dim_64_budgets_and_refusals():
    fa4.validate(1, 2, 1, 300, 64, "float16", False, q_tiles=2, ragged=True, head_dims=(64,))
    with pytest.raises(fa4.FA4CallError, match="head_dim must be 64, got 128"):
        fa4.validate(1, 2, 1, 300, 128, "float16", False, q_tiles=2, ragged=True, head_dims=(64,))
    with pytest.raises(fa4.FA4CallError, match="head_dim must be 128, got 64"):
        fa4.problem(_t(1, 2, 256, 64), _t(1, 1, 256, 64), _t(1, 1, 256, 64), causal=False)
    assert fa4.problem(_t(1, 2, 256, 64), _t(1, 1, 256, 64), _t(1, 1, 256, 64), causal=False,
                       head_dims=(64,)) == (1, 2, 1, 256, "float16")
    # O keeps its 128-column slots, half filled; the tiles halve, so the ring takes 11 stages
    assert fa4.tmem_plan(two_q_tiles=True, head_dim=64) == {
        "S0": (0, 128), "S1": (128, 128), "O0": (256, 64), "O1": (384, 64)}
    limit, tile = B200.smem_per_sm - 1024, fa4.BLK * 64 * 2
    stages = (limit - sum(fa4.smem_plan(0, q_tiles=2, head_dim=64).values())) // tile
    assert stages == 11 and sum(fa4.smem_plan(stages, q_tiles=2, head_dim=64).values()) == 231424
    # half the tensor-core time, the same exponentials: the MUFU binds at d = 64
    b128, b64 = fa4.bound(1, 32, 8192, False), fa4.bound(1, 32, 8192, False, head_dim=64)
    assert b64.tensor_s == pytest.approx(b128.tensor_s / 2) and b64.mufu_s == b128.mufu_s
    assert (b128.limit, b64.limit) == ("tensor cores", "MUFU exponentials")


def test_head_dims_192_128_and_256():
    # V and O of 128 beside Q and K of 192: tensor memory is d = 128's; v's shape is checked
    assert fa4.tmem_plan(two_q_tiles=True, head_dim=128) == {
        "S0": (0, 128), "S1": (128, 128), "O0": (256, 128), "O1": (384, 128)}
    q, k, v = _t(1, 2, 256, 192), _t(1, 1, 256, 192), _t(1, 1, 256, 128)
    assert fa4.problem(q, k, v, causal=True, head_dims=(192,), v_dim=128) == (1, 2, 1, 256, "float16")
    with pytest.raises(fa4.FA4CallError, match=r"v must be \(1, 1, 256, 128\)"):
        fa4.problem(q, k, _t(1, 1, 256, 192), causal=True, head_dims=(192,), v_dim=128)
    # two O tiles of 256 columns after S0 and S1: 768 of 512
    with pytest.raises(ValueError, match="768"):
        fa4.tmem_plan(two_q_tiles=True, head_dim=256)
    assert max(a + n for a, n in fa4.tmem_plan(head_dim=256).values()) == fa4.TMEM_COLUMNS


def test_two_q_tile_smem_plan_costs_one_stage():
    limit = B200.smem_per_sm - 1024
    tile = fa4.BLK * fa4.HEAD_DIM * 2
    plan0 = fa4.smem_plan(0, q_tiles=2)
    assert plan0["Q"] == 2 * tile and plan0["α and ℓ slots"] == 2 * fa4.BLK * 4
    stages = (limit - sum(plan0.values())) // tile
    assert stages == 4
    assert sum(fa4.smem_plan(stages, q_tiles=2).values()) == 231424 <= limit


@pytest.mark.parametrize("causal", [False, True])
def test_two_q_tile_model_equals_the_one_tile_model(causal):
    """The first tile's extra, wholly masked block adds P = 0 and never rescales."""
    g = torch.Generator().manual_seed(7)
    q = (3 * torch.randn(1, 2, 512, 128, generator=g)).half()
    k = (3 * torch.randn(1, 1, 512, 128, generator=g)).half()
    v = torch.randn(1, 1, 512, 128, generator=g).half()
    one, s1 = fa4.simulate(q, k, v, causal)
    two, s2 = fa4.simulate(q, k, v, causal, q_tiles=2)
    assert torch.equal(one, two) and s1["rescales"] == s2["rescales"]
    extra = 2 * 2 * fa4.BLK if causal else 0                              # 2 heads x 2 work tiles x 128 rows
    assert s2["rows_blocks"] == s1["rows_blocks"] + extra


def test_schedule_serves_every_work_tile_once_in_the_kernel_order():
    B, H, S = 2, 3, 1024
    tiles = B * H * S // 256
    for causal in (False, True):
        sched = fa4.schedule(B, H, S, causal, ctas=5)
        flat = [t for cta in sched for t in cta]
        assert len(flat) == tiles and len(set(flat)) == tiles
        assert {m for _, _, m in flat} == set(range(S // 256))
        assert sched[0][0] == fa4.work_tile(0, B, H, S, causal) and sched[1][0] == fa4.work_tile(1, B, H, S, causal)
        if causal:                                                        # longest first, per CTA
            for cta in sched:
                ms = [m for _, _, m in cta]
                assert ms == sorted(ms, reverse=True)
        else:
            assert sched[0][:2] == [(0, 0, 0), (0, 1, 1)]                # tile 5 = head 1, m 1
    assert len(fa4.schedule(1, 1, 512, False, ctas=148)) == 2          # never more CTAs than work tiles
    with pytest.raises(ValueError, match="order"):
        fa4.work_tile(0, B, H, S, True, order="random")
    with pytest.raises(ValueError, match="outside"):
        fa4.work_tile(tiles, B, H, S, True)


def test_longest_first_balances_causal_work():
    lin = fa4.cta_blocks(1, 32, 8192, True, 148, order="linear")
    lpt = fa4.cta_blocks(1, 32, 8192, True, 148)
    assert sum(lin) == sum(lpt) == 32 * sum(2 * m + 2 for m in range(8192 // 256))
    assert max(lpt) < max(lin)
    flat = fa4.cta_blocks(1, 32, 8192, False, 148)
    assert sum(flat) == 32 * 32 * 64 and max(flat) - min(flat) == 64      # whole tiles of 64 blocks


def test_the_chapter_two_tile_kernel_builds_and_keeps_the_rules():
    """Build chapter 11B's make_fa4_full (causal, GQA 4, five persistent CTAs) and assert its rules."""
    import gpubook as gb
    from gpubook import gemm as gg
    from gpubook import lint
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.lang.pipeline import MBarrier, Pipeline, PipelineState, TCGen05Bar, TMABar
    from tvm.tirx.layout import S, TileLayout, tid_in_wg

    ns = dict(T=T, Tx=Tx, MBarrier=MBarrier, Pipeline=Pipeline, PipelineState=PipelineState,
              TCGen05Bar=TCGen05Bar, TMABar=TMABar, gb=gb, fa4=fa4, math=math, B200=B200, BLK=128, D=128,
              CH=32, TMEM_COLS=512, STAGES2=4, TILE_BYTES=128 * 128 * 2, S_LOAD=64,
              REGS_SOFT2=176, REGS_CORR2=96, REGS_OTHER2=64)
    ns["ROW"] = TileLayout(S[(128, 128) : (1 @ tid_in_wg, 1)])
    ns["ROW_CH"] = TileLayout(S[(128, 32) : (1 @ tid_in_wg, 1)])
    _exp2_helper(ns)
    make = gg.load_factory("11B-fa4-blackwell", "make_fa4_full", ns)
    with pytest.raises(fa4.FA4CallError, match="256"):
        make(1, 8, 2, 384, "float16", True)
    k = gb.build(make(1, 8, 2, 512, "float16", True, ctas=5), name="fa4_full_test")
    assert lint.lint(k.ptx) == [], lint.report(k.ptx)
    assert gg.tmem_columns(k) == {"alloc": [512], "dealloc": [512]}
    assert k.dynamic_smem == sum(fa4.smem_plan(4, q_tiles=2).values()) and k.spill_instructions == 0
    assert k.launches[0].block == (512,) and k.launches[0].grid == (5,) and k.registers == 128
    assert gg.setmaxnreg_values(k.ptx) in ({"dec": [64, 96], "inc": [176]}, {"dec": [96, 64], "inc": [176]})
    assert len(re.findall(r"UTCHMMA\s+gdesc\[", k.sass)) == 32 and len(re.findall(r"UTCHMMA\s+tmem\[", k.sass)) == 16
    assert "LDTM.x128" not in k.sass and k.sass_counts["LDTM"] == k.ptx_counts["tcgen05.ld"]
    assert len(re.findall(r"mbarrier\.init", k.ptx)) == 23
