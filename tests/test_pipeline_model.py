"""The model of pipelined kernels (chapters 5 and 10H): what each of its terms does."""

import math

import pytest

from gpubook.models import pipeline_model as pm

H200ISH = pm.Machine("test", 132, tensor_flops=870e12, l2_bandwidth=9.3e12, l2_trip_s=890e-9,
                     mma_wait_s=370e-9, hbm_bandwidth=4.8e12, l2_bytes=60 * 2**20)
STEP3 = pm.Step("step 3", 128, 256, 64)


def test_a_round_trip_grows_without_bound_as_the_memory_fills():
    assert pm.queue_factor(0) == 1
    assert pm.queue_factor(0.5) == pytest.approx(1.5)
    assert pm.queue_factor(0.99) > 50
    with pytest.raises(ValueError):
        pm.queue_factor(1.0)


def test_a_deeper_ring_is_never_slower_and_never_beats_the_roof():
    times = [pm.ring_seconds(d, roof_s=0.5, trip_s=0.7) for d in (1, 2, 4, 8, 64)]
    assert all(a >= b for a, b in zip(times, times[1:]))
    assert min(times) >= 0.5 and times[-1] == pytest.approx(0.5, rel=0.02)
    # far from the roof, one stage is bound by its (barely loaded) round trips
    assert pm.ring_seconds(1, roof_s=1e-6, trip_s=1.0) == pytest.approx(1.0, rel=1e-3)


def test_the_depth_one_point_gives_back_the_trip_it_was_made_from():
    t1 = pm.ring_seconds(1, roof_s=0.5, trip_s=0.66)
    assert pm.unloaded_trip(t1, 0.5) == pytest.approx(0.66, rel=1e-6)
    with pytest.raises(ValueError):
        pm.unloaded_trip(0.4, 0.5)


def test_the_time_is_affine_in_the_fixed_cost_so_a_short_run_recovers_it():
    short = pm.gemm_seconds(4096, 4096, 64, STEP3, H200ISH, 18e-6).seconds
    assert pm.per_tile_cost(short, 4096, 4096, 64, STEP3, H200ISH) == pytest.approx(18e-6, rel=1e-9)


def test_the_larger_busy_time_sets_a_k_tile_and_the_ctas_of_an_sm_share_it():
    no_misses = pm.Machine("no HBM term", 132, 870e12, 9.3e12, 890e-9)
    one = pm.gemm_seconds(4096, 4096, 4096, pm.Step("a", 64, 256, 64), no_misses, 0.0)
    mma = 2 * 64 * 256 * 64 / (870e12 / 132)
    load = (64 + 256) * 64 * 2 / (9.3e12 / 132)
    assert one.k_tile_s == pytest.approx(max(mma, load)) and one.limit.startswith("L2")
    three = pm.gemm_seconds(4096, 4096, 4096, pm.Step("b", 64, 256, 64, ctas_per_sm=3), no_misses, 0.0)
    assert three.k_tile_s == pytest.approx(3 * max(mma, load))
    fast_l2 = pm.Machine("fast L2", 132, 870e12, 100e12, 890e-9)
    assert pm.gemm_seconds(4096, 4096, 4096, STEP3, fast_l2, 0.0).limit == "tensor core"


def test_a_kernel_that_waits_pays_its_waits():
    sync = pm.Step("sync", 64, 256, 64, synchronous=True, waits_mma=True)
    slow_trip = pm.Machine("slow trip", 132, 870e12, 9.3e12, 5e-6, mma_wait_s=370e-9)
    p = pm.gemm_seconds(4096, 4096, 4096, sync, slow_trip, 0.0)
    assert p.k_tile_s == pytest.approx(5e-6 + 370e-9) and p.limit.startswith("waiting")


def test_rounds_and_the_short_last_round():
    # 512 tiles over 132 one-CTA slots: 3 full rounds and one of 116 tiles
    p = pm.gemm_seconds(4096, 4096, 4096, STEP3, H200ISH, 10e-6)
    assert p.rounds == pytest.approx(3 + 116 / 132)
    persistent = pm.gemm_seconds(4096, 4096, 4096, pm.Step("p", 128, 256, 64, persistent=True), H200ISH, 10e-6)
    assert persistent.rounds == math.ceil(512 / 132)


def test_a_round_that_fits_in_l2_misses_only_what_is_new_and_one_that_does_not_misses_all():
    touched, missed = pm.round_misses(4096, 4096, 4096, STEP3, H200ISH, 132)
    # 132 tiles of a 16-tile-wide row: 9 rows of tiles, whose A rows are new to the round
    assert touched < H200ISH.l2_bytes and missed == 9 * 128 * 4096 * 2
    touched, missed = pm.round_misses(8192, 8192, 8192, STEP3, H200ISH, 132)
    assert touched > H200ISH.l2_bytes and missed == touched
    grouped = pm.Step("g", 128, 256, 64, persistent=True, group_m=16)
    touched, missed = pm.round_misses(4096, 4096, 4096, grouped, H200ISH, 132)
    assert missed == 9 * 256 * 4096 * 2                                      # new columns of B
    # misses slow a K tile down: the same step at 8192 costs more per K tile than at 4096
    assert (pm.gemm_seconds(8192, 8192, 8192, STEP3, H200ISH, 0).k_tile_s
            > pm.gemm_seconds(4096, 4096, 4096, STEP3, H200ISH, 0).k_tile_s)


def test_a_multicast_that_halves_b_from_l2_moves_the_limit_to_the_tensor_core():
    step4 = pm.Step("step 4", 128, 256, 64, persistent=True)
    shared = pm.Step("pair", 128, 256, 64, persistent=True, l2_b_rows=128)
    no_misses = pm.Machine("no HBM term", 132, 870e12, 9.3e12, 890e-9)
    before = pm.gemm_seconds(4096, 4096, 4096, step4, no_misses, 3e-6)
    after = pm.gemm_seconds(4096, 4096, 4096, shared, no_misses, 3e-6)
    assert before.limit.startswith("L2") and after.limit == "tensor core" and after.seconds < before.seconds
