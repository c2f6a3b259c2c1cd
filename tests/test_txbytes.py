"""The build-time expect_tx check (gpubook.compile.txbytes): small TMA kernels, right and wrong."""

import pytest
from tvm.backend.cuda.tile_primitive.tma_utils import SwizzleMode, mma_shared_layout
from tvm.script import tirx as T
from tvm.script.tirx import tile as Tx
from tvm.tirx.lang.pipeline import Pipeline

import gpubook as gb
from gpubook.compile import txbytes
from gpubook.compile.build import lower

M, N, BOX = 200, 104, 64                   # ragged: boxes overhang both edges and still count in full
TILE = mma_shared_layout("float16", SwizzleMode.SWIZZLE_128B_ATOM, (BOX, BOX))
TILE_BYTES = BOX * BOX * 2


def make_two_tiles(nbytes=2 * TILE_BYTES, runtime_count=False):
    """One CTA per box: two TMA loads (x and y) on one barrier, then out = x + y."""

    @T.prim_func
    def two_tiles(x: T.Buffer((M, N), "float16"), y: T.Buffer((M, N), "float16"),
                  out: T.Buffer((M, N), "float16")):
        T.device_entry()
        bn, bm = T.cta_id([(N + BOX - 1) // BOX, (M + BOX - 1) // BOX])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        bar = pool.alloc((1,), "uint64", align=8)
        pool.move_base_to(1024)
        xs = pool.alloc((BOX, BOX), "float16", layout=TILE)
        ys = pool.alloc((BOX, BOX), "float16", layout=TILE)
        pool.commit()
        count = T.alloc_local((1,), "uint32")
        count[0] = T.uint32(nbytes)
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid == 0:
            if runtime_count:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar.ptr_to([0]), count[0])
            else:
                T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar.ptr_to([0]), T.uint32(nbytes))
            Tx.copy_async(xs[:, :], x[bm * BOX : bm * BOX + BOX, bn * BOX : bn * BOX + BOX],
                          dispatch="tma_auto", mbar=bar.ptr_to([0]))
            Tx.copy_async(ys[:, :], y[bm * BOX : bm * BOX + BOX, bn * BOX : bn * BOX + BOX],
                          dispatch="tma_auto", mbar=bar.ptr_to([0]))
        T.cuda.mbarrier_wait(bar.ptr_to([0]), 0)
        for j in T.serial(BOX * BOX // 128):
            r = T.meta_var((j * 128 + tid) // BOX)
            c = T.meta_var((j * 128 + tid) % BOX)
            if bm * BOX + r < M and bn * BOX + c < N:
                out[bm * BOX + r, bn * BOX + c] = xs[r, c] + ys[r, c]

    return two_tiles


MC_ROWS, MC_COLS = 32, 64


def make_bias_multicast(nbytes=(MC_ROWS * MC_COLS + MC_COLS) * 4):
    """Chapter 5's cluster kernel: each CTA of a pair multicasts half of the bias to both."""
    half = MC_COLS // 2

    @T.prim_func
    def bias_multicast(x: T.Buffer((4 * MC_ROWS, MC_COLS), "float32"), bias: T.Buffer((MC_COLS,), "float32"),
                       out: T.Buffer((4 * MC_ROWS, MC_COLS), "float32")):
        T.device_entry()
        _cluster = T.cluster_id([2])
        rank = T.cta_id_in_cluster([2])
        cta = T.cta_id([4])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        bar = pool.alloc((1,), "uint64", align=8)
        pool.move_base_to(128)
        bias_s = pool.alloc((MC_COLS,), "float32")
        tile = pool.alloc((MC_ROWS, MC_COLS), "float32")
        pool.commit()
        if tid == 0:
            T.ptx.mbarrier.init.shared.b64(bar.ptr_to([0]), T.uint32(1))
            T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if tid == 0:
            T.ptx.mbarrier.arrive.expect_tx.shared.b64(bar.ptr_to([0]), T.uint32(nbytes))
            Tx.copy_async(tile[:, :], x[cta * MC_ROWS : cta * MC_ROWS + MC_ROWS, :],
                          dispatch="tma_auto", mbar=bar.ptr_to([0]))
            Tx.copy_async(bias_s[rank * half : rank * half + half], bias[rank * half : rank * half + half],
                          dispatch="tma_auto", mbar=bar.ptr_to([0]), cta_mask=0b11)
        T.cuda.mbarrier_wait(bar.ptr_to([0]), 0)
        for j in T.serial(MC_ROWS * MC_COLS // 128):
            r = T.meta_var((j * 128 + tid) // MC_COLS)
            c = T.meta_var((j * 128 + tid) % MC_COLS)
            out[cta * MC_ROWS + r, c] = tile[r, c] + bias_s[c]
        T.cuda.cluster_sync()

    return bias_multicast


PAIR_ROWS = 128
PAIR_TILE = mma_shared_layout("float16", SwizzleMode.SWIZZLE_128B_ATOM, (PAIR_ROWS, BOX))
PAIR_BYTES = PAIR_ROWS * BOX * 2


def make_pair_loads(nbytes=2 * PAIR_BYTES, leader_only=True, stages=2, k_tiles=4):
    """The 2-CTA ring of chapter 10 in miniature: both CTAs load with cta_group::2 onto the
    leader's barrier (remote_view(0)); the leader announces both CTAs' bytes."""

    @T.prim_func
    def pair_loads(x: T.Buffer((2 * PAIR_ROWS, k_tiles * BOX), "float16")):
        T.device_entry()
        rank = T.cta_id_in_cluster([2])
        cta = T.cta_id([2])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        ring = Pipeline(pool, stages, full="tma", empty="mbar")
        pool.move_base_to(1024)
        tiles = pool.alloc((stages, PAIR_ROWS, BOX), "float16",
                           layout=mma_shared_layout("float16", SwizzleMode.SWIZZLE_128B_ATOM, (stages, PAIR_ROWS, BOX)))
        pool.commit()
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cluster_sync()
        if tid == 0:
            full0 = ring.full.remote_view(0)
            for kt in T.serial(k_tiles):
                s = T.meta_var(kt % stages)
                if leader_only:
                    if rank == 0:
                        ring.full.arrive(s, nbytes)
                else:
                    ring.full.arrive(s, nbytes)
                Tx.copy_async(tiles[s, :, :], x[cta * PAIR_ROWS : cta * PAIR_ROWS + PAIR_ROWS, kt * BOX : kt * BOX + BOX],
                              dispatch="tma_auto", cta_group=2, mbar=full0.ptr_to([s]))
        T.cuda.cluster_sync()

    return pair_loads


def make_ring_two_loads(second_bytes=TILE_BYTES, k_tiles=6):
    """A ring fed in the order of chapter 11B's producer: each iteration loads x's tile and, under a
    condition, y's, each on the next stage (the pipeline state advances between the two)."""
    from tvm.tirx.lang.pipeline import PipelineState

    @T.prim_func
    def ring_two_loads(x: T.Buffer((BOX, k_tiles * BOX), "float16"), y: T.Buffer((BOX, k_tiles * BOX), "float16")):
        T.device_entry()
        _cta = T.cta_id([1])
        tid = T.thread_id([128])
        pool = T.SMEMPool()
        ring = Pipeline(pool, 2, full="tma", empty="mbar")
        pool.move_base_to(1024)
        tiles = pool.alloc((2, BOX, BOX), "float16",
                           layout=mma_shared_layout("float16", SwizzleMode.SWIZZLE_128B_ATOM, (2, BOX, BOX)))
        pool.commit()
        T.ptx.fence.mbarrier_init.release.cluster()
        T.cuda.cta_sync()
        if tid == 0:
            ld = PipelineState(2, 1)

            @T.inline
            def load(src, j, nbytes):
                ring.full.arrive(ld.stage, nbytes)
                Tx.copy_async(tiles[ld.stage, :, :], src[0:BOX, j * BOX : j * BOX + BOX],
                              dispatch="tma_auto", mbar=ring.full.ptr_to([ld.stage]))
                ld.advance()

            for j in T.serial(k_tiles):
                load(x, j, TILE_BYTES)
                if j % 2 == 0:
                    load(y, j, second_bytes)

    return ring_two_loads


def record(func):
    return txbytes.analyze(*lower(func, gb.BLACKWELL))


def test_a_correct_kernel_builds_and_says_so():
    k = gb.build(make_two_tiles(), name="two_tiles")
    [bar] = k.expect_tx["barriers"]
    assert bar["verdict"] == "match" and bar["expected"] == bar["delivered"] == 2 * TILE_BYTES
    assert bar["copies"] == [f"x box 64x64 float16 = {TILE_BYTES} B", f"y box 64x64 float16 = {TILE_BYTES} B"]
    assert k.facts()["expect_tx"] == f"expect_tx: 1 barrier, bytes match the copies ({2 * TILE_BYTES} B per phase)"
    assert "expect_tx: 1 barrier, bytes match" in repr(k)


@pytest.mark.parametrize("nbytes, what", [(TILE_BYTES, "one operand forgotten"), (3 * TILE_BYTES, "a box counted twice")])
def test_a_wrong_count_fails_the_build_with_the_numbers(nbytes, what):
    with pytest.raises(txbytes.TxBytesError) as err:
        gb.build(make_two_tiles(nbytes), name="two_tiles_wrong")
    msg = str(err.value)
    assert "two_tiles_wrong" in msg and "bar[0]" in msg, what
    assert f"announces {nbytes} B" in msg and f"deliver {2 * TILE_BYTES} B" in msg
    assert f"x box 64x64 float16 = {TILE_BYTES} B; y box 64x64 float16 = {TILE_BYTES} B" in msg


def test_a_planted_mismatch_builds_only_when_marked_and_found():
    k = gb.build(make_two_tiles(TILE_BYTES), name="two_tiles_planted", expect_tx_mismatch=True)
    assert "MISMATCH" in k.facts()["expect_tx"]
    with pytest.raises(txbytes.TxBytesError,
                       match=r"planted expect_tx mismatch, but the check finds none \(expect_tx: 1 barrier, bytes match"):
        gb.build(make_two_tiles(), name="two_tiles_not_planted", expect_tx_mismatch=True)


def test_multicast_counts_every_cta_of_the_mask():
    rec = record(make_bias_multicast())
    [bar] = rec["barriers"]
    assert bar["verdict"] == "match" and bar["delivered"] == (MC_ROWS * MC_COLS + MC_COLS) * 4
    assert bar["copies"] == ["x box 32x64 float32 = 8192 B", "bias box 32 float32 = 128 B x 2"]
    # counting only the half this CTA issued is the mistake the chapter warns about
    rec = record(make_bias_multicast((MC_ROWS * MC_COLS + MC_COLS // 2) * 4))
    assert rec["mismatches"] == ["barrier bar[0]: expect_tx announces 8320 B, the copies on it deliver 8448 B "
                                 "(x box 32x64 float32 = 8192 B; bias box 32 float32 = 128 B x 2)"]


def test_two_cta_loads_count_on_the_leaders_barrier():
    rec = record(make_pair_loads())
    assert [b["verdict"] for b in rec["barriers"]] == ["match"] and not rec["not_judged"]
    assert rec["barriers"][0]["copies"] == [f"x box 128x64 float16 = {PAIR_BYTES} B x 2"]
    rec = record(make_pair_loads(PAIR_BYTES))   # the leader announces only its own half
    assert rec["mismatches"] and f"announces {PAIR_BYTES} B" in rec["mismatches"][0]
    assert f"deliver {2 * PAIR_BYTES} B" in rec["mismatches"][0]
    rec = record(make_pair_loads(leader_only=False))   # the peer announces bytes that go to the leader
    assert rec["mismatches"] and "signals rank 0's barrier" in rec["mismatches"][0]


def test_a_run_time_byte_count_is_not_judged():
    k = gb.build(make_two_tiles(runtime_count=True), name="two_tiles_runtime")
    assert k.expect_tx["mismatches"] == [] and k.expect_tx["barriers"][0]["verdict"] == "not judged"
    assert k.expect_tx["not_judged"] == ["bar[0]: a byte count known only at run time (count[0])"]
    assert "not judged: bar[0]: a byte count known only at run time" in k.facts()["expect_tx"]


def test_a_kernel_without_expect_tx_has_no_record():
    from kernels import vadd

    assert record(vadd) == {}


def test_each_pipeline_stage_is_judged_between_advances():
    rec = record(make_ring_two_loads())
    assert [b["verdict"] for b in rec["barriers"]] == ["match", "match"] and not rec["not_judged"]
    rec = record(make_ring_two_loads(second_bytes=2 * TILE_BYTES))    # the conditional load counted twice
    assert rec["mismatches"] == [f"barrier buffer[ld_stage[0]]: expect_tx announces {2 * TILE_BYTES} B, the copies "
                                 f"on it deliver {TILE_BYTES} B (y box 64x64 float16 = {TILE_BYTES} B)"]
