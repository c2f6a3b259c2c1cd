"""The software exp2 of FA4's softmax (chapters 11 and 11B): a cubic on the fraction, an exponent
add on the integer part, nine PTX instructions, modelled bit for bit in float32 NumPy.

`fit_exp2_cubic` fits the polynomial; `exp2_soft` is the kernel's arithmetic instruction for
instruction (`EXP2_OPS`, with `fma32` for the fused multiply-adds); `exp2_listing` reads the
first such sequence back out of a kernel's PTX.
"""

from __future__ import annotations

import re
import struct
from typing import Any

import numpy as np

def fit_exp2_cubic(iters: int = 60) -> np.ndarray:
    """c0 + c1 f + c2 f^2 + c3 f^3 ~ 2^f on [0, 1) with c0 = 1, near-minimax in relative error
    (chapter 11's fit: Lawson's iteratively reweighted least squares), as float32."""
    f = np.linspace(0.0, 1.0, 4001)
    target = np.exp2(f)
    A = np.stack([f, f**2, f**3], axis=1) / target[:, None]
    b = (target - 1.0) / target
    w = np.ones_like(f)
    for _ in range(iters):
        sw = np.sqrt(w)
        c = np.linalg.lstsq(A * sw[:, None], b * sw, rcond=None)[0]
        w = w * np.abs(A @ c - b)
        w /= w.sum()
    return np.array([1.0, *c], dtype=np.float32)


COEFFS = fit_exp2_cubic()
ROUND_CONST = 1.5 * 2.0**23      # add.rm of this leaves floor(x) in the low mantissa bits
# The software exp2's instructions, in the order the kernel issues them
EXP2_OPS = ("max.f32", "add.rm.f32", "sub.rn.f32", "sub.rn.f32", "fma.rn.f32", "fma.rn.f32",
            "fma.rn.f32", "shl.b32", "add.s32")


def fma32(a: Any, b: Any, c: Any) -> np.ndarray:
    """fma.rn.f32: a * b + c rounded once to float32 (nearest, ties to even), elementwise.

    The product of two float32 is exact in float64; the sum is rounded to float64 and its
    error recovered exactly (TwoSum). Rounding that float64 sum to float32 is the correctly
    rounded result except when it lies exactly halfway between two float32 values, where
    the error's sign decides."""
    a, b, c = (np.asarray(v, np.float32).astype(np.float64) for v in (a, b, c))
    prod = a * b
    s = prod + c
    bv = s - prod
    err = (prod - (s - bv)) + (c - bv)
    r = s.astype(np.float32)
    r64 = r.astype(np.float64)
    other = np.nextafter(r, np.where(s > r64, np.float32(np.inf), np.float32(-np.inf)))
    tie = (s != r64) & (2 * s == r64 + other.astype(np.float64)) & (err != 0)
    nearer = np.where(err > 0, np.maximum(r, other), np.minimum(r, other))
    return np.where(tie, nearer, r).astype(np.float32)


def exp2_soft(x: Any, coeffs: np.ndarray = COEFFS) -> np.ndarray:
    """The kernel's software exp2, instruction for instruction (`EXP2_OPS`), in float32 NumPy."""
    x = np.maximum(np.asarray(x, np.float32), np.float32(-127.0))
    n = np.floor(x) + np.float32(ROUND_CONST)          # add.rm: the sum's ulp is 1, so it is exact
    nb = n - np.float32(ROUND_CONST)
    f = x - nb
    p = fma32(f, coeffs[3], coeffs[2])
    p = fma32(p, f, coeffs[1])
    p = fma32(p, f, coeffs[0])
    bits = p.view(np.uint32) + (n.view(np.uint32) << np.uint32(23))
    return bits.view(np.float32)


def hexf(v: float) -> str:
    """A float32 as a PTX immediate, 0fXXXXXXXX."""
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", float(v)))[0]


def exp2_listing(ptx: str) -> list[str]:
    """The first software exp2 in a kernel's PTX: its nine instructions (`EXP2_OPS`), with the
    registers that hold constants shown as the immediates moved into them."""
    lines = [ln.strip() for ln in ptx.splitlines()]
    consts: dict[str, str] = {}
    for ln in lines:
        m = re.match(r"mov\.(?:f32|b32|u32|s32)\s+(%\w+),\s*(0f[0-9A-F]{8}|-?\d+);", ln)
        if m:
            consts[m.group(1)] = m.group(2)
    op = [ln.split()[0] if ln else "" for ln in lines]
    first = next((i for i, o in enumerate(op) if o == EXP2_OPS[1]), len(op))
    start = max((i for i in range(first) if op[i] == EXP2_OPS[0]), default=first)
    out: list[str] = []
    for o, ln in zip(op[start:], lines[start:]):
        if o == EXP2_OPS[len(out)]:
            out.append(re.sub(r"%\w+", lambda r: consts.get(r.group(0), r.group(0)), ln))
            if len(out) == len(EXP2_OPS):
                return out
    raise ValueError(f"no complete software exp2 in the PTX: found {len(out)} of {len(EXP2_OPS)}")
