"""Low-precision formats on the CPU: the element and scale formats of block-scaled GEMMs.

Element formats (sign, exponent, mantissa bits; OCP 8-bit floating point and OCP Microscaling
specifications): E4M3 (no infinities, one NaN code; largest 448), E5M2 (IEEE-like, largest
finite 57344), E2M1 (no infinities or NaN; values 0, 0.5, 1, 1.5, 2, 3, 4, 6 and their
negatives). Scale formats: UE8M0 (an unsigned power of two, 2^(e - 127), code 255 = NaN) and
UE4M3 (E4M3 without its sign, for NVFP4's block scales).

Block scaling: one scale per block of consecutive elements along K.
- **MX** (MXFP8 with E4M3 or E5M2, MXFP4 with E2M1): 32 elements share a UE8M0 scale
  2^s, s = floor(log2(amax of the block)) - emax, where emax is the exponent of the element
  format's largest normal (8 for E4M3, 15 for E5M2, 2 for E2M1), so the block's largest
  element lands in the format's top binade; elements are V / 2^s rounded to nearest even and
  saturated to the format's largest value.
- **NVFP4**: 16 E2M1 elements share a UE4M3 scale, and the tensor has one fp32 scale g that
  puts every block scale in E4M3's range: g = amax(tensor) / (6 * 448), block scale
  s = amax(block) / (6 g) rounded to E4M3, element V / (s g) rounded to E2M1. A value is
  decoded as q * s * g.

Rounding is to nearest, ties to even, everywhere, and conversions saturate (never NaN or inf).
E2M1 values are packed two to a byte, the element of lower index in the low four bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

MX_BLOCK = 32      # elements per UE8M0 scale in the OCP MX formats
NVFP4_BLOCK = 16   # elements per UE4M3 scale in NVFP4


@dataclass(frozen=True)
class Format:
    """A small floating-point format: `exp_bits` exponent bits with `bias`, `man_bits` mantissa
    bits, subnormals, and `max_value` its largest finite magnitude."""

    name: str
    exp_bits: int
    man_bits: int
    bias: int
    max_value: float
    signed: bool = True

    @property
    def min_normal(self) -> float:
        return 2.0 ** (1 - self.bias)

    @property
    def min_subnormal(self) -> float:
        return 2.0 ** (1 - self.bias - self.man_bits)

    @property
    def emax(self) -> int:
        """Exponent of the largest normal value: floor(log2(max_value))."""
        return math.floor(math.log2(self.max_value))

    @property
    def bits(self) -> int:
        return int(self.signed) + self.exp_bits + self.man_bits

    def values(self) -> list[float]:
        """Every non-negative finite value of the format, ascending."""
        out = [m * self.min_subnormal for m in range(2 ** self.man_bits)]   # zero and subnormals
        e = 1 - self.bias
        while True:
            for m in range(2 ** self.man_bits):
                v = (1 + m / 2 ** self.man_bits) * 2.0 ** e
                if v > self.max_value:
                    return out
                out.append(v)
            e += 1


E4M3 = Format("E4M3", 4, 3, 7, 448.0)
E5M2 = Format("E5M2", 5, 2, 15, 57344.0)
E2M1 = Format("E2M1", 2, 1, 1, 6.0)
UE4M3 = Format("UE4M3", 4, 3, 7, 448.0, signed=False)
UE8M0_BIAS = 127   # a UE8M0 code e means 2^(e - 127); 255 is NaN


def round_to(x: Any, fmt: Format) -> Any:
    """`x` (a float tensor) rounded to the nearest value of `fmt`, ties to even, saturated to
    ±max_value; float32 out. For an unsigned format, negative inputs raise."""
    import torch

    x = x.float()
    if not fmt.signed and bool((x < 0).any()):
        raise ValueError(f"{fmt.name} is unsigned: got negative values")
    a = x.abs().clamp(max=fmt.max_value)
    # the spacing of the grid at |x|: 2^(e - man_bits) in binade e, the subnormal step below
    e = torch.floor(torch.log2(a.clamp(min=fmt.min_normal)))
    step = torch.exp2(e - fmt.man_bits)
    q = torch.round(a / step) * step     # torch.round rounds half to even, on the grid's integers
    q = q.clamp(max=fmt.max_value)
    return torch.where(x < 0, -q, q)


SCALE_RULES = ("floor", "ceil")


def mx_scale_exponents(x: Any, fmt: Format, block: int = MX_BLOCK, rule: str = "floor") -> Any:
    """The shared exponent s of each block of `block` elements along the last dimension,
    clamped to UE8M0's range [-127, 127] (an all-zero block gets -127).

    rule "floor" is the OCP conversion: s = floor(log2(amax)) - emax, which puts amax in the
    format's top binade [2^emax, 2^(emax+1)) and saturates it where that binade stops short of
    2^(emax+1) (E4M3: 448 < 512). rule "ceil": s = ceil(log2(amax / max_value)), the smallest
    power of two that leaves amax representable; no element saturates."""
    import torch

    if rule not in SCALE_RULES:
        raise ValueError(f"unknown scale rule {rule!r}; known: {', '.join(SCALE_RULES)}")
    blocks = _blocks(x, block)
    amax = blocks.abs().amax(dim=-1).double().clamp(min=2.0 ** -127)
    if rule == "floor":
        s = torch.floor(torch.log2(amax)) - fmt.emax
    else:
        s = torch.ceil(torch.log2(amax / fmt.max_value))
    return s.clamp(-UE8M0_BIAS, UE8M0_BIAS).to(torch.int32)


def mx_quantize(x: Any, fmt: Format = E4M3, block: int = MX_BLOCK, rule: str = "floor") -> tuple[Any, Any]:
    """(elements, scale exponents): elements in `fmt` (float32 tensor of representable values,
    the shape of x), one exponent per block of the last dimension (int32, shape [..., K / block]).
    `rule` chooses the exponent (see `mx_scale_exponents`)."""
    s = mx_scale_exponents(x, fmt, block, rule)
    blocks = _blocks(x.float(), block)
    q = round_to(blocks / _exp2(s)[..., None], fmt)
    return q.reshape(x.shape), s


def mx_dequantize(q: Any, s: Any, block: int = MX_BLOCK) -> Any:
    """Elements times their block's power of two, float32."""
    return (_blocks(q.float(), block) * _exp2(s)[..., None]).reshape(q.shape)


def ue8m0_codes(s: Any) -> Any:
    """UE8M0 bytes of scale exponents (uint8): s + 127."""
    import torch

    if bool(((s < -UE8M0_BIAS) | (s > UE8M0_BIAS)).any()):
        raise ValueError("a UE8M0 scale exponent lies in [-127, 127]")
    return (s + UE8M0_BIAS).to(torch.uint8)


def nvfp4_quantize(x: Any, block: int = NVFP4_BLOCK) -> tuple[Any, Any, float]:
    """(E2M1 elements, UE4M3 block scales, fp32 tensor scale g), each float32; decode with
    `nvfp4_dequantize`. An all-zero tensor gets g = 1."""
    import torch

    x = x.float()
    amax = float(x.abs().max())
    g = amax / (E2M1.max_value * UE4M3.max_value) if amax > 0 else 1.0
    blocks = _blocks(x, block)
    s = round_to(blocks.abs().amax(dim=-1) / (E2M1.max_value * g), UE4M3)
    denom = torch.where(s > 0, s, torch.ones_like(s)) * g
    q = round_to(blocks / denom[..., None], E2M1)
    return q.reshape(x.shape), s, g


def nvfp4_dequantize(q: Any, s: Any, g: float, block: int = NVFP4_BLOCK) -> Any:
    return (_blocks(q.float(), block) * (s * g)[..., None]).reshape(q.shape)


def e2m1_codes(q: Any) -> Any:
    """The 4-bit codes (uint8, 0..15) of E2M1 values: sign in bit 3, then exponent and mantissa."""
    import torch

    hit = q.abs().float()[..., None] == torch.tensor(E2M1.values())
    if not bool(hit.any(dim=-1).all()):
        raise ValueError("not every value is an E2M1 value")
    code = torch.argmax(hit.to(torch.uint8), dim=-1).to(torch.uint8)
    return code | (torch.signbit(q.float()).to(torch.uint8) << 3)


def pack_e2m1(q: Any) -> Any:
    """E2M1 values, last dimension even, as bytes: element 2i in the low nibble, 2i + 1 high."""
    c = e2m1_codes(q)
    if c.shape[-1] % 2:
        raise ValueError(f"packing needs an even last dimension, got {c.shape[-1]}")
    return c[..., 0::2] | (c[..., 1::2] << 4)


def unpack_e2m1(b: Any) -> Any:
    """The inverse of `pack_e2m1`: float32 E2M1 values, last dimension doubled."""
    import torch

    grid = torch.tensor(E2M1.values() + [-v for v in E2M1.values()])   # codes 0-7, then 8-15
    lo, hi = (b & 0xF).long(), (b >> 4).long()
    return torch.stack((grid[lo], grid[hi]), dim=-1).reshape(*b.shape[:-1], 2 * b.shape[-1])


SF_ROWS, SF_COLS = 128, 4   # one block of the tiled scale layout: 128 rows x 4 scales, 512 bytes


def blocked_scales(codes: Any, pad: int) -> Any:
    """Scale bytes (uint8, rows x scales per row) in the tiled layout that `tcgen05.mma` reads
    (and cuBLAS's block-scaled GEMMs take): the matrix cut into blocks of 128 rows x 4 scales,
    blocks row-block-major, each block 512 contiguous bytes in which the scale of row r, column
    k sits at byte 16 (r mod 32) + 4 (r div 32) + k. Rows and columns are padded to whole
    blocks with the code `pad`. Shape (row blocks, column blocks, 512)."""
    import torch

    r, c = codes.shape
    rb, cb = -(-r // SF_ROWS), -(-c // SF_COLS)
    full = torch.full((rb * SF_ROWS, cb * SF_COLS), pad, dtype=torch.uint8)
    full[:r, :c] = codes
    # (rb, 4, 32, cb, 4) -> (rb, cb, 32, 4, 4): lane r mod 32 first, then r div 32, then k
    t = full.view(rb, SF_COLS, 32, cb, SF_COLS).permute(0, 3, 2, 1, 4)
    return t.reshape(rb, cb, SF_ROWS * SF_COLS).contiguous()


def unblocked_scales(blocked: Any, rows: int, cols: int) -> Any:
    """The inverse of `blocked_scales`, padding dropped."""
    rb, cb, _ = blocked.shape
    t = blocked.view(rb, cb, 32, SF_COLS, SF_COLS).permute(0, 3, 2, 1, 4)
    return t.reshape(rb * SF_ROWS, cb * SF_COLS)[:rows, :cols].contiguous()


def relative_rms_error(x: Any, approx: Any) -> float:
    """sqrt(mean((approx - x)^2) / mean(x^2))."""
    x, approx = x.double(), approx.double()
    return float(((approx - x).pow(2).mean() / x.pow(2).mean()).sqrt())


def rowwise_relative_rms_error(x: Any, approx: Any) -> float:
    """The relative RMS error of each row (last dimension), averaged over the rows: a row of
    small values that rounds to zero counts as much as a row of large ones."""
    x, approx = x.double(), approx.double()
    return float(((approx - x).pow(2).mean(dim=-1) / x.pow(2).mean(dim=-1)).sqrt().mean())


def _blocks(x: Any, block: int) -> Any:
    if x.shape[-1] % block:
        raise ValueError(f"the last dimension ({x.shape[-1]}) is not a multiple of the block ({block})")
    return x.reshape(*x.shape[:-1], x.shape[-1] // block, block)


def _exp2(s: Any) -> Any:
    import torch

    return torch.exp2(s.float())
