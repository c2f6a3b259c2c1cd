"""The FP8 GEMM baselines (torch._scaled_mm over a kernel's own arguments) and the scales that
random_args draws for FP8 kernels."""

import pytest
import torch

from gpubook.compile.signature import Param
from gpubook.run.bench import BASELINES, random_args


def _fp8(shape, seed):
    g = torch.Generator().manual_seed(seed)
    return torch.randn(shape, generator=g).to(torch.float8_e4m3fn)


@pytest.mark.parametrize("name", ["scaled_mm_tensor", "scaled_mm_tensor_fast"])
def test_the_per_tensor_baselines_compute_sa_sb_a_bt(name):
    a, b = _fp8((32, 256), 1), _fp8((48, 256), 2)
    sa, sb = torch.tensor([0.5]), torch.tensor([0.75])
    d = torch.empty(32, 48, dtype=torch.bfloat16)
    out = BASELINES[name](a, b, sa, sb, d)
    ref = 0.5 * 0.75 * (a.double() @ b.double().T)
    assert out.dtype == torch.bfloat16 and out.shape == (32, 48)
    torch.testing.assert_close(out.double(), ref, rtol=2.0**-8, atol=1e-6)


def test_the_blockwise_baseline_passes_cublaslt_its_outer_major_scale_layouts(monkeypatch):
    seen = {}

    def fake(a, b, scale_a, scale_b, out_dtype, use_fast_accum):
        seen.update(a=a, b=b, sa=scale_a, sb=scale_b, dtype=out_dtype, fast=use_fast_accum)
        return torch.empty(a.shape[0], b.shape[1], dtype=out_dtype)

    monkeypatch.setattr(torch, "_scaled_mm", fake)
    M, N, K = 256, 384, 512
    a, b = _fp8((M, K), 3), _fp8((N, K), 4)
    sa, sb = torch.rand(K // 128, M), torch.rand(N // 128, K // 128)
    BASELINES["scaled_mm_blockwise"](a, b, sa, sb, torch.empty(M, N, dtype=torch.bfloat16))
    assert seen["b"].shape == (K, N) and seen["b"].stride() == (1, K)          # B column-major
    assert seen["sa"].shape == (M, K // 128) and seen["sa"].stride() == (1, M)  # 1 x 128, M-major
    assert seen["sb"].shape == (K // 128, N // 128)                             # 128 x 128
    assert seen["dtype"] == torch.bfloat16 and seen["fast"] is False


def test_random_args_draws_positive_scales_for_fp8_kernels_only():
    fp8 = [Param("A", (64, 128), "float8_e4m3fn"), Param("B", (32, 128), "float8_e4m3fn"),
           Param("SA", (1, 64), "float32"), Param("SB", (1, 1), "float32"), Param("D", (64, 32), "bfloat16")]
    A, B, SA, SB, D = random_args(fp8, device="cpu")
    assert A.dtype == torch.float8_e4m3fn and torch.isfinite(A.float()).all()
    for s in (SA, SB):
        assert s.dtype == torch.float32 and bool(((s >= 0.5) & (s < 1)).all())
    assert D.dtype == torch.bfloat16 and bool((D < 0).any())                     # plain normal values
    x, out = random_args([Param("SX", (1000,), "float32"), Param("out", (1000,), "float32")], device="cpu")
    assert bool((x < 0).any())                                                   # no fp8 tensor: no scales
