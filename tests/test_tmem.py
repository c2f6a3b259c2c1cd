"""gpubook.tmem: the TMEM rules against the PTX ISA's numbers, and the base check in compiled code."""

import re

import pytest
from tvm.script import tirx as T

import gpubook as gb
from gpubook import tmem


def test_geometry_matches_the_hardware_table():
    assert tmem.bytes_per_sm() == gb.B200.tmem_per_sm == 256 * 1024
    assert gb.H200.tmem_per_sm == 0


@pytest.mark.parametrize("cols, expected", [(1, 32), (32, 32), (33, 64), (128, 128), (129, 256), (512, 512)])
def test_alloc_columns_rounds_up_to_a_power_of_two_of_at_least_32(cols, expected):
    assert tmem.alloc_columns(cols) == expected


@pytest.mark.parametrize("cols", [0, 513])
def test_alloc_columns_rejects_impossible_requests(cols):
    with pytest.raises(ValueError):
        tmem.alloc_columns(cols)


def test_columns_for_counts_32_bit_cells():
    assert tmem.columns_for(128) == 128            # fp32 accumulator row
    assert tmem.columns_for(128, 16) == 64         # fp16 values, two per column
    with pytest.raises(ValueError):
        tmem.columns_for(3, 16)


def test_lane_quarters_cover_the_lanes_once_per_warpgroup():
    for wg in range(4):
        lanes = [lane for w in range(4 * wg, 4 * wg + 4) for lane in tmem.lane_quarter(w)]
        assert lanes == list(range(tmem.LANES))
    assert tmem.lane_quarter(5) == range(32, 64)
    with pytest.raises(ValueError):
        tmem.lane_quarter(-1)


def test_addresses_put_the_lane_in_the_high_half():
    assert tmem.address(0, 128) == 0x80
    assert tmem.address(32, 0) == 0x200000
    assert tmem.split_address(tmem.address(96, 300)) == (96, 300)
    with pytest.raises(ValueError):
        tmem.address(128, 0)


@pytest.mark.parametrize("shape, num, lanes, columns, registers", [
    ("32x32b", 128, 32, 128, 128),
    ("32x32b", 1, 32, 1, 1),
    ("16x64b", 16, 16, 32, 16),
    ("16x128b", 8, 16, 32, 16),
    ("16x256b", 32, 16, 256, 128),
])
def test_ld_footprints(shape, num, lanes, columns, registers):
    assert tmem.ld_footprint(shape, num) == {"lanes": lanes, "columns": columns, "registers": registers}


def test_ld_footprint_rejects_more_than_128_registers_and_unknown_shapes():
    with pytest.raises(ValueError):
        tmem.ld_footprint("16x256b", 64)
    with pytest.raises(ValueError):
        tmem.ld_footprint("32x64b", 1)
    with pytest.raises(ValueError):
        tmem.ld_footprint("32x32b", 3)


def _pool_kernel(check: bool):
    @T.prim_func
    def k(out: T.Buffer((128,), "int32")):
        T.device_entry()
        _wg = T.warpgroup_id([1])
        warp = T.warp_id_in_wg([4])
        lane = T.lane_id([32])
        pool = T.SMEMPool()
        tm = T.TMEMPool(pool, total_cols=64, cta_group=1)
        pool.commit()
        _acc = tm.alloc((128, 64), "float32")
        tm.commit()
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        if check:
            gb.tmem.check_base(tm)
        out[warp * 32 + lane] = T.int32(1)
        T.ptx.tcgen05.fence__before_thread_sync()
        T.cuda.cta_sync()
        T.ptx.tcgen05.fence__after_thread_sync()
        tm.dealloc()

    return k


def test_check_base_emits_a_trap_on_the_allocated_address():
    with_check = gb.build(_pool_kernel(True), name="pool_checked")
    without = gb.build(_pool_kernel(False), name="pool_unchecked")
    trap = re.compile(r"^\s*trap;", re.M)
    assert len(trap.findall(with_check.ptx)) == 1
    assert not trap.findall(without.ptx)
    # the comparison reads the slot tcgen05.alloc wrote, against the static base 0
    assert re.search(r"trap_when_assert_failed\(\(\(\(uint\*\)\w+\)\[\d+\] == \(uint\)0\)\)", with_check.source)
