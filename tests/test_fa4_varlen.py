"""Chapter 11B's variable-length kernel (`make_fa4_varlen`, `make_fa4_tails` with the chapter's
EDITS_VARLEN): the rules of a packed call (shared with chapter 11H), the packing its checks use,
and the slip the chapter warns about, planted and simulated.

The last block of a tile's keys is masked at the tile's own sequence length, known only at run
time; a kernel that keeps the ragged kernel's constant instead (the longest sequence's tail)
lets the rows of a shorter sequence see the first keys of the next one. The planted kernel does
that; at the chapter's first check case (sequences of 130, 0, 1 and 300 rows) its simulated
check must mismatch. The kernel as written passes the same check in the chapter's simulation
record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpubook import fa4
from gpubook import gemm as gg
from gpubook.models import fa4_features as fa4x
from gpubook.run import outcheck

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fa4_tails import CHAPTER, _namespace, chapter_list, needs_sim, simulated_check  # noqa: E402

MASK = "c < seq - j * BLK"
LENGTHS, HEADS, KV_HEADS, DTYPE, SEED = (130, 0, 1, 300), 2, 1, "float16", 1800   # the first case


def chapter_edits() -> list:
    return chapter_list("EDITS_VARLEN")


def cases() -> list:
    return chapter_list("CASES_VARLEN", must="seed=1800 + 10 * i")


def packed(seed: int = SEED) -> list:
    ns = _namespace()
    q, k, v, _ = ns["inputs"](len(LENGTHS), HEADS, KV_HEADS, max(LENGTHS), DTYPE, seed)
    q, k, v, cu = fa4x.pack_varlen(q, k, v, LENGTHS)
    return [q, k, v, cu, torch.empty_like(q), torch.empty(HEADS, q.shape[0])]


def test_the_planted_case_is_the_chapters_first_varlen_case():
    assert cases()[0] == (LENGTHS, HEADS, KV_HEADS, DTYPE, False, False)
    assert sum(MASK in new for _, new, *_ in chapter_edits()) == 1


@pytest.mark.parametrize("cu, longest, rule", [
    ([0, 6, 4, 10], 8, "never decrease"), ([1, 4, 10], 8, "start at 0"), ([0, 4, 12], 8, "past the 10 rows"),
    ([0, 9, 10], 8, "longer than max_seqlen"), ([0], 8, "int32 offsets")])
def test_offsets_that_break_the_layout_are_refused(cu, longest, rule):
    qkv = [torch.empty(10, 2, 16)] * 3
    with pytest.raises(fa4.FA4CallError, match=rule):
        fa4x.varlen_problem(*qkv, torch.tensor(cu, dtype=torch.int32), longest)
    with pytest.raises(fa4.FA4CallError, match="int32"):
        fa4x.varlen_problem(*qkv, torch.tensor([0, 10]), 10)
    with pytest.raises(fa4.FA4CallError, match="total must be >= 2"):
        fa4x.varlen_problem(*[torch.empty(1, 2, 16)] * 3, torch.tensor([0, 1], dtype=torch.int32), 1)


def test_packing_keeps_each_sequence_and_the_reference_sees_each_alone():
    q, k, v, cu, _, _ = packed()
    assert cu.tolist() == [0, 130, 130, 131, 431] and q.shape == (431, HEADS, fa4.HEAD_DIM)
    assert fa4x.varlen_problem(q, k, v, cu, 300) == (4, HEADS, KV_HEADS, 431, 300, fa4.HEAD_DIM, DTYPE)
    ref = outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu)
    alone = fa4.reference(q[130:131].transpose(0, 1)[None], k[130:131].transpose(0, 1)[None],
                          v[130:131].transpose(0, 1)[None], False)
    assert torch.allclose(ref[130:131].float(), alone[0].transpose(0, 1), atol=1e-6)
    lse, atol = fa4x.varlen_lse(q, k, cu, causal=False)       # (heads, total), each sequence alone
    assert lse.shape == (HEADS, 431) and atol > 0
    assert torch.allclose(lse[:, 131:431], fa4x.reference_lse(q[131:].transpose(0, 1)[None],
                                                              k[131:].transpose(0, 1)[None], False)[0])


@pytest.mark.sim
@needs_sim
def test_the_check_fails_in_simulation_with_the_mask_at_the_longest_tail(tmp_path, monkeypatch):
    planted = [(old, new.replace(MASK, "c < TAIL"), *rest) for old, new, *rest in chapter_edits()]
    ns = _namespace() | {"fa4x": fa4x}
    gg.load_factory(CHAPTER, "make_fa4_tails", ns, edits=planted)
    args = packed()
    shape = fa4x.varlen_problem(*args[:4], max(LENGTHS))
    rec = simulated_check(ns["make_fa4_varlen"](*shape[:5], DTYPE, False), "fa4_varlen_longest_tail", args,
                          lambda q, k, v, cu, o, lse: outcheck.REFERENCES["sdpa_fp32_varlen"](q, k, v, cu),
                          fa4.tolerance(args[2], DTYPE), tmp_path, monkeypatch, outputs=(4,))
    assert rec["status"] == "failed" and rec["tools"]["numbers"]["verdict"] == "mismatch", rec
