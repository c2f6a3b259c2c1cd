"""Decoding (chapter 11H's split-KV kernel): the queries stored as rows, (batch · heads · seqlen_q,
d), with a workspace between V and O. The reference, the 16-bit attention that sets the
allowance and the SDPA baselines read the rows as (batch, heads, seqlen_q, d) and ignore the
workspace."""

from __future__ import annotations

import pytest
import torch

from gpubook.run import baselines, outcheck


def call(batch=2, heads=8, kv_heads=2, seqlen_q=3, seqlen_k=70, d=32, splits=3, seed=4):
    g = torch.Generator().manual_seed(seed)
    q = torch.randn(batch, heads, seqlen_q, d, generator=g).to(torch.bfloat16)
    k = torch.randn(batch, kv_heads, seqlen_k, d, generator=g).to(torch.bfloat16)
    v = torch.randn(batch, kv_heads, seqlen_k, d, generator=g).to(torch.bfloat16)
    rows = batch * heads * seqlen_q
    work = [torch.empty(splits, rows, d), torch.empty(splits, rows), torch.zeros(8, dtype=torch.int32)]
    return q, [q.reshape(rows, d), k, v, *work]


def test_the_decode_reference_is_attention_on_the_rows_viewed_as_heads():
    q, args = call()
    got = outcheck.REFERENCES["sdpa_fp32_decode"](*args, heads=8, seqlen_q=3)
    want = outcheck.REFERENCES["sdpa_fp32"](q, *args[1:3])
    assert got.shape == args[0].shape and torch.equal(got, want.reshape(args[0].shape))
    # without a mask, a KV head's group is one set of rows however they split into heads and
    # queries: that is why the kernel can pack them into one tile
    assert torch.allclose(outcheck.REFERENCES["sdpa_fp32_decode"](*args, heads=24, seqlen_q=1), got, atol=1e-6)
    # a row read against another KV head's keys is not
    swapped = [args[0], args[1].flip(1), args[2].flip(1), *args[3:]]
    assert not torch.allclose(outcheck.REFERENCES["sdpa_fp32_decode"](*swapped, heads=8, seqlen_q=3), got, atol=1e-2)


def test_the_decode_allowance_passes_16_bit_attention_and_refuses_one_split_left_out():
    q, args = call(seqlen_k=300)
    spec = outcheck.tolerance_spec({"bound": "reference", "factor": 2, "low": "sdpa_lowp_decode",
                                    "heads": 8, "seqlen_q": 3})
    ref = outcheck.REFERENCES["sdpa_fp32_decode"](*args, heads=8, seqlen_q=3)
    good = outcheck.LOW["sdpa_lowp_decode"](args, ref, torch.bfloat16, heads=8, seqlen_q=3)
    assert outcheck.compare_output(good, ref, spec, args, "sdpa_fp32_decode")["passed"]
    short = outcheck.REFERENCES["sdpa_fp32"](q, args[1][:, :, :256], args[2][:, :, :256]).to(torch.bfloat16)
    assert not outcheck.compare_output(short.reshape(args[0].shape), ref, spec, args, "sdpa_fp32_decode")["passed"]


def test_the_decode_baselines_take_the_kernels_arguments():
    q, args = call()
    got = baselines.baseline("sdpa_decode_8_3")(*[a.float() for a in args], torch.empty(1))
    want = outcheck.REFERENCES["sdpa_fp32"](q, *args[1:3])
    assert torch.allclose(got, want, atol=1e-5)
    # the forced backends run on a GPU only: their names are what a GPU host rebuilds them from
    for name in ("sdpa_flash_decode_8_3", "sdpa_cudnn_decode_8_3"):
        assert callable(baselines.baseline(name))
    with pytest.raises(ValueError, match="unknown baseline"):
        baselines.baseline("sdpa_decode_8")
