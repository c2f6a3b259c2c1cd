"""Helpers of the Hopper GEMM chapter that are not its lesson: call validation and source diffs.

The rules a call must meet are those of the Blackwell ladder too (`gemm.validate_operands`),
here worded for `wgmma`; the diffs are the Blackwell ladder's (`gemm.show_diff`)."""

from __future__ import annotations

from typing import Any

from ..models.gemm_model import GemmCallError, validate_operands
from .ladder import show_diff, source_diff  # noqa: F401


def gemm_problem(A: Any, B: Any, blk_k: int) -> tuple[int, int, int, str]:
    """(M, N, K, dtype) of D = A @ B.T, or GemmCallError naming the constraint the call breaks.

    The kernels take A (M x K) and B (N x K), both K-major, through TMA tensor maps, and write
    D (M x N) in the input dtype (by TMA in the last step), with K walked in whole BLK_K tiles.
    """
    return validate_operands(A, B, blk_k, mma="wgmma", reads="tensor maps",
                             writes="the TMA stores of the last step")
