"""Chapter 12's block-scaled GEMM helpers (gpubook.book.blockscaled), on the CPU: the inputs
decode to what the reference multiplies, the tolerance covers fp32 accumulation and the bf16
store, and a wrong scale fails it."""

from __future__ import annotations

import pytest
import torch

import gpubook as gb
from gpubook.book import blockscaled as bs
from gpubook.models import lowprec as lp


def test_the_inputs_decode_to_the_matrices_they_quantize():
    A, B, SA, SB, D = bs.inputs(200, 136, 256, seed=7)
    assert A.dtype == B.dtype == torch.float8_e4m3fn and SA.dtype == torch.float8_e8m0fnu
    assert SA.shape == (2, 2, 512) and SB.shape == (2, 2, 512) and D.shape == (200, 136)
    a, _ = bs.operands(A, B, SA, SB)
    x = bs.hard_matrix(200, 256, 7)
    assert lp.relative_rms_error(x, a) < 0.05                   # E4M3 under per-block scales
    assert len(torch.unique(lp.unblocked_scales(SA.view(torch.uint8), 200, 8))) >= 6   # the blocks' binades differ


def test_the_tolerance_covers_the_kernel_and_a_wrong_scale_breaks_it():
    A, B, SA, SB, _ = bs.inputs(128, 128, 384, seed=3)
    rtol, atol = bs.tolerance(A, B, SA, SB)
    want = bs.reference(A, B, SA, SB)
    a, b = bs.operands(A, B, SA, SB)
    # what the kernel computes: fp32 sums (here in another order), rounded to bf16
    got = (a.float() @ b.float().T).bfloat16()
    gb.compare("D", got, want, rtol, atol)
    codes = SB.view(torch.uint8).clone()
    codes[0, 1] = codes[0, 0]                                  # K tile 1 takes K tile 0's scales
    a2, b2 = bs.operands(A, B, SA, codes.view(torch.float8_e8m0fnu))
    with pytest.raises(gb.CheckError):
        gb.compare("D", (a2 @ b2.T).bfloat16(), want, rtol, atol)


@pytest.mark.parametrize("what, call, rule", [
    ("bf16 A", lambda g: [g[0].bfloat16(), *g[1:4]], "is torch.bfloat16"),
    ("K not whole tiles", lambda g: [g[0][:, :96].contiguous(), g[1][:, :96].contiguous(), *g[2:4]], "K = 96"),
    ("plain scales", lambda g: [*g[:2], torch.zeros(256, 8, dtype=torch.float8_e8m0fnu), g[3]], "tiled layout"),
    ("uint8 scales", lambda g: [*g[:2], g[2].view(torch.uint8), g[3]], "the scales are torch.float8_e8m0fnu"),
    ("K differs", lambda g: [g[0], bs.inputs(256, 128, 512, 3)[1], *g[2:4]], "B has K = 512"),
    ("transposed A", lambda g: [g[0].t().contiguous().t(), *g[1:4]], "K-major"),
])
def test_a_call_the_kernel_cannot_serve_is_refused_with_its_rule(what, call, rule):
    good = bs.inputs(256, 128, 256, seed=3)
    with pytest.raises(gb.KernelCallError, match=rule):
        bs.validate(*call(good))
    assert bs.validate(*good[:4]) == (256, 128, 256)
