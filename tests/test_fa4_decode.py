"""Chapter 11B's decoding kernel (`make_fa4_decode`, `make_fa4_tails` with the chapter's
EDITS_DECODE): the refusal of a split with no keys, and the slip the combine invites, planted and
simulated.

Each split leaves O / l and its log-sum-exp L_s; the splits are combined with weights
2^(L_s - max L). A combine that averages the splits instead (every weight 1) is right only when
every split's row sum is the same; on the chapter's second case, whose best keys all lie in the
last split, its simulated check must mismatch. The kernel as written passes the same check in the
chapter's simulation record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from gpubook import fa4
from gpubook import gemm as gg
from gpubook.run import outcheck

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fa4_tails import CHAPTER, _namespace, chapter_list, needs_sim, simulated_check  # noqa: E402

WEIGHT = "T.ptx.ex2.approx.ftz.f32(w[sx], WL[sx, row] - mx[0])"
CASE, SEED = (1, 4, 1, 40, 300, "float16", 2, True), 2210   # the chapter's second case, hard inputs


def _decode(edits: list) -> tuple[dict, object]:
    ns = _namespace() | {"fa4": fa4}
    gg.load_factory(CHAPTER, "decode_args", ns)
    return ns, gg.load_factory(CHAPTER, "make_fa4_tails", ns, edits=edits)


def test_the_planted_case_is_the_chapters_second_decoding_case():
    assert chapter_list("CASES_DECODE", must="seed=2200 + 10 * i")[1] == CASE
    assert sum(WEIGHT in new for _, new, *_ in chapter_list("EDITS_DECODE")) == 1


def test_a_split_with_no_keys_is_refused_before_the_build():
    _, make = _decode(chapter_list("EDITS_DECODE"))
    with pytest.raises(fa4.FA4CallError, match="use at most 3"):
        make(1, 8, 1, 1, 300, "float16", 4)          # three blocks of keys, four splits


@pytest.mark.sim
@needs_sim
def test_the_check_fails_in_simulation_when_the_combine_averages_the_splits(tmp_path, monkeypatch):
    planted = [(old, new.replace(WEIGHT, "w[sx] = T.float32(1.0)"), *rest)
               for old, new, *rest in chapter_list("EDITS_DECODE")]
    ns, make = _decode(planted)
    batch, heads, kv_heads, seqlen_q, seqlen, dtype, splits, hard = CASE
    args = ns["decode_args"](batch, heads, kv_heads, seqlen_q, seqlen, dtype, splits, SEED, hard)
    ref = lambda q, k, v, wo, wl, done, o: outcheck.REFERENCES["sdpa_fp32_decode"](  # noqa: E731
        q, k, v, heads=heads, seqlen_q=seqlen_q)
    rec = simulated_check(make(batch, heads, kv_heads, seqlen_q, seqlen, dtype, splits), "fa4_decode_average",
                          args, ref, fa4.tolerance(args[2], dtype), tmp_path, monkeypatch, outputs=(6,))
    assert rec["status"] == "failed" and rec["tools"]["numbers"]["verdict"] == "mismatch", rec
