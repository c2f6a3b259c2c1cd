"""Chapter 11B's ragged-length kernel (`make_fa4_tails`): what it refuses, its CPU model's log-sum-exp,
and the check of its ragged block in simulation.

The defect the chapter warns about is planted in the chapter's own source (the ragged block's mask
left out, so the TMA's zero keys join the softmax), built at the chapter's non-causal check shape
(129 keys: a last block holding one key) and simulated with the chapter's check: the numbers
must mismatch. The kernel as written passes the same check in the chapter's own simulation
record."""

from __future__ import annotations

import ast
import math
import os
import re
import sys
from pathlib import Path

import pytest
import torch

import gpubook as gb
from gpubook import export, fa4, simulate
from gpubook import gemm as gg
from gpubook.models import fa4_features as fa4x

sys.path.insert(0, str(Path(__file__).resolve().parent))

CHAPTER = "11B-fa4-blackwell"
needs_sim = pytest.mark.skipif(simulate.simulator_version() is None,
                               reason="no simulator interpreter: make .venv-sim from requirements-sim.txt")
MASK = "s[c] = T.Select(c < TAIL, s[c], T.float32(-math.inf))"
SHAPE = (1, 2, 2, 129, "float16", False)          # the chapter's non-causal ragged check case
SEED = 1320


def _t(b, h, s, d=128):
    return torch.zeros(b, h, s, d, dtype=torch.float16)


def test_a_ragged_length_is_accepted_only_by_the_ragged_kernel():
    for seqlen in (2, 100, 129, 300):
        fa4.validate(1, 8, 2, seqlen, 128, "float16", True, ragged=True)
        with pytest.raises(fa4.FA4CallError, match="multiple of 128"):
            fa4.validate(1, 8, 2, seqlen, 128, "float16", True)
    with pytest.raises(fa4.FA4CallError, match="at least 2"):
        fa4.validate(1, 8, 2, 1, 128, "float16", False, ragged=True)
    fa4.validate(1, 8, 2, 300, 128, "float16", False, q_tiles=2, ragged=True)   # the second kernel's ragged form
    with pytest.raises(fa4.FA4CallError, match="multiple of 256"):
        fa4.validate(1, 8, 2, 300, 128, "float16", False, q_tiles=2)
    with pytest.raises(ValueError):
        fa4.validate(1, 8, 2, 300, 128, "float16", False, q_tiles=3, ragged=True)
    q, kv = _t(1, 8, 300), _t(1, 2, 300)
    assert fa4.problem(q, kv, kv, causal=False, ragged=True) == (1, 8, 2, 300, "float16")


@pytest.mark.parametrize("seqlen,causal", [(2, False), (100, True), (129, False), (300, True)])
def test_the_cpu_model_gives_the_reference_lse(seqlen, causal):
    g = torch.Generator().manual_seed(seqlen)
    q, k, v = (torch.randn(1, h, seqlen, 128, generator=g).half() for h in (4, 2, 2))
    out, stats = fa4.simulate(q, k, v, causal)
    assert (out.float() - fa4.reference(q, k, v, causal)).abs().max() <= fa4.tolerance(v, "float16")
    err = (stats["lse"] - fa4x.reference_lse(q, k, causal)).abs().max()
    assert err <= fa4x.lse_tolerance(q, k, causal) / 4, err


def test_the_lse_check_refuses_the_slips_of_its_formula():
    """The LSE in base 2, or without the max, is far outside the allowance; the model is inside."""
    g = torch.Generator().manual_seed(5)
    q, k, v = (torch.randn(1, 2, 129, 128, generator=g).half() for _ in range(3))
    _, stats = fa4.simulate(q, k, v, False)
    ref, atol = fa4x.reference_lse(q, k, False), fa4x.lse_tolerance(q, k, False)
    assert (stats["lse"] - ref).abs().max() < atol
    assert (stats["lse"] / math.log(2) - ref).abs().max() > 100 * atol
    assert (stats["lse"] - fa4x.scores(q, k, False).amax(-1).float() - ref).abs().max() > 100 * atol
    assert 5e-5 < fa4x.CUBIC_REL_ERROR < 2e-4           # chapter 11's cubic, about 2^-13.5


def chapter_list(name: str, must: str | None = None) -> list:
    """The literal list a cell of the chapter assigns to `name`; `must`: text that cell must
    hold as well (the seeds its loop gives the cases)."""
    (cell,) = gg.chapter_cells(CHAPTER, f"{name} = [")
    assert must is None or must in cell, (name, must)
    tree = ast.parse("\n".join(ln for ln in cell.splitlines() if not ln.startswith(":")))
    (node,) = [n for n in tree.body if isinstance(n, ast.Assign) and getattr(n.targets[0], "id", None) == name]
    return ast.literal_eval(node.value)


def _namespace() -> dict:
    """The names `make_fa4_tails` and `inputs` use, as the chapter defines them."""
    from test_fa4 import chapter_namespace

    ns = chapter_namespace() | {"torch": torch}
    (cell,) = gg.chapter_cells(CHAPTER, "NO_MASK, DIAG, TAIL_MASK = ")
    head = cell.split("\n\n\ndef make_fa4_tails")[0].splitlines()
    exec(compile("\n".join(ln for ln in head if not ln.startswith(":")), f"{CHAPTER}:masks", "exec"), ns)
    gg.load_factory(CHAPTER, "inputs", ns)
    return ns


def test_the_planted_case_is_a_check_case_of_the_chapter():
    (cell,) = gg.chapter_cells(CHAPTER, "CASES_TAILS = [")
    listing = cell[cell.index("CASES_TAILS = [") + len("CASES_TAILS = "):]
    cases = ast.literal_eval(re.sub(r"#[^\n]*", "", listing[:listing.index("]") + 1]))
    assert "seed=1300 + 10 * i" in cell and 1300 + 10 * cases.index(SHAPE + (False,)) == SEED


@pytest.mark.sim
@needs_sim
def test_the_check_fails_in_simulation_without_the_ragged_mask(tmp_path, monkeypatch):
    ns = _namespace()
    make = gg.load_factory(CHAPTER, "make_fa4_tails", ns, edits=[(MASK, "s[c] = s[c]")])
    batch, heads, kv_heads, seqlen, dtype, causal = SHAPE
    args = ns["inputs"](batch, heads, kv_heads, seqlen, dtype, SEED) + [torch.empty(batch, heads, seqlen)]
    atol = (fa4.tolerance(args[2], dtype), fa4x.lse_tolerance(args[0], args[1], causal))
    rec = simulated_check(make(*SHAPE), "fa4_tails_unmasked", args,
                          lambda q, kk, v, o, lse: (fa4.reference(q, kk, v, causal), fa4x.reference_lse(q, kk, causal)),
                          atol, tmp_path, monkeypatch)
    assert rec["status"] == "failed" and rec["tools"]["numbers"]["verdict"] == "mismatch", rec


def simulated_check(func, name: str, args: list, ref, atol, tmp_path, monkeypatch, outputs=(3, 4)) -> dict:
    """Build `func`, export its check of `outputs` (O and the LSE by default, at the chapter's
    tolerances) and simulate the numbers in NumSim; the simulation's record."""
    before = export.current_chapter()
    monkeypatch.setenv(export.EXPORT_ENV, str(tmp_path))
    export.set_chapter("simtest")
    try:
        k = gb.build(func, name=name)
        gb.check(k, args, ref=ref, outputs=outputs, rtol=(0,) * len(outputs) if len(outputs) > 1 else 0, atol=atol)
    finally:
        export.set_chapter(before)
    return simulate.simulate_case(tmp_path / "cases" / f"simtest--{name}--check", tools=("numbers",),
                                  timeout=900, workers=min(2, os.cpu_count() or 1))
