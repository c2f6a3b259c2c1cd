"""Variable-length batches: packed (total, H, d) tensors with offsets. The reference and the
16-bit attention that set a varlen kernel's allowance run each sequence on its own; a timed
case carries its offsets as fixed inputs, since random ones would not be offsets."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from gpubook.run import baselines, outcheck, protocol
from gpubook.run.inputs import random_args


def packed(lengths, heads=4, kv_heads=2, d=32, dtype=torch.bfloat16, seed=3):
    g = torch.Generator().manual_seed(seed)
    total = sum(lengths)
    q = torch.randn(total, heads, d, generator=g).to(dtype)
    k = torch.randn(total, kv_heads, d, generator=g).to(dtype)
    v = torch.randn(total, kv_heads, d, generator=g).to(dtype)
    cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0)), dtype=torch.int32)
    return q, k, v, cu


@pytest.mark.parametrize("causal", [False, True])
def test_the_varlen_reference_is_each_sequence_on_its_own(causal):
    lengths = (5, 0, 1, 17)
    q, k, v, cu = packed(lengths)
    ref = outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu, causal=causal)
    for s, e in zip(cu.tolist()[:-1], cu.tolist()[1:]):
        if e == s:
            continue
        one = [t[s:e].transpose(0, 1)[None] for t in (q, k, v)]
        want = outcheck.REFERENCES["sdpa_fp32" + ("_causal" if causal else "")](*one)
        assert torch.allclose(ref[s:e], want[0].transpose(0, 1), atol=1e-6)
    # a batch padded to one length is not the same problem: the padded keys would be seen
    whole = outcheck.REFERENCES["sdpa_fp32"](*[t.transpose(0, 1)[None] for t in (q, k, v)])[0].transpose(0, 1)
    assert not torch.allclose(ref, whole, atol=1e-2)


def test_the_varlen_allowance_passes_16_bit_attention_and_refuses_a_sequence_seen_whole():
    q, k, v, cu = packed((40, 7, 90))
    spec = outcheck.tolerance_spec({"bound": "reference", "factor": 2, "low": "sdpa_lowp_varlen", "causal": True})
    ref = outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu, causal=True)
    good = outcheck.LOW["sdpa_lowp_varlen"]((q, k, v, cu), ref, torch.bfloat16, causal=True)
    assert outcheck.compare_output(good, ref, spec, (q, k, v, cu), "sdpa_fp32_varlen")["passed"]
    # the causal mask forgotten: the kernel would compute the non-causal answer
    bad = outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu, causal=False).to(torch.bfloat16)
    assert not outcheck.compare_output(bad, ref, spec, (q, k, v, cu), "sdpa_fp32_varlen")["passed"]


def test_sdpa_on_nested_tensors_is_the_varlen_baseline():
    q, k, v, cu = packed((9, 3, 20), heads=2, kv_heads=2)
    try:
        got = baselines.baseline("sdpa_varlen_causal")(q.float(), k.float(), v.float(), cu, None)
    except (RuntimeError, NotImplementedError) as e:   # a CPU build without nested SDPA
        pytest.skip(f"nested-tensor SDPA does not run here: {e}")
    got = got.transpose(1, 2).values()
    want = outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu, causal=True)
    assert torch.allclose(got, want, atol=1e-5)


def test_fixed_inputs_take_their_values_and_are_checked():
    params = [SimpleNamespace(name="Q", dtype="float32", shape=(4, 2), packed=1),
              SimpleNamespace(name="CU", dtype="int32", shape=(3,), packed=1)]
    q, cu = random_args(params, device="cpu", fixed={"CU": [0, 1, 4]})
    assert cu.dtype == torch.int32 and cu.tolist() == [0, 1, 4] and q.shape == (4, 2)
    with pytest.raises(ValueError, match="shape"):
        random_args(params, device="cpu", fixed={"CU": [0, 4]})
    with pytest.raises(ValueError, match="no parameter"):
        random_args(params, device="cpu", fixed={"cu_seqlens": [0, 1, 4]})


def test_members_with_other_offsets_do_not_share_inputs():
    meta = {"params": [{"shape": [3], "dtype": "int32"}]}
    a = protocol._signature(dict(meta, fixed={"CU": [0, 1, 3]}))
    b = protocol._signature(dict(meta, fixed={"CU": [0, 2, 3]}))
    assert a != b and protocol._signature(meta) == [((3,), "int32")]
