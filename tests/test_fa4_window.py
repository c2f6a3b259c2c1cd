"""Chapter 11B's local-window kernel (`make_fa4_window`, `make_fa4_tails` with the chapter's
EDITS_WINDOW): what it refuses, the references its check uses, and the defect the chapter
warns about, planted and simulated.

A row whose first block of keys hides all of its keys has a row max of -inf; the kernel then
subtracts 0 instead of the max, so that its exponentials are 0 rather than 2^(-inf + inf) =
NaN. The planted kernel subtracts the max anyway; at the chapter's first check case (a window
of 50 keys, so that in every tile after the first the last 78 rows see nothing in the first
block) its simulated check must mismatch. The kernel as written passes the same check in the
chapter's simulation record."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

from gpubook import fa4
from gpubook import gemm as gg
from gpubook.models import fa4_features as fa4x

sys.path.insert(0, str(Path(__file__).resolve().parent))
from test_fa4_tails import CHAPTER, _namespace, chapter_list, needs_sim, simulated_check  # noqa: E402

GUARD = "T.Select(m[0] == T.float32(-math.inf), T.float32(0.0), m[0])"
SHAPE, WINDOW, SEED = (1, 2, 1, 300, "float16"), (50, 0), 1400      # the chapter's first window case


def chapter_edits() -> list:
    return chapter_list("EDITS_WINDOW")


def cases() -> list:
    return chapter_list("CASES_WINDOW", must="seed=1400 + 10 * i")


def window_namespace(edits: list) -> dict:
    ns = _namespace() | {"fa4x": fa4x}
    gg.load_factory(CHAPTER, "make_fa4_tails", ns, edits=edits)
    return ns


def test_the_planted_case_is_the_chapters_first_window_case():
    assert cases()[0] == SHAPE + (WINDOW, False) and SEED == 1400
    assert sum(GUARD in new for _, new, *_ in chapter_edits()) == 1


@pytest.mark.parametrize("window", [(-1, 0), (0, -3), (5,), [5, 0], (True, 0), (2.0, 1)])
def test_a_bad_window_is_refused_before_the_build(window):
    make = window_namespace(chapter_edits())["make_fa4_window"]
    with pytest.raises(fa4.FA4CallError, match="window"):
        make(*SHAPE, window)
    with pytest.raises(fa4.FA4CallError, match="not both"):
        fa4x.validate_window((8, 0), causal=True)


def test_the_window_lse_is_the_logsumexp_over_the_window():
    q, k = torch.randn(1, 2, 70, 16, dtype=torch.float64), torch.randn(1, 1, 70, 16, dtype=torch.float64)
    lse = fa4x.reference_lse(q, k, False, (5, 2))
    s = fa4x.scores(q, k, False)
    i = 40                                              # row 40 sees keys 35 .. 42
    assert torch.allclose(lse[0, 1, i].double(), s[0, 1, i, 35:43].logsumexp(-1), rtol=1e-6)
    assert torch.equal(fa4x.reference_lse(q, k, False, (70, 0)), fa4x.reference_lse(q, k, True))


@pytest.mark.sim
@needs_sim
def test_the_check_fails_in_simulation_without_the_unseen_row_guard(tmp_path, monkeypatch):
    planted = [(old, new.replace(GUARD, "m[0]"), *rest) for old, new, *rest in chapter_edits()]
    ns = window_namespace(planted)
    args = ns["inputs"](*SHAPE, SEED) + [torch.empty(*SHAPE[:2], SHAPE[3])]
    atol = (fa4.tolerance(args[2], SHAPE[4]), fa4x.lse_tolerance(args[0], args[1], False, window=WINDOW))
    rec = simulated_check(ns["make_fa4_window"](*SHAPE, WINDOW), "fa4_window_unguarded", args,
                          lambda q, kk, v, o, lse: (fa4x.reference_window(q, kk, v, WINDOW),
                                                    fa4x.reference_lse(q, kk, False, WINDOW)),
                          atol, tmp_path, monkeypatch)
    assert rec["status"] == "failed" and rec["tools"]["numbers"]["verdict"] == "mismatch", rec


def test_masking_only_the_last_block_is_exact_for_causal_only_when_the_diagonal_is_one_block():
    """Step 6's causal shortcut (the mask on a tile's last block alone) sees exactly the causal
    keys with 128-key blocks under 128-row tiles, and keys past the diagonal with 80-key blocks
    (chapter 11H's d = 256 kernel), in the blocks before the last."""
    n = 600
    causal = (n - 1, 0)
    exact = fa4x.window_sees(n, causal)
    assert torch.equal(fa4x.window_sees(n, causal, fa4x.DIAGONAL_SLIP, block=128), exact)
    slipped = fa4x.window_sees(n, causal, fa4x.DIAGONAL_SLIP, block=80)
    leaked = slipped & ~exact
    assert not (exact & ~slipped).any()            # nothing the row should see is lost
    # row 128 walks blocks 0 to 3: blocks 1 and 2 (keys 80 to 239) go unmasked
    assert leaked[128, 129:240].all() and not leaked[128, 240:].any()
