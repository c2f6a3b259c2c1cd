"""Local (sliding-window) attention: the mask a window hides, the references and the allowance
that check a window kernel at its timed shape, the FLOPs it is credited with, and the
PyTorch baselines a GPU host rebuilds from their names alone."""

from __future__ import annotations

import pytest
import torch

import gpubook as gb
from gpubook.book.ladder import load_factory
from gpubook.run import baselines, outcheck


def brute_sees(n: int, left: int, right: int) -> torch.Tensor:
    return torch.tensor([[i - left <= j <= i + right for j in range(n)] for i in range(n)])


@pytest.mark.parametrize("n,left,right", [(7, 2, 0), (9, 0, 3), (5, 10, 10), (6, 0, 0)])
def test_the_window_hides_what_flashattention_window_size_hides(n, left, right):
    assert torch.equal(~outcheck.hidden_keys(n, n, window=(left, right)), brute_sees(n, left, right))
    assert gb.roofline.window_pairs(n, left, right) == int(brute_sees(n, left, right).sum())


def test_windows_at_the_extremes_are_full_and_causal_attention():
    s = 300
    assert gb.roofline.window_pairs(s, s, s) == s * s
    assert gb.roofline.window_pairs(s, s, 0) == s * (s + 1) // 2
    assert gb.roofline.window_flops(2, 4, s, 64, s, s) == gb.roofline.attention_flops(2, 4, s, s, 64)
    assert torch.equal(outcheck.hidden_keys(5, 5, causal=True), outcheck.hidden_keys(5, 5, window=(5, 0)))
    assert outcheck.hidden_keys(5, 5) is None


def qkv(seqlen: int = 200, heads: int = 4, kv_heads: int = 2, d: int = 64):
    g = torch.Generator().manual_seed(7)
    q = torch.randn(1, heads, seqlen, d, generator=g).to(torch.bfloat16)
    k = torch.randn(1, kv_heads, seqlen, d, generator=g).to(torch.bfloat16)
    v = torch.randn(1, kv_heads, seqlen, d, generator=g).to(torch.bfloat16)
    return q, k, v


def test_the_window_reference_is_sdpa_with_the_window_as_a_mask():
    q, k, v = qkv()
    ref = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=30, right=5)
    sees = ~outcheck.hidden_keys(200, 200, window=(30, 5))
    want = torch.nn.functional.scaled_dot_product_attention(q.float(), k.float(), v.float(), attn_mask=sees,
                                                            enable_gqa=True)
    assert torch.allclose(ref, want, atol=1e-5)
    # the wide window is plain attention, the one-sided one causal
    full = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=200, right=200)
    assert torch.allclose(full, outcheck.REFERENCES["sdpa_fp32"](q, k, v), atol=1e-6)
    causal = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=200, right=0)
    assert torch.allclose(causal, outcheck.REFERENCES["sdpa_fp32_causal"](q, k, v), atol=1e-6)


def test_the_window_allowance_passes_a_16_bit_attention_and_refuses_a_missing_edge():
    """The timed check's bound, with the window carried in the tolerance: the 16-bit attention
    under the window passes; the same with the left edge unmasked (the window's first block
    seen whole) is refused."""
    q, k, v = qkv()
    window = (30, 0)
    ref = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=30, right=0)
    spec = outcheck.tolerance_spec({"bound": "reference", "factor": 2, "low": "sdpa_lowp_window",
                                    "left": 30, "right": 0})
    good = outcheck._sdpa_low(q, k, v, False, window)
    assert outcheck.compare_output(good, ref, spec, (q, k, v), "sdpa_fp32_window")["passed"]
    bad = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=40, right=0).to(torch.bfloat16)
    rec = outcheck.compare_output(bad, ref, spec, (q, k, v), "sdpa_fp32_window")
    assert not rec["passed"] and rec["max_error_over_allowed"] > 10
    # one atol for a chapter's check, with the window passed through to the 16-bit result
    atol = outcheck.reference_atol("sdpa_lowp_window", (q, k, v), ref, "bfloat16", left=30, right=0)
    assert 0 < atol < float((bad.float() - ref).abs().max())
    with pytest.raises(TypeError):
        outcheck.reference_atol("sdpa_lowp_window", (q, k, v), ref, "bfloat16")   # the window is required


def test_window_baselines_are_rebuilt_from_their_names():
    assert baselines.baseline_names(("flex_window_1024_0", "sdpa_masked_window_3_4")) == [
        "flex_window_1024_0", "sdpa_masked_window_3_4"]
    for bad in ("flex_window_1024", "flex_window_-1_0", "sdpa_window_1_1", "flex_window_a_0"):
        with pytest.raises(ValueError, match="unknown baseline"):
            baselines.baseline_names(bad)
    q, k, v = qkv(seqlen=50)
    got = baselines.baseline("sdpa_masked_window_7_2")(q.float(), k.float(), v.float(), None)
    want = outcheck.REFERENCES["sdpa_fp32_window"](q, k, v, left=7, right=2)
    assert torch.allclose(got, want, atol=1e-5)


def test_an_edit_replaces_every_occurrence_it_names_or_refuses(tmp_path, monkeypatch):
    from gpubook.book import ladder

    monkeypatch.setattr(ladder, "CHAPTERS_DIR", tmp_path)
    (tmp_path / "99-x.md").write_text("```{code-cell} ipython3\ndef f(a):\n    b = a + 1\n"
                                      "    c = a + 1\n    return b * c\n```\n")
    ns: dict = {}
    f = load_factory("99-x", "f", ns, edits=[("a + 1", "a + 2", 2), ("return b * c", "return b * c + 1")])
    assert f(1) == 10 and ns["f"] is f
    with pytest.raises(ValueError, match="occurs 2 times, not 1"):
        load_factory("99-x", "f", {}, edits=[("a + 1", "a + 2")])
    with pytest.raises(ValueError, match="occurs 2 times, not 3"):
        load_factory("99-x", "f", {}, edits=[("a + 1", "a + 2", 3)])
