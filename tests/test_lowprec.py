"""The low-precision formats of block-scaled GEMMs (gpubook.models.lowprec), on the CPU."""

from __future__ import annotations

import math

import pytest
import torch

from gpubook.models import lowprec as lp


def test_the_grids_are_the_formats():
    assert lp.E2M1.values() == [0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0]
    e4m3, e5m2 = lp.E4M3.values(), lp.E5M2.values()
    assert len(e4m3) == 127 and e4m3[-1] == 448 and e4m3[1] == 2.0 ** -9      # 126 nonzero finite magnitudes
    assert len(e5m2) == 124 and e5m2[-1] == 57344 and e5m2[1] == 2.0 ** -16
    assert (lp.E4M3.emax, lp.E5M2.emax, lp.E2M1.emax) == (8, 15, 2)
    assert lp.E4M3.bits == lp.E5M2.bits == 8 and lp.E2M1.bits == 4 and lp.UE4M3.bits == 7


@pytest.mark.parametrize("fmt, dtype", [(lp.E4M3, torch.float8_e4m3fn), (lp.E5M2, torch.float8_e5m2)])
def test_rounding_agrees_with_torchs_own_float8_in_range(fmt, dtype):
    g = torch.Generator().manual_seed(0)
    x = torch.randn(20000, generator=g) * torch.exp2(torch.randint(-14, 9, (20000,), generator=g).float())
    x = x.clamp(-fmt.max_value, fmt.max_value)
    assert torch.equal(lp.round_to(x, fmt), x.to(dtype).float())
    grid = torch.tensor(fmt.values())
    assert torch.equal(lp.round_to(grid, fmt), grid) and torch.equal(lp.round_to(-grid, fmt), -grid)


def test_e2m1_rounds_to_nearest_even_and_saturates():
    x = torch.tensor([0.2, 0.25, 0.3, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0, 5.1, 7.0, 100.0, -0.75, -5.0])
    want = [0.0, 0.0, 0.5, 1.0, 1.0, 2.0, 2.0, 4.0, 4.0, 6.0, 6.0, 6.0, -1.0, -4.0]
    assert lp.round_to(x, lp.E2M1).tolist() == want


def test_an_mx_block_puts_its_largest_element_in_the_top_binade():
    g = torch.Generator().manual_seed(1)
    x = torch.randn(64, 256, generator=g) * 3
    for fmt in (lp.E4M3, lp.E5M2, lp.E2M1):
        q, s = lp.mx_quantize(x, fmt)
        assert s.shape == (64, 256 // lp.MX_BLOCK) and s.dtype == torch.int32
        top = q.abs().reshape(64, -1, lp.MX_BLOCK).amax(-1)
        assert bool(((top >= 2.0 ** fmt.emax) & (top <= fmt.max_value)).all())
        # an element in the format's normal range is within half a step of the grid; one above
        # max_value (the top binade reaches 2^(emax + 1)) saturates, losing at most the gap
        back = lp.mx_dequantize(q, s).reshape(64, -1, 32)
        xs = x.reshape(64, -1, 32)
        rel = (back - xs).abs() / xs.abs().clamp(min=1e-30)
        scaled = xs.abs() / torch.exp2(s[..., None].float())
        normal = (scaled >= fmt.min_normal) & (scaled <= fmt.max_value)
        assert float(rel[normal].max()) <= 2.0 ** -(fmt.man_bits + 1) + 1e-7
        over = rel[scaled > fmt.max_value]
        assert over.numel() == 0 or float(over.max()) <= 1 - fmt.max_value / 2.0 ** (fmt.emax + 1)
    assert torch.equal(lp.ue8m0_codes(torch.tensor([-127, 0, 127])), torch.tensor([0, 127, 254], dtype=torch.uint8))


def test_an_mx_block_of_zeros_keeps_zeros():
    q, s = lp.mx_quantize(torch.zeros(2, 64))
    assert bool((q == 0).all()) and bool((s == -127).all())


def test_nvfp4_two_level_scales_fit_their_formats():
    g = torch.Generator().manual_seed(2)
    x = torch.randn(32, 128, generator=g)
    x[3, 17] = 40.0                                    # an outlier sets the tensor scale
    q, s, gs = lp.nvfp4_quantize(x)
    assert math.isclose(gs, 40.0 / (6 * 448))
    assert s.shape == (32, 128 // lp.NVFP4_BLOCK) and float(s.max()) <= 448 and float(s.min()) >= 0
    assert torch.equal(lp.round_to(s, lp.UE4M3), s) and torch.equal(lp.round_to(q, lp.E2M1), q)
    back = lp.nvfp4_dequantize(q, s, gs)
    assert float(back[3, 17]) == pytest.approx(40.0, rel=0.07)
    assert lp.relative_rms_error(x, back) < 0.15


def test_e2m1_packs_two_to_a_byte_low_nibble_first():
    q = torch.tensor([[0.5, -6.0, 1.5, 0.0]])
    b = lp.pack_e2m1(q)
    assert b.dtype == torch.uint8 and b.tolist() == [[0x1 | (0xF << 4), 0x3]]
    assert torch.equal(lp.unpack_e2m1(b), q)
    with pytest.raises(ValueError, match="not every value"):
        lp.e2m1_codes(torch.tensor([0.7]))


def test_formats_order_their_errors_on_a_gaussian():
    g = torch.Generator().manual_seed(3)
    x = torch.randn(256, 1024, generator=g)
    err = {name: lp.relative_rms_error(x, lp.mx_dequantize(*lp.mx_quantize(x, fmt)))
           for name, fmt in (("E4M3", lp.E4M3), ("E5M2", lp.E5M2), ("E2M1", lp.E2M1))}
    nv = lp.relative_rms_error(x, lp.nvfp4_dequantize(*lp.nvfp4_quantize(x)))
    assert err["E4M3"] < err["E5M2"] < nv < err["E2M1"]      # NVFP4's finer scales beat MXFP4's
    assert err["E4M3"] < 0.04 and err["E2M1"] < 0.2


def test_bad_blocks_and_signs_are_refused():
    with pytest.raises(ValueError, match="multiple of the block"):
        lp.mx_quantize(torch.zeros(4, 48))
    with pytest.raises(ValueError, match="unsigned"):
        lp.round_to(torch.tensor([-1.0]), lp.UE4M3)


def test_the_ceil_rule_never_saturates_and_the_floor_rule_does():
    x = torch.tensor([[480.0] + [1.0] * 31])                    # amax above 448, in E4M3's top binade
    (q_floor, s_floor), (q_ceil, s_ceil) = (lp.mx_quantize(x, lp.E4M3, rule=r) for r in ("floor", "ceil"))
    assert s_floor.item() == 0 and q_floor[0, 0].item() == 448.0     # saturated
    assert s_ceil.item() == 1 and lp.mx_dequantize(q_ceil, s_ceil)[0, 0].item() == 480.0   # 240 x 2, exact
    g = torch.Generator().manual_seed(4)
    y = torch.randn(128, 512, generator=g)
    q, s = lp.mx_quantize(y, lp.E4M3, rule="ceil")
    assert bool((q.abs() <= lp.E4M3.max_value).all())
    amax = y.abs().reshape(128, -1, 32).amax(-1)
    assert bool((amax / torch.exp2(s.float()) <= lp.E4M3.max_value).all())
    assert bool((amax / torch.exp2(s.float() - 1) > lp.E4M3.max_value).all())   # the smallest such power
    with pytest.raises(ValueError, match="unknown scale rule"):
        lp.mx_scale_exponents(y, lp.E4M3, rule="round")


def test_the_tiled_scale_layout_is_the_one_tcgen05_cp_reads():
    from tvm.backend.cuda.tile_primitive.gemm_async.tcgen05 import sf_smem_layout

    codes = torch.randint(0, 255, (300, 20), dtype=torch.uint8, generator=torch.Generator().manual_seed(2))
    tiled = lp.blocked_scales(codes, pad=127)
    assert tiled.shape == (3, 5, 512) and torch.equal(lp.unblocked_scales(tiled, 300, 20), codes)
    full = lp.unblocked_scales(tiled, 384, 20)                        # rows 300..383 are padding
    assert bool((full[300:] == 127).all())
    strides = [int(it.stride) for it in sf_smem_layout(128, 4, 1).shard]      # (r div 32, r mod 32, k)
    for r, k in ((0, 0), (1, 0), (31, 3), (32, 0), (100, 2), (127, 3)):
        off = (r // 32) * strides[0] + (r % 32) * strides[1] + k * strides[2]
        assert tiled[1, 2, off] == codes[128 + r, 8 + k]


def test_the_rowwise_error_weighs_every_row_alike():
    x = torch.stack([torch.ones(64), torch.full((64,), 1e-6)])
    approx = torch.stack([torch.ones(64), torch.zeros(64)])          # the small row lost entirely
    assert lp.relative_rms_error(x, approx) < 1e-5
    assert lp.rowwise_relative_rms_error(x, approx) == pytest.approx(0.5)
