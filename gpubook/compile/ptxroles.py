"""Which threads of a block take which warp-role branches, and the register values that decide it.

`Values` computes a register's integer value for one thread where the PTX fixes it (registers
written once from `%tid`, immediates and the shared-memory array: a warp's role, an unrolled
epilogue's staging addresses); `roles` evaluates every branch it can decide for every thread
of the block and groups the threads that take them all the same way. The lint
(`lint`, `lintgroups`) scans the control-flow graph of `ptxflow` once per role.
"""

from __future__ import annotations

import re
from typing import Iterable

from .ptxflow import _DEST, _SETP, Instruction

__all__ = ["Values", "roles"]

_SPECIAL = {"%tid.x": 0, "%tid.y": 1, "%tid.z": 2}
_INT = re.compile(r"-?\d+")
_BRANCH_GUARD = re.compile(r"^@(!?)(%[\w$]+)$")
_ARITH = {
    "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul.lo": lambda a, b: a * b,
    "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
    "shl": lambda a, b: a << b, "shr": lambda a, b: a >> b, "min": min, "max": max,
    "div": lambda a, b: a // b if b else None, "rem": lambda a, b: a % b if b else None,
}
_CMP = {"eq": lambda a, b: a == b, "ne": lambda a, b: a != b, "lt": lambda a, b: a < b,
        "le": lambda a, b: a <= b, "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
        "lo": lambda a, b: a < b, "ls": lambda a, b: a <= b, "hi": lambda a, b: a > b,
        "hs": lambda a, b: a >= b}


class Values:
    """Integer values of registers for one thread, where the PTX fixes them: registers written
    once and unguarded, from %tid, %ntid, immediates and the one shared-memory
    array (address 0), through integer arithmetic and `shfl.sync.idx` (lane 0's value). The
    block's size is the entry's `.maxntid` (None without one)."""

    def __init__(self, ptx: str, ins: list[Instruction]):
        m = re.search(r"\.maxntid\s+(\d+)(?:\s*,\s*(\d+))?(?:\s*,\s*(\d+))?", ptx)
        self.ntid = [int(x) if x else 1 for x in m.groups()] if m else None
        shared = re.findall(r"\.shared\s+(?:\.align\s+\d+\s+)?\.\w+\s+([\w$]+)", ptx)
        self.symbol = shared[0] if len(shared) == 1 else None
        self.ins = ins
        self.defs: dict[str, list[int]] = {}
        for k, i in enumerate(ins):
            d = _DEST.match(i.text)
            if d:
                self.defs.setdefault(d.group(1), []).append(k)
        self.loops = [(t, k) for k, i in enumerate(ins) for t in i.succ if t <= k]
        self._parsed: dict[str, tuple[str, str, list[str]] | None] = {}
        self._shared: dict[str, int | None] = {}   # values of registers no thread id reaches
        self._free: dict[str, bool] = {}

    def _definition(self, x: str) -> tuple[str, str, list[str]] | None:
        """(opcode, opcode without its type, operands) of x's one unguarded write, else None."""
        if x not in self._parsed:
            where = self.defs.get(x, [])
            found = None
            if len(where) == 1 and not self.ins[where[0]].guard:
                op = self.ins[where[0]].text
                parts = [p.strip() for p in op.split(None, 1)[1].split(",")] if " " in op else []
                found = (op.split()[0], re.sub(r"\.(?:[usb]\d+|wide)$", "", op.split()[0]), parts)
            self._parsed[x] = found
        return self._parsed[x]

    def _thread_free(self, x: str) -> bool:
        """Whether x's value is the same for every thread: no %tid and no shuffle on its way (a
        register on a cycle of definitions counts as not)."""
        x = x.strip()
        if "+" in x:
            return all(self._thread_free(a) for a in x.split("+", 1))
        if _INT.fullmatch(x) or x == self.symbol or x.startswith("%ntid."):
            return True
        if x in _SPECIAL:
            return False
        if x not in self._free:
            self._free[x] = False   # while its operands are looked at
            d = self._definition(x)
            self._free[x] = d is None or (not d[0].startswith("shfl.") and
                                          all(self._thread_free(a.split("|")[0]) for a in d[2][1:]))
        return self._free[x]

    def threads(self) -> Iterable[tuple[int, int, int]]:
        n = self.ntid or [0, 0, 0]
        return ((x, y, z) for z in range(n[2]) for y in range(n[1]) for x in range(n[0]))

    def value(self, x: str, tid: tuple[int, int, int], memo: dict) -> int | None:
        x = x.strip()
        if "+" in x:  # an address with an offset: %r6+34816
            a, b = x.split("+", 1)
            va, vb = self.value(a, tid, memo), self.value(b, tid, memo)
            return None if va is None or vb is None else va + vb
        if _INT.fullmatch(x):
            return int(x)
        if x == self.symbol:
            return 0
        if x in _SPECIAL:
            return tid[_SPECIAL[x]]
        if x.startswith("%ntid.") and self.ntid:
            return self.ntid["xyz".index(x[-1])]
        if x in memo:
            return memo[x]
        if x in self._shared:
            return self._shared[x]
        memo[x] = None
        d = self._definition(x)
        if d is None:  # one static write: fixed if its operands are
            return None
        name, base, parts = d
        args = [self.value(a.split("|")[0], tid, memo) for a in parts[1:]]
        v = None
        if base == "mov" or name.startswith("cvt."):
            v = args[0] if args else None
        elif base in _ARITH and len(args) == 2 and None not in args:
            v = _ARITH[base](*args)
        elif base == "mad.lo" and len(args) == 3 and None not in args:
            v = args[0] * args[1] + args[2]
        elif name.startswith("shfl.sync.idx") and len(parts) >= 3 and self.ntid:
            lane = self.value(parts[2], tid, memo)
            if lane is not None and self.ntid[1] == self.ntid[2] == 1:
                v = self.value(parts[1], ((tid[0] & ~31) | lane, 0, 0), {})
        memo[x] = v
        if self._thread_free(x):
            self._shared[x] = v
        return v


def roles(ptx: str, ins: list[Instruction], most: int = 16, first: list | None = None,
          vals: Values | None = None) -> list[dict[int, bool]]:
    """The block's threads grouped by how they take the branches that depend on %tid alone.

    Every conditional branch whose predicate `Values` can compute is evaluated for every thread
    of the block; threads that take all of them the same way form one role. Each role is a map
    from branch to direction; [{}] (one role, no branch known) when the block size is not
    declared or the roles number more than `most`. `first`, when given, receives the first
    thread (x, y, z) of each role, in the same order.
    """
    vals = vals or Values(ptx, ins)
    if vals.ntid is None:
        if first is not None:
            first[:] = [(0, 0, 0)]
        return [{}]
    branches = [k for k, i in enumerate(ins) if i.test is not None and "elect" not in i.test[0][2:]]
    tests = []   # each branch's (k, negated, comparison, operands): the same for every thread
    for k in branches:
        g = _BRANCH_GUARD.match(ins[k].guard)
        d = _SETP.match(ins[vals.defs[g.group(2)][0]].text)
        if d.group(1) in _CMP:
            tests.append((k, bool(g.group(1)), _CMP[d.group(1)], d.group(4), d.group(5)))
    groups: dict[tuple, dict[int, bool]] = {}
    for tid in vals.threads():
        memo: dict = {}
        fixed = {}
        for k, negated, cmp, x, y in tests:
            a, b = vals.value(x, tid, memo), vals.value(y, tid, memo)
            if a is None or b is None:
                continue
            fixed[k] = cmp(a, b) != negated
        if tuple(sorted(fixed.items())) not in groups and first is not None:
            first.append(tid)
        groups.setdefault(tuple(sorted(fixed.items())), fixed)
        if len(groups) > most:
            if first is not None:
                first[:] = [(0, 0, 0)]
            return [{}]
    if first is not None and not groups:
        first[:] = [(0, 0, 0)]
    return list(groups.values()) or [{}]
