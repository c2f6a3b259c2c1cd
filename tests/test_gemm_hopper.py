"""The Hopper GEMM chapter's helpers: call validation, source diffs, the sm_90a-only badge."""

import pytest
import torch

from gpubook.book.gemm_hopper import GemmCallError, gemm_problem, source_diff
from gpubook.book.sphinxext import PageTiers

BLK_K = 64


def mats(M, N, K, dtype=torch.bfloat16):
    return torch.zeros(M, K, dtype=dtype), torch.zeros(N, K, dtype=dtype)


def test_a_ragged_call_is_served():
    assert gemm_problem(*mats(200, 328, 192), BLK_K) == (200, 328, 192, "bfloat16")
    assert gemm_problem(*mats(1, 8, 64, torch.float16), BLK_K) == (1, 8, 64, "float16")


@pytest.mark.parametrize("args, words", [
    (mats(200, 328, 100), "not a positive multiple of BLK_K = 64"),
    (mats(200, 328, 0), "not a positive multiple of BLK_K = 64"),
    (mats(200, 328, 192, torch.float32), "unsupported dtypes A float32"),
    ((torch.zeros(200, 192, dtype=torch.bfloat16), torch.zeros(328, 192, dtype=torch.float16)),
     "both operands alike"),
    ((torch.zeros(200, 192, dtype=torch.bfloat16), torch.zeros(328, 128, dtype=torch.bfloat16)),
     "needs equal K"),
    ((torch.zeros(2, 200, 192, dtype=torch.bfloat16), torch.zeros(328, 192, dtype=torch.bfloat16)),
     "must be a matrix"),
    ((torch.zeros(200, 192, dtype=torch.bfloat16), torch.zeros(192, 328, dtype=torch.bfloat16).T),
     "K must have stride 1"),
    ((torch.zeros(200, 200, dtype=torch.bfloat16)[:, :192], torch.zeros(328, 192, dtype=torch.bfloat16)),
     "dense rows"),
    (mats(200, 300, 192), "N = 300"),
    ((torch.zeros(200 * 192 + 1, dtype=torch.bfloat16)[1:].view(200, 192), mats(200, 328, 192)[1]),
     "not a multiple of 16 bytes"),
])
def test_calls_the_kernels_cannot_serve_are_refused(args, words):
    with pytest.raises(GemmCallError) as err:
        gemm_problem(*args, BLK_K)
    assert words in str(err.value)


def test_source_diff_shows_only_the_change():
    def step_a(x):
        y = x + 1
        return y

    def step_b(x):
        y = x + 2  # NEW
        return y

    diff = source_diff(step_a, step_b).splitlines()
    assert diff[0] == "--- step_a" and diff[1] == "+++ step_b"
    assert "-    y = x + 1" in diff and "+    y = x + 2  # NEW" in diff
    assert "     return y" in diff


def test_a_page_of_hopper_only_kernels_gets_its_own_badge():
    page = PageTiers()
    page.read('gemm_h1_4096: compiled for sm_90a only; no sm_100a build: ptxas: ... NOT RUN gemm_h1')
    css, label, text = page.tier()
    assert label == "sm_90a only" and "Hopper (sm_90a) only" in text
    page.read("copy: compiled for sm_100a (+sm_90a) · 8 regs")   # a portable probe beside it: both named
    css, label, text = page.tier()
    assert label == "sm_90+ (1 kernel), sm_90a (1)" and "mixed" in css
    assert "gemm_h1_4096 runs on Hopper (sm_90a) only" in text and "copy runs on Hopper (sm_90a) and Blackwell" in text
