"""Chapter 11B's two-Q-tile kernel for any length (`make_fa4_full_tails`, `make_fa4_full` with the
chapter's EDITS_FULL_TAILS), and the slip the chapter warns about, planted and simulated.

Without the causal mask the last block of keys, when the length is not a multiple of 128, holds
the TMA's zero keys past the end; each scores 0 and adds 2^(-m) to its row's sum unless the
block takes the masked softmax. The planted kernel leaves the ragged block unmasked; at the
chapter's first case (340 keys, ordinary logits) its simulated check must mismatch. The kernel
as written passes the same check in the chapter's simulation record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpubook import fa4
from gpubook import gemm as gg
from gpubook.facts.hardware import B200

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fa4_tails import CHAPTER, _namespace, chapter_list, needs_sim, simulated_check  # noqa: E402

BRANCH = "elif not causal and TAIL > 0 and j == NQ - 1:"
SHAPE, CTAS, SEED = (1, 3, 1, 340, "float16", False), 2, 1900      # the chapter's first case


def chapter_edits() -> list:
    return chapter_list("EDITS_FULL_TAILS")


def cases() -> list:
    return chapter_list("CASES_FULL_TAILS", must="seed=1900 + 10 * i")


def test_the_planted_case_is_the_chapters_first_case():
    assert cases()[0] == SHAPE + (CTAS, False)
    assert sum(BRANCH in new for _, new, *_ in chapter_edits()) == 1


def test_the_two_tile_kernel_takes_any_length_only_in_its_ragged_form():
    fa4.validate(1, 3, 1, 340, 128, "float16", False, q_tiles=2, ragged=True)
    with pytest.raises(fa4.FA4CallError, match="multiple of 256"):
        fa4.validate(1, 3, 1, 340, 128, "float16", False, q_tiles=2)


@pytest.mark.sim
@needs_sim
def test_the_check_fails_in_simulation_without_the_ragged_blocks_mask(tmp_path, monkeypatch):
    planted = [e for e in chapter_edits() if BRANCH not in e[1]]
    assert len(planted) == len(chapter_edits()) - 1
    ns = _namespace() | dict(B200=B200, STAGES2=4, S_LOAD=64, REGS_SOFT2=176, REGS_CORR2=96,
                             REGS_OTHER2=64)               # the two-tile kernel's, as test_fa4 sets them
    gg.load_factory(CHAPTER, "make_fa4_full", ns, edits=planted)
    args = ns["inputs"](*SHAPE[:5], SEED) + [torch.empty(*SHAPE[:2], SHAPE[3])]   # O, then the LSE
    rec = simulated_check(ns["make_fa4_full_tails"](*SHAPE, ctas=CTAS), "fa4_full_tails_unmasked", args,
                          lambda q, k, v, o, lse: fa4.reference(q, k, v, False), fa4.tolerance(args[2], SHAPE[4]),
                          tmp_path, monkeypatch, outputs=(3,))
    assert rec["status"] == "failed" and rec["tools"]["numbers"]["verdict"] == "mismatch", rec
