"""Helpers of the Hopper GEMM chapter that are not its lesson: source diffs (which the Blackwell
ladder of chapters 8 and 9 uses too) and call validation."""

from __future__ import annotations

import difflib
import inspect
import re
import textwrap
from typing import Any, Callable

SUPPORTED_DTYPES = ("bfloat16", "float16")
TMA_STRIDE_ALIGN = 16  # bytes: a tensor map's base address and row strides are multiples of 16


class GemmCallError(ValueError):
    """A call that the GEMM kernels cannot serve, refused before anything is built or launched."""


def _named_source(f: Callable[..., Any] | str) -> tuple[str, list[str]]:
    """(name, lines) of a function, or of a function's source text (its `def` names it)."""
    if isinstance(f, str):
        m = re.match(r"\s*def (\w+)", f)
        return (m.group(1) if m else "old"), textwrap.dedent(f).splitlines()
    return f.__name__, textwrap.dedent(inspect.getsource(f)).splitlines()


def source_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = 2) -> str:
    """The unified diff of two functions' source code (what changed from one step to the next);
    either may be given as source text, e.g. a function read from another chapter."""
    (na, a), (nb, b) = _named_source(old), _named_source(new)
    lines = difflib.unified_diff(a, b, fromfile=na, tofile=nb, n=context, lineterm="")
    return "\n".join(lines)


def show_diff(old: Callable[..., Any] | str, new: Callable[..., Any] | str, context: int = 2) -> Any:
    """The diff as a Markdown ``diff`` code block, for a notebook cell to display."""
    from IPython.display import Markdown

    return Markdown(f"```diff\n{source_diff(old, new, context)}\n```")


def gemm_problem(A: Any, B: Any, blk_k: int) -> tuple[int, int, int, str]:
    """(M, N, K, dtype) of D = A @ B.T, or GemmCallError naming the constraint the call breaks.

    The kernels take A (M x K) and B (N x K), both K-major, through TMA tensor maps, and write
    D (M x N) in the input dtype (by TMA in the last step), with K walked in whole BLK_K tiles.
    """
    for name, t in (("A", A), ("B", B)):
        if t.dim() != 2:
            raise GemmCallError(f"{name} must be a matrix; it has {t.dim()} dimensions")
    dtype = str(A.dtype).removeprefix("torch.")
    if dtype not in SUPPORTED_DTYPES or str(B.dtype) != str(A.dtype):
        raise GemmCallError(
            f"unsupported dtypes A {dtype}, B {str(B.dtype).removeprefix('torch.')}: the wgmma "
            f"used here multiplies {' or '.join(SUPPORTED_DTYPES)} (both operands alike)")
    (M, K), (N, KB) = A.shape, B.shape
    if K != KB:
        raise GemmCallError(f"A is {M} x {K} but B is {N} x {KB}: D = A @ B.T needs equal K")
    if K == 0 or K % blk_k:
        raise GemmCallError(
            f"K = {K} is not a positive multiple of BLK_K = {blk_k}: the K loop runs whole tiles "
            "(pad K with zeros to the next multiple)")
    esize = A.element_size()
    for name, t in (("A", A), ("B", B)):
        if t.stride(1) != 1:
            raise GemmCallError(
                f"{name} has strides {tuple(t.stride())}: a TMA box walks its innermost dimension "
                "contiguously, so K must have stride 1 (K-major); pass .contiguous()")
        if (t.stride(0) * esize) % TMA_STRIDE_ALIGN or t.stride(0) != t.shape[1]:
            raise GemmCallError(
                f"{name}'s rows are {t.stride(0) * esize} bytes apart: a TMA row stride must be a "
                f"multiple of {TMA_STRIDE_ALIGN} bytes and these kernels read dense rows "
                "(stride = K); pass .contiguous()")
    if (N * esize) % TMA_STRIDE_ALIGN:
        raise GemmCallError(
            f"N = {N}: rows of D would be {N * esize} bytes apart, and a TMA store needs a row "
            f"stride that is a multiple of {TMA_STRIDE_ALIGN} bytes (N a multiple of "
            f"{TMA_STRIDE_ALIGN // esize})")
    return M, N, K, dtype
