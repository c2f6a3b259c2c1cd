"""The attention baselines of gpubook.bench: SDPA with and without the causal mask, GQA included."""

import math

import pytest
import torch

from gpubook.run.bench import BASELINES


def _naive(q, k, v, causal):
    ratio = q.shape[1] // k.shape[1]
    k = k.repeat_interleave(ratio, dim=1).double()
    v = v.repeat_interleave(ratio, dim=1).double()
    s = q.double() @ k.transpose(-1, -2) / math.sqrt(q.shape[-1])
    if causal:
        n = q.shape[2]
        s = s.masked_fill(torch.ones(n, n, dtype=torch.bool).triu(1), float("-inf"))
    return torch.softmax(s, dim=-1) @ v


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("kv_heads", [4, 1])
def test_sdpa_baseline_matches_attention(causal, kv_heads):
    g = torch.Generator().manual_seed(3)
    q = torch.randn(2, 4, 37, 16, generator=g)
    k = torch.randn(2, kv_heads, 37, 16, generator=g)
    v = torch.randn(2, kv_heads, 37, 16, generator=g)
    o = torch.empty_like(q)
    out = BASELINES["sdpa_causal" if causal else "sdpa"](q, k, v, o)
    torch.testing.assert_close(out.double(), _naive(q, k, v, causal), rtol=1e-5, atol=1e-5)


def test_sdpa_causal_differs_from_full():
    g = torch.Generator().manual_seed(4)
    q, k, v = (torch.randn(1, 2, 9, 8, generator=g) for _ in range(3))
    full = BASELINES["sdpa"](q, k, v, torch.empty_like(q))
    causal = BASELINES["sdpa_causal"](q, k, v, torch.empty_like(q))
    assert not torch.allclose(full, causal)
    torch.testing.assert_close(full[:, :, -1], causal[:, :, -1])   # the last query sees every key


@pytest.mark.parametrize("causal", [False, True])
def test_the_flash_backend_baseline_matches_attention(causal):
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 4, 33, 16, generator=g) for _ in range(3))
    out = BASELINES["sdpa_flash_causal" if causal else "sdpa_flash"](q, k, v, torch.empty_like(q))
    torch.testing.assert_close(out.double(), _naive(q, k, v, causal), rtol=1e-5, atol=1e-5)


def test_a_forced_backend_that_cannot_run_raises_instead_of_falling_back():
    q = torch.randn(1, 2, 9, 16)     # cuDNN attention has no CPU kernel
    for name in ("sdpa_cudnn", "sdpa_cudnn_causal"):
        with pytest.raises(RuntimeError, match="No viable backend"):
            BASELINES[name](q, q, q, torch.empty_like(q))
