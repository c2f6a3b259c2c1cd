"""Appendix D's Hopper twin of chapter 11B's make_fa4_full: same protocol, portable build."""

from __future__ import annotations

import math
import re

import pytest

from gpubook import fa4
from gpubook import gemm as gg

APPENDIX = "D-debugging-async"
TQ, TKV, TSTAGES = 128, 32, 4
COMMIT = 32                      # a tcgen05.commit becomes one arrival from each lane of the MMA warp
COMMITTED = ("q_empty", "s_full", "pv_done")   # the barriers a commit arrives on, besides the ring's empty
# The names the two factories spell differently for the same thing.
RENAMES = {"BLK": "TQ", "STAGES2": "TSTAGES"}
BARRIER_OP = re.compile(r"\b((?:ring\.)?[a-z_]+)\.(wait|arrive|init)\(((?:[^()]|\((?:[^()]|\([^()]*\))*\))*)\)")


def ops(src: str) -> list[tuple[str, str, str]]:
    """Every barrier wait, arrive and init of a factory's source, in text order, names normalised."""
    out = []
    for name, op, args in BARRIER_OP.findall(src):
        if name in ("ld", "use"):
            continue
        for old, new in RENAMES.items():
            args = re.sub(rf"\b{old}\b", new, args)
        out.append((name, op, " ".join(args.split())))
    return out


def declarations(src: str) -> list[tuple[str, str, str]]:
    """(name, class, depth) of every barrier the factory allocates; a TCGen05Bar counts as an MBarrier."""
    found = re.findall(r"(\w+) = (TMABar|MBarrier|TCGen05Bar|Pipeline)\(pool, (\w+)(?:, full=\"(\w+)\", empty=\"(\w+)\")?", src)
    out = []
    for name, cls, depth, full, empty in found:
        cls = "MBarrier" if cls == "TCGen05Bar" else cls
        empty = "mbar" if empty == "tcgen05" else empty
        out.append((name, f"{cls}{'/' + full + '/' + empty if full else ''}", RENAMES.get(depth, depth)))
    return out


def test_the_twin_declares_the_full_kernels_barriers_with_the_same_counts():
    full = gg.chapter_source("11B-fa4-blackwell", "make_fa4_full")
    twin = gg.chapter_source(APPENDIX, "make_fa4_twin")
    assert declarations(twin) == declarations(full)
    inits = lambda src: [o for o in ops(src) if o[1] == "init"]
    expected = [(name, op, "COMMIT" if name in COMMITTED else args) for name, op, args in inits(full)]
    assert [o[2] for o in inits(full) if o[0] in COMMITTED] == ["1", "1", "1"]
    assert inits(twin) == expected and len(inits(twin)) == 8      # + the ring's two, inside Pipeline
    assert 'empty="tcgen05")' in full and 'empty="mbar", init_empty=COMMIT)' in twin


def test_the_twin_waits_and_arrives_as_the_full_kernel_does():
    """Same barriers, same order, same parities: only the bug switch may differ, on one wait."""
    full = [o for o in ops(gg.chapter_source("11B-fa4-blackwell", "make_fa4_full")) if o[1] != "init"]
    twin = [o for o in ops(gg.chapter_source(APPENDIX, "make_fa4_twin")) if o[1] != "init"]
    assert [o[:2] for o in twin] == [o[:2] for o in full]
    differ = sorted({(f[0], f[2], t[2]) for f, t in zip(full, twin) if f != t})
    assert differ == [  # a Q tile and a K/V stage have their own byte counts; the bug switch on one wait
        ("pv_done", "i, (g - 1) % 2", 'i, (g - (0 if bug == "pv-parity" else 1)) % 2'),
        ("q_full", "i, TILE_BYTES", "i, Q_BYTES"),
        ("ring.full", "ld.stage, TILE_BYTES", "ld.stage, KV_BYTES"),
    ], differ

def test_the_twin_keeps_the_mma_issue_order():
    def order(src: str) -> list[str]:
        body = src[src.index("for r in T.serial(ROUNDS)", src.index("def pv(")):src.index("elif wg == 2:")]
        return re.findall(r"\b(qk|pv)\((\d)", body) + re.findall(r"(ring\.empty|q_empty)\.arrive", body)
    assert order(gg.chapter_source(APPENDIX, "make_fa4_twin")) == \
        order(gg.chapter_source("11B-fa4-blackwell", "make_fa4_full"))


def _twin_namespace():
    import torch
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx
    from tvm.tirx.lang.pipeline import MBarrier, Pipeline, PipelineState, TMABar

    import gpubook as gb
    return dict(T=T, Tx=Tx, MBarrier=MBarrier, Pipeline=Pipeline, PipelineState=PipelineState,
                TMABar=TMABar, gb=gb, fa4=fa4, math=math, torch=torch, TQ=TQ, TKV=TKV, TSTAGES=TSTAGES,
                COMMIT=COMMIT)


@pytest.mark.parametrize("case", [(1, 2, 1, 256, "float16", True, 32, True),
                                  (1, 1, 1, 512, "bfloat16", False, 64, False)])
def test_cpu_model_of_the_twin_matches_sdpa(case):
    *shape, d, hard = case
    ns = _twin_namespace()
    model = gg.load_factory(APPENDIX, "fa4_twin_model", ns)
    inputs = gg.load_factory(APPENDIX, "twin_inputs", ns)
    batch, heads, kv_heads, seqlen, dtype, causal = shape
    q, k, v, _ = inputs(batch, heads, kv_heads, seqlen, dtype, d, seed=7, hard=hard)
    ref = fa4.reference(q, k, v, causal)
    err = float((model(q, k, v, causal).float() - ref).abs().max())
    assert err <= fa4.tolerance(v, dtype), err
    if causal:   # the tolerance has teeth: dropping the mask is caught
        wrong = float((model(q, k, v, False).float() - ref).abs().max())
        assert wrong > 10 * fa4.tolerance(v, dtype), wrong


def test_the_twin_builds_for_hopper_and_blackwell_with_the_barriers_of_the_full_kernel():
    import gpubook as gb
    from gpubook import lint

    make = gg.load_factory(APPENDIX, "make_fa4_twin", _twin_namespace())
    with gb.mbarrier.bounded_waits():
        func = make(1, 4, 1, 256, "bfloat16", True, d=32, ctas=3)
    k = gb.build(func, name="fa4_twin_test")
    assert k.runs_on == ("sm_100a", "sm_90a")
    assert len(re.findall(r"mbarrier\.init", k.ptx)) == 2 + 1 + 2 * TSTAGES + 6 * 2 == 23
    assert not re.search(r"tcgen05|wgmma", k.ptx)
    assert k.launches[0].grid == (3,) and k.launches[0].block == (512,)     # 4 work tiles on 3 CTAs
    assert k.dynamic_smem + 1024 <= gb.hardware.H200.smem_per_sm
    assert lint.lint(k.ptx) == [], lint.report(k.ptx)
    assert "gpubook_mbarrier_wait_bounded" in k.ptx
