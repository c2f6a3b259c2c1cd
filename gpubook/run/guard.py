"""Guard zones: every tensor a check launches on lives inside a larger allocation whose margins
hold a sentinel pattern, so that a write past either end of the tensor is caught.

A caching allocator rounds sizes up, so a kernel that writes `out[N]` usually lands in memory
nobody else uses: the comparison of `out` passes, and compute-sanitizer's memcheck sees an
in-bounds address. With a guard zone the stray write changes sentinel bytes, and the check
names the argument, the side and the offset. Works with CPU tensors as well as GPU ones.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

# Bytes of sentinel on each side: a multiple of every element size and of the 512-byte
# alignment the CUDA caching allocator gives, so the tensor keeps its usual alignment.
GUARD_BYTES = 4096
# The sentinel repeats 0x7FB5A5A5 (little-endian bytes A5 A5 B5 7F): as float32 a signalling
# NaN, which no arithmetic produces; as fp16/bf16 halves a signalling NaN and a tiny negative
# number; as integers an unlikely value. Zero, one and the quiet NaN that poisons outputs all
# differ from it.
SENTINEL = bytes((0xA5, 0xA5, 0xB5, 0x7F))


def _pattern(nbytes: int, start: int, device: Any) -> Any:
    """`nbytes` bytes of the sentinel as they lie from byte `start` of an allocation."""
    import torch

    reps = (start % len(SENTINEL) + nbytes) // len(SENTINEL) + 1
    word = torch.tensor(list(SENTINEL), dtype=torch.uint8)
    full = word.repeat(reps)[start % len(SENTINEL):start % len(SENTINEL) + nbytes]
    return full.to(device)


@dataclass
class Guarded:
    """A tensor (`view`) placed `GUARD_BYTES` into a byte allocation (`base`) with sentinels around."""

    name: str
    base: Any  # uint8 tensor: margin, the tensor's bytes, margin
    view: Any  # the tensor handed to the kernel
    guard: int  # bytes of margin on each side

    @property
    def nbytes(self) -> int:
        return self.view.numel() * self.view.element_size()

    def before(self) -> Any:
        return self.base[:self.guard]

    def after(self) -> Any:
        return self.base[self.guard + self.nbytes:]


def allocate(name: str, shape: tuple[int, ...], dtype: Any, device: Any,
             guard: int = GUARD_BYTES) -> Guarded:
    """An uninitialised tensor of `shape` and `dtype` with sentinel margins of `guard` bytes."""
    import torch

    if isinstance(dtype, str):
        dtype = getattr(torch, dtype)
    itemsize = torch.empty((), dtype=dtype).element_size()
    if guard % itemsize:
        raise ValueError(f"guard of {guard} bytes is not a whole number of {dtype} elements")
    numel = 1
    for s in shape:
        numel *= int(s)
    nbytes = numel * itemsize
    base = torch.empty(guard + nbytes + guard, dtype=torch.uint8, device=device)
    base[:guard] = _pattern(guard, 0, device)
    base[guard + nbytes:] = _pattern(guard, guard + nbytes, device)
    view = base[guard:guard + nbytes].view(dtype).view(tuple(int(s) for s in shape))
    return Guarded(name, base, view, guard)


def guarded_copy(name: str, t: Any, device: Any, guard: int = GUARD_BYTES) -> Guarded:
    """A copy of tensor `t` on `device`, inside sentinel margins."""
    g = allocate(name, tuple(t.shape), t.dtype, device, guard)
    g.view.copy_(t)
    return g


def violations(g: Guarded) -> list[str]:
    """What changed in the margins of `g`: one line per side, or [] when both are intact."""
    out = []
    itemsize = g.view.element_size()
    numel = g.view.numel()
    for side, got, start in (("before", g.before(), 0), ("after", g.after(), g.guard + g.nbytes)):
        changed = got != _pattern(got.numel(), start, got.device)
        if not bool(changed.any()):
            continue
        elems = changed.reshape(-1, itemsize).any(dim=1).nonzero().flatten().tolist()
        k = len(elems)
        noun = "element" if k == 1 else "elements"
        if side == "after":
            first = elems[0]  # nearest the tensor's end
            where = f"first at flat index {numel + first}, {first * itemsize} bytes past its end"
        else:
            first = elems[-1]  # nearest the tensor's start
            back = g.guard // itemsize - first
            where = f"first at flat index {-back}, {back * itemsize} bytes before its start"
        out.append(f"wrote {k} {noun} {side} {g.name} ({where})")
    return out


def check_all(guards: list[Guarded]) -> list[str]:
    """Every violation of every guarded tensor (empty when all margins are intact)."""
    return [v for g in guards for v in violations(g)]
