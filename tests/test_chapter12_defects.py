"""Chapter 12's check fails on the defects the chapter warns about.

Each case plants one defect in the chapter's own `make_mx_gemm`, `make_nvfp4_gemm`,
`make_mx_gemm_2cta` or `make_nvfp4_gemm_2cta` (a text edit of its source, `gg.load_factory(..., edits=...)`), builds it at
the chapter's check shape and simulates the chapter's check: the scales of the wrong stage, K
tile or row block must make the numbers mismatch, a copy from a stage the TMA has not filled
must be a race, and a pair's barrier announcing fewer bytes than land on it must fail the
synchronisation check. The unmodified kernel passes the same simulation.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

import gpubook as gb
from gpubook import export, simulate
from gpubook import gemm as gg
from gpubook.book import blockscaled as bs

CHAPTER = "12-block-scaled"
needs_sim = pytest.mark.skipif(simulate.simulator_version() is None,
                               reason="no simulator interpreter: make .venv-sim from requirements-sim.txt")

DEFECTS = {   # defect: (factory, edits, what must object)
    "the MMA reads the next stage's scale columns": ("make_mx_gemm",
        [("sfa_t[use.stage, :, :], sfb_t[use.stage, :, :],", "sfa_t[use.stage, :, :], sfb_t[(use.stage + 1) % STAGES, :, :],")],
        "mismatch"),
    "every K tile loads the scales of the first": ("make_mx_gemm",
        [("SFA.ptr_to([sched.m_idx, kt, 0])", "SFA.ptr_to([sched.m_idx, 0, 0])")], "mismatch"),
    "B's scales taken by A's row block": ("make_mx_gemm",
        [("SFB.ptr_to([sched.n_idx, kt, 0])", "SFB.ptr_to([sched.m_idx % NB, kt, 0])")], "mismatch"),
    "A's scales copied from a stage not yet full": ("make_mx_gemm",
        [("Tx.copy_async(sfa_t[use.stage, :, :], sfa_s[use.stage, :, :])",
          "Tx.copy_async(sfa_t[use.stage, :, :], sfa_s[(use.stage + 1) % STAGES, :, :])")], "race"),
    "NVFP4 scales fetched one 512-byte block per K tile, as for MX": ("make_nvfp4_gemm",
        [("SFA.ptr_to([sched.m_idx, kt * NV_SF_K // 4, 0])", "SFA.ptr_to([sched.m_idx, kt, 0])")], "mismatch"),
    "NVFP4's tensor scale left out of the epilogue": ("make_nvfp4_gemm",
        [("row[j] = row[j] * alpha[0]", "row[j] = row[j] * 1.0")], "mismatch"),
    "both CTAs of a pair load the first half of B's scales": ("make_mx_gemm_2cta",
        [("SFB_boxes[sched.n_idx * 2 + rank, kt, :, :]", "SFB_boxes[sched.n_idx * 2, kt, :, :]")], "mismatch"),
    "the leader's expect_tx leaves out the peer's half of B's scales": ("make_mx_gemm_2cta",
        [("ring.full.arrive(load.stage, 2 * PAIR_STAGE_BYTES)", "ring.full.arrive(load.stage, 2 * PAIR_STAGE_BYTES - 2 * SF_BYTES)")],
        "sync"),
    "both CTAs of an NVFP4 pair load the first half of B's scales": ("make_nvfp4_gemm_2cta",
        [("SFB_boxes[sched.n_idx * 2 + rank, kt, :, :]", "SFB_boxes[sched.n_idx * 2, kt, :, :]")], "mismatch"),
}
SIZES = {"make_mx_gemm": (328, 200, 5 * 128), "make_nvfp4_gemm": (328, 200, 4 * 256),   # the chapter's
         "make_mx_gemm_2cta": (328, 456, 5 * 128), "make_nvfp4_gemm_2cta": (328, 456, 5 * 256)}


def recipe(factory: str):
    """The block-scaled format a factory's kernels compute in, from its name."""
    return bs.NVFP4 if "nvfp4" in factory else bs.MXFP8


def _namespace() -> dict:
    """The names `make_mx_gemm` uses: the chapter's imports and constants, from its own cells."""
    ns: dict = {"__name__": "chapter12"}
    for marker in ("gb.set_chapter(", "BLK_M, BLK_N, BLK_K = ", "STAGE_BYTES = (BLK_M + BLK_N) * BLK_K + 2",
                   "NV_BLK_K = 256", "MMA_M, MMA_N = 2 * BLK_M, 2 * BLK_N",
                   "NV_PAIR_SF_BYTES = 2 * NV_SF_BYTES"):
        (cell,) = gg.chapter_cells(CHAPTER, marker)
        exec(compile(cell, f"{CHAPTER}:{marker}", "exec"), ns)
    return ns


SIZE_CELLS = ("SIZE = (328, 200, 5 * BLK_K)", "NV_SIZE = (328, 200, 4 * NV_BLK_K)",   # asserted below
              "SIZE2 = (328, 456, 5 * BLK_K)", "NV_SIZE2 = (328, 456, 5 * NV_BLK_K)")


def _simulate(tmp_path: Path, monkeypatch, name: str, factory: str, edits, tools=("numbers", "racecheck")) -> dict:
    before = export.current_chapter()
    ns = _namespace()
    assert all(gg.chapter_cells(CHAPTER, c) for c in SIZE_CELLS), "the chapter's check shapes changed"
    if factory == "make_nvfp4_gemm":
        gg.load_factory(CHAPTER, "make_mx_gemm", ns)
    make = gg.load_factory(CHAPTER, factory, ns, edits=edits)
    size = SIZES[factory]
    monkeypatch.setenv(export.EXPORT_ENV, str(tmp_path))
    export.set_chapter("simtest")
    try:
        k = gb.build(make(*size, ctas=2, group=2), name=name)
        bs.check(k, *size, recipe=recipe(factory))
    finally:
        export.set_chapter(before)
    return simulate.simulate_case(tmp_path / "cases" / f"simtest--{name}--check", tools=tools, timeout=900,
                                  workers=min(2, os.cpu_count() or 1))


@pytest.mark.sim
@needs_sim
def test_the_chapters_kernel_passes_its_check_in_simulation(tmp_path, monkeypatch):
    rec = _simulate(tmp_path, monkeypatch, "mx_gemm_ok", "make_mx_gemm", ())
    assert rec["status"] == "simulated", rec
    assert rec["tools"]["numbers"]["verdict"] == "match" and rec["tools"]["racecheck"]["verdict"] == "clean"


@pytest.mark.sim
@needs_sim
@pytest.mark.parametrize("defect", list(DEFECTS))
def test_the_chapters_check_fails_on_a_planted_defect(tmp_path, monkeypatch, defect):
    factory, edits, how = DEFECTS[defect]
    tools = {"mismatch": ("numbers",), "race": ("racecheck",), "sync": ("synccheck",)}[how]   # the tool that must object
    rec = _simulate(tmp_path, monkeypatch, f"bs_gemm_defect{list(DEFECTS).index(defect)}", factory, edits, tools)
    assert rec["status"] == "failed", rec
    if how == "mismatch":
        assert rec["tools"]["numbers"]["verdict"] == "mismatch", rec
    else:
        assert rec["tools"][tools[0]]["verdict"] not in ("clean", "unable"), rec
