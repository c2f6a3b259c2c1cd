"""Planted numeric defects: the output checks must refuse a kernel with one arithmetic mistake and
accept a correct low-precision result, at every timed shape (the replay's comparison,
gpubook.run.outcheck.compare_output, with the case's tolerance) and at the chapters' check shapes
(gpubook.verify.compare.compare, with the check's atol and rtol).

Each defect acts row by row (one query's softmax, one row of D), so a slice of rows at the full
reduction length stands for the whole output: every key of the sequence, all of K. The defects
and the kernel-like correct results are gpubook.verify.defects; the inputs are the replay's
(random_args) at timed shapes and the chapters' seeded ones at check shapes."""

from __future__ import annotations

import pytest
import torch

from gpubook.run import outcheck
from gpubook.verify import coverage, defects
from gpubook.verify.compare import CheckError, compare, seeded

# The timed attention shapes (seqlen, head_dim) of chapters 11, 11H and 11B, each with and without
# the causal mask: 11 and 11H at S = 4096, d = 128; 11H also at S = 8192 and at d = 64; 11B at
# S = 8192, d = 128.
ATTENTION_TIMED = [(4096, 128), (8192, 128), (4096, 64)]
# The tolerance every timed attention case names (chapters 11, 11B, 11H)
ATTENTION_TOLERANCE = {"bound": "reference", "factor": 2, "low": "sdpa_lowp"}
# Reduction lengths of the timed bf16 GEMMs of chapter 10H (4096³, 8192³, K = 64 and the LLM
# shapes' K) and of the FP8 GEMMs of chapter 12H (4096³, 8192³)
GEMM_TIMED_K = [64, 2048, 4096, 8192, 11008, 14336]
FP8_TIMED_K = [4096, 8192]
GEMM_TOLERANCE = {"bound": "reference", "factor": 2, "low": "rounded"}
# The margin a refused defect must keep: the slice's allowance is set by fewer rows than the whole
# output's, whose largest outputs are a little larger, so a defect must miss it by more than that.
MARGIN = 2.0


def _judge(recs, margin=MARGIN):
    assert recs["correct"]["passed"] and recs["correct"]["max_error_over_allowed"] < 0.6, recs["correct"]
    for key, rec in recs.items():
        if key != "correct":
            assert not rec["passed"] and rec["max_error_over_allowed"] > margin, (key, rec)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen,head_dim", ATTENTION_TIMED)
def test_the_timed_attention_check_refuses_every_planted_defect(seqlen, head_dim, causal):
    tol = dict(ATTENTION_TOLERANCE, low="sdpa_lowp" + ("_causal" if causal else ""))
    _judge(defects.attention_case(seqlen, head_dim, causal, tol, rows=32))


def test_the_old_attention_bound_passed_most_defects():
    """Why the bound changed: 4u max|V| passes a dropped KV block, a 10% scale error and O / 2."""
    recs = defects.attention_case(4096, 128, False, {"bound": "attention", "factor": 4}, rows=32)
    assert all(recs[key]["passed"] for key in ("drop_last_block", "scale_10pct", "half"))


@pytest.mark.parametrize("K", GEMM_TIMED_K)
def test_the_timed_gemm_check_refuses_a_missing_k_tile(K):
    _judge(defects.gemm_case(K, 64, GEMM_TOLERANCE, rows=8, cols=128))


def test_the_old_gemm_bound_passed_a_missing_k_tile_at_the_longest_k():
    """Why chapter 10H's timed checks changed bound: at K = 14336 the worst-case fp32 summation
    bound lets a missing K tile of 64 through on most of D."""
    rec = defects.gemm_case(14336, 64, {"bound": "gemm"}, rows=8, cols=128, reference=None)["missing_k_tile"]
    assert rec["max_error_over_allowed"] < 1.5


@pytest.mark.parametrize("K", FP8_TIMED_K)
def test_the_timed_fp8_checks_refuse_a_missing_tile_and_a_missing_promotion(K):
    _judge(defects.fp8_case(K, "block", GEMM_TOLERANCE, rows=4, cols=128))
    # one scale per tensor: step 1 sums all of K in the tensor core by design, like cuBLASLt's
    # fast accumulation it is compared with; the comparison still refuses a missing K tile
    _judge(defects.fp8_case(K, "tensor", {"bound": "gemm"}, rows=4, cols=128))


def test_the_old_fp8_bound_passed_a_kernel_that_never_promotes():
    """Why chapter 12H's block-scaled timed checks changed bound: against cuBLASLt's blockwise
    output (which promotes) the summation bound lets a kernel that never promotes through at
    8192³."""
    rec = defects.fp8_case(8192, "block", {"bound": "gemm"}, rows=4, cols=128, baseline=True)
    assert rec["no_promotion"]["passed"] and not rec["missing_k_tile"]["passed"]


def test_the_reference_bound_is_named_recorded_and_described():
    with pytest.raises(ValueError, match="names its low-precision result"):
        outcheck.tolerance_spec({"bound": "reference"})
    with pytest.raises(ValueError, match="positive 'factor'"):
        outcheck.tolerance_spec({"bound": "reference", "low": "rounded", "factor": 0})
    spec = outcheck.tolerance_spec({"bound": "reference", "low": "rounded"})
    assert spec["factor"] == 2
    a, b = seeded((8, 256), "bfloat16", seed=1), seeded((16, 256), "bfloat16", seed=2)
    ref = outcheck.REFERENCES["matmul_nt"](a, b)
    rec = outcheck.compare_output(ref.to(torch.bfloat16), ref, spec, [a, b], "matmul_nt")
    w = rec["worst_row"]
    # the fp32 product rounded is the low-precision result itself: error e_ref, of 2 e_ref + eps
    assert rec["passed"] and w["error"] == w["reference_error"]
    assert w["allowance"] == pytest.approx(2 * w["reference_error"] + w["eps"])
    line = outcheck.describe(rec)
    assert "2·e_ref + eps" in line and "the error of rounded there" in line
    # one element off by more than its row's allowance is refused, and said so
    bad = ref.clone()
    bad[3, 5] += 3 * w["allowance"]
    rec = outcheck.compare_output(bad.to(torch.bfloat16), ref, spec, [a, b], "matmul_nt")
    assert rec["mismatches"] == 1 and rec["first_mismatch"]["index"] == [3, 5]


# ---- check shapes -------------------------------------------------------------------------

def _refuses(out, expected, rtol, atol):
    try:
        compare("defect", out, expected, rtol, atol)
    except CheckError:
        return True
    return False


def _attention_check_inputs(batch, heads, kv_heads, seqlen, head_dim, dtype, seed, hard):
    """Chapter 11H's check inputs (its `inputs`), for the first head only."""
    q = seeded((batch, heads, seqlen, head_dim), "float32", seed=seed)
    k = seeded((batch, kv_heads, seqlen, head_dim), "float32", seed=seed + 1)
    v = seeded((batch, kv_heads, seqlen, head_dim), "float32", seed=seed + 2)
    if hard:
        q, k = 3 * q, 3 * k
        late = torch.arange(seqlen - 40, seqlen)
        k[:, :, late] = 1.5 * q[:, ::heads // kv_heads, late]
    dt = getattr(torch, dtype)
    q, k, v = q.to(dt), k.to(dt), v.to(dt)
    coverage.plant_late_max(q, k)
    return q[:1, :1], k[:1, :1], v[:1, :1]


# chapter 11H's CASES (seeds 1200 + 10 i) and its atol
CHECK_CASES_11H = [
    (1, 2, 2, 600, 128, "bfloat16", False),
    (1, 4, 1, 600, 128, "float16", True),
    (2, 2, 2, 700, 64, "float16", False),
    (1, 2, 2, 640, 64, "bfloat16", True),
]


@pytest.mark.parametrize("i", range(len(CHECK_CASES_11H)))
def test_the_attention_checks_refuse_every_planted_defect(i):
    case = CHECK_CASES_11H[i]
    q, k, v = _attention_check_inputs(*case[:6], seed=1200 + 10 * i, hard=case[6])
    dtype = case[5]
    ref = outcheck.REFERENCES["sdpa_fp32"](q, k, v)
    atol = outcheck.reference_atol("sdpa_lowp", [q, k, v], ref, dtype,
                                   cap=4 * outcheck.UNIT_ROUNDOFF[dtype] * float(v.float().abs().max()))
    assert not _refuses(defects.attention_kernel_like(q[0], k[0], v[0]).unsqueeze(0), ref, 0, atol)
    for defect in defects.ATTENTION_DEFECTS:
        out = defects.attention_kernel_like(q[0], k[0], v[0], defect=defect).unsqueeze(0)
        assert _refuses(out, ref, 0, atol), (case, defect)


@pytest.mark.parametrize("dtype", ["bfloat16", "float16"])
def test_the_gemm_check_refuses_a_missing_k_tile(dtype):
    """Chapter 10H's check: 200 x 328 x 576, atol twice the worst fp32 summation error, rtol u."""
    M, N, K = 200, 328, 576
    i = ("bfloat16", "float16").index(dtype)
    a, b = seeded((M, K), dtype, seed=2 * i + 1), seeded((N, K), dtype, seed=2 * i + 2)
    ref = (a.double() @ b.double().T).float()
    atol = 2 * K * 2.0**-23 * float((a.double().abs() @ b.double().abs().T).max())
    rtol = outcheck.UNIT_ROUNDOFF[dtype]
    odt = getattr(torch, dtype)
    assert not _refuses(defects.gemm_kernel_like(a, b, 64, odt), ref, rtol, atol)
    assert _refuses(defects.gemm_kernel_like(a, b, 64, odt, skip=4), ref, rtol, atol)


# The timed decoding shapes of chapter 11H (keys, splits): the splits its `split_plan` picks for
# 32 and 8 tiles on 132 SMs
DECODE_TIMED = [(8192, 4), (32768, 16)]
DECODE_TOLERANCE = {"bound": "reference", "factor": 2, "low": "sdpa_lowp"}


@pytest.mark.parametrize("seqlen_k,splits", DECODE_TIMED)
def test_the_timed_decode_check_refuses_a_broken_combine(seqlen_k, splits):
    """A split left out and splits averaged without weights miss by more than the margin; base-2
    LSEs weighted as natural ones are refused, closer: random inputs give splits of nearly equal
    LSE, where any weights are nearly right."""
    recs = defects.decode_case(seqlen_k, 128, splits, DECODE_TOLERANCE, rows=8)
    assert recs["correct"]["passed"] and recs["correct"]["max_error_over_allowed"] < 0.6, recs["correct"]
    for key in ("drop_split", "no_split_rescale"):
        assert not recs[key]["passed"] and recs[key]["max_error_over_allowed"] > MARGIN, (key, recs[key])
    assert not recs["lse_base_e"]["passed"], recs["lse_base_e"]


def test_the_hard_decode_inputs_set_the_splits_apart():
    """Chapter 11H's hard decoding inputs (late keys equal to 1.5 times a query): a combine
    without weights misses by two orders of magnitude more than on random inputs."""
    g = torch.Generator().manual_seed(5)
    q = 3 * torch.randn(1, 1, 8, 128, generator=g)
    k = 3 * torch.randn(1, 1, 1000, 128, generator=g)
    v = torch.randn(1, 1, 1000, 128, generator=g)
    k[:, :, -40:] = 1.5 * q[:, :, :1]
    q, k, v = (t.to(torch.bfloat16) for t in (q, k, v))
    recs = defects.decode_case(1000, 128, 3, DECODE_TOLERANCE, q=q, k=k, v=v)
    assert recs["correct"]["passed"], recs["correct"]
    for key in defects.DECODE_DEFECTS:
        assert not recs[key]["passed"] and recs[key]["max_error_over_allowed"] > MARGIN, (key, recs[key])
    assert recs["no_split_rescale"]["max_error_over_allowed"] > 100
