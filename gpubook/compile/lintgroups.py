"""The lint's rules on asynchronous groups: wgmma groups and bulk (TMA) store groups.

A `wgmma.commit_group` or `cp.async.bulk.commit_group` closes a group of the thread's earlier
asynchronous operations, and `wait_group N` waits until at most the N newest groups are still
pending: every older one is retired. The scan (`ptxflow.scan`, one per warp role) carries, on
each path, how many groups were committed after each operation's own, so it knows which
operations a `wait_group N` has retired, in the order the hardware retires them.

wgmma-acc. The accumulator registers of a `wgmma.mma_async`, and the registers of the A
fragment of its register form, belong to the tensor cores until a `wgmma.wait_group` retires
its group: any other instruction that names one of them before that is a finding. Another
`wgmma.mma_async` with the same accumulator may chain on it (the PTX ISA allows it).

wgmma-release. An `mbarrier.arrive` (not `expect_tx`) hands a ring slot back to its producer,
who will overwrite it. The lint does not follow addresses, so it cannot tell which slot an
arrive names; it counts instead. Each group committed after an mbarrier wait (an acquisition
of at least one slot) is taken to read one slot; when a `wait_group` retires such a group, it
grants one release. An arrive made while some wgmma group may still be in flight must spend a
release granted earlier and not yet spent; with none left it is a finding. So the lint finds
an arrive that hands back more slots than the retired groups have read (a V slot given back
after the `wait_group 1` that retired only S = Q K^T, while P V still reads it), but not an
arrive that names the wrong slot of two. A group that read two slots grants one release: a
second arrive while another group is in flight is a finding (hand it back after a later
`wait_group`). An arrive made when every group is retired spends a grant if one is left and is
never a finding.

Two exceptions keep the count to what it can judge. While every pending group was committed
after the last `wait_group` that left none pending, and the last `wait_group` retired nothing,
the path is the pipeline's fill (the first iteration of a loop that releases slot it - 1 only
when it >= 1, a branch on data that the scan follows both ways): an arrive there is not
judged, and neither, by the same test, is one after a `wait_group N` too large to retire
anything in a loop that drains every group at its end (the accumulator it leaves unretired is
wgmma-acc's to find). A barrier whose address `Values` fixes (a buffer of one slot, such as Q)
is outside the count: its wait acquires nothing counted, and its arrive spends nothing and is
not judged.

bulk-store-reuse. A generic shared-memory store that filled the source of a bulk store (the
stores since the thread's last mbarrier wait before it) must not run again, nor any store to
the same address, until a `cp.async.bulk.wait_group[.read] N` has retired the bulk store's
group: with k groups committed after it, that needs N <= k. With B staging buffers written in
turn and one group per buffer, the buffer about to be rewritten was stored B - 1 groups before
the newest, so `wait_group.read N` before the rewrite must have N <= B - 1. Addresses are
compared only where `ptxroles.Values` fixes them for the first thread of the role (a
register written once from %tid, immediates and the shared array: an unrolled epilogue's
buffers); elsewhere a store is the same buffer as itself only, so a rolled loop that rotates
buffers through one store instruction needs `wait_group.read 0`, and a buffer rewritten by
another instruction at an address the lint cannot compute is not seen. Rules are per thread:
another thread's store into the buffer is ordered by the barrier after the waiting thread's
`wait_group`, which the lint does not judge. A TMA load or `cp.async` into the source is not seen.
"""

from __future__ import annotations

import re

from .ptxflow import Instruction
from .ptxroles import Values

__all__ = ["Groups"]

_MMA = "wgmma.mma_async"
_WG_WAIT = re.compile(r"^wgmma\.wait_group[\w.]*\s+(\d+)")
_BULK_WAIT = re.compile(r"^cp\.async\.bulk\.wait_group(?:\.read)?\s+(\d+)")
_RELEASE = re.compile(r"^mbarrier\.arrive(?:_drop)?(?!\.expect_tx)(?:\.|\s)")
_MBAR_WAIT = re.compile(r"^mbarrier\.(?:try_wait|test_wait)\b")
_GENERIC_SMEM_STORE = re.compile(r"^(?:st\.shared(?:::cta)?\.|st\.volatile\.shared|stmatrix|"
                                 r"atom\.shared|red\.shared)")
_BULK_STORE = re.compile(r"^(?:cp\.async\.bulk\.tensor\.\dd\.global\.shared|cp\.async\.bulk\.global\.shared|"
                         r"cp\.reduce\.async\.bulk[\w:.]*\.global\.shared)")
_REG = re.compile(r"%[A-Za-z_]+\d+")
_AGE = 16       # groups counted after an operation's own; past that "16 or more"
_PENDING = 8    # wgmma groups kept per path; older ones are dropped with their grants
_GRANTS = 4     # releases granted and not yet spent, at most (fewer is the safe side)
# pending groups (did each follow an acquisition), grants, acquired since the last commit,
# whether an arrive is judged, whether every pending group was committed since the last
# wait_group that left none pending (the pipeline's fill)
START = ("wg", (), 0, False, True, True)


def _older(age: int) -> int:
    """An operation's count of groups committed after its own, after one more commit (-1:
    not yet committed, now in the newest group)."""
    return 0 if age < 0 else min(age + 1, _AGE)


class Groups:
    """The group rules' transfer function for one role: `step` reads and rewrites the scan's
    state (tuples whose last item is the path's conditions) and calls `hit` with findings."""

    def __init__(self, ptx: str, ins: list[Instruction], tid: tuple[int, int, int] = (0, 0, 0),
                 like: Groups | None = None):
        """`like`: another role's Groups for the same instructions, whose register values and
        wgmma registers this one shares (they do not depend on the thread)."""
        self.ins, self.tid = ins, tid
        self.vals = like.vals if like else Values(ptx, ins)
        self._regs: dict[int, tuple[frozenset, frozenset]] = like._regs if like else {}
        self._addr: dict[int, int | None] = {}
        self._memo: dict = {}
        self.watched: frozenset = frozenset()   # every register any wgmma owns while in flight
        if like:
            self.watched = like.watched
            return
        for k, op in enumerate(ins):
            if op.text.startswith(_MMA):
                acc, frag = self.regs(k)
                self.watched |= acc | frag

    def regs(self, k: int) -> tuple[frozenset, frozenset]:
        """A wgmma's accumulator registers and the registers of its A fragment (register form)."""
        if k not in self._regs:
            groups = re.findall(r"\{([^{}]*)\}", self.ins[k].text.split(_MMA, 1)[1])
            acc = frozenset(_REG.findall(groups[0])) if groups else frozenset()
            frag = frozenset(_REG.findall(groups[1])) if len(groups) > 1 else frozenset()
            self._regs[k] = (acc, frag)
        return self._regs[k]

    def addr(self, k: int) -> int | None:
        """The shared-memory address an instruction writes (a generic store), reads (a bulk
        store's source) or names (an mbarrier), where `Values` fixes it for this role's first thread."""
        if k not in self._addr:
            ops = re.findall(r"\[([^\]]*)\]", self.ins[k].text)
            op = ops[-1] if _BULK_STORE.match(self.ins[k].text) else (ops[0] if ops else "")
            self._addr[k] = self.vals.value(op, self.tid, self._memo) if op else None
        return self._addr[k]

    def step(self, k: int, op: Instruction, s: set, hit) -> None:
        i, always = op.text, op.always

        def of(kind: str) -> list[tuple]:
            return [e for e in s if e[0] == kind]

        def replace(old: tuple, new: tuple) -> None:
            s.discard(old)
            s.add(new)

        # -- wgmma-acc: registers of an unretired wgmma are named by no other instruction
        used = self.watched.intersection(_REG.findall(i)) if not i.startswith(_MMA) and of("acc") else None
        if used:   # only registers some wgmma owns can be an unretired one's
            for e in sorted(of("acc")):
                acc, frag = self.regs(e[1])
                reg = sorted(used & (acc | frag))
                if reg:
                    what = "accumulator" if reg[0] in acc else "A fragment"
                    hit("wgmma-acc", e[1], f"names {reg[0]}, an {what} register of the wgmma at "
                        f"instruction {e[1]}, before a wgmma.wait_group retires it")
                    s.difference_update([x for x in of("acc") if x[1] == e[1]])
        if i.startswith(_MMA):   # another wgmma may chain on the same accumulator, nothing else
            mine = self.regs(k)[0] | self.regs(k)[1]
            for e in of("acc"):
                theirs = self.regs(e[1])
                if theirs[0] != self.regs(k)[0] and (theirs[0] | theirs[1]) & mine:
                    hit("wgmma-acc", e[1], f"the wgmma at instruction {k} names a register of the wgmma "
                        f"at instruction {e[1]} before a wgmma.wait_group retires it")
            s.update(("acc", k, -1, p) for p in {e[-1] for e in of("path")})
        # -- wgmma groups: commit and wait, for both wgmma rules
        if i.startswith("wgmma.commit_group") and always:
            for e in of("acc"):
                replace(e, e[:2] + (_older(e[2]), e[-1]))
            for e in of("wg"):
                replace(e, ("wg", (e[1] + (e[3],))[-_PENDING:], e[2], False) + e[4:])
        m = _WG_WAIT.match(i)
        if m and always:
            n = int(m.group(1))
            s.difference_update([e for e in of("acc") if e[2] >= n])
            for e in of("wg"):
                kept = e[1][len(e[1]) - n:] if 0 < n < len(e[1]) else (e[1] if n else ())
                retired = e[1][:len(e[1]) - len(kept)]
                fill = not kept or (e[5] and not retired)
                replace(e, ("wg", kept, min(e[2] + sum(retired), _GRANTS), e[3], bool(retired) or not e[5],
                            fill, e[-1]))
        if _MBAR_WAIT.match(i) and always and self.addr(k) is None:
            for e in of("wg"):
                replace(e, e[:3] + (True,) + e[4:])
        # -- wgmma-release: an arrive while a group is in flight spends a grant
        if _RELEASE.match(i) and self.addr(k) is None:
            for e in of("wg"):
                if e[1] and not e[2] and e[4]:
                    hit("wgmma-release", k, f"hands a slot back while {len(e[1])} wgmma group(s) may still "
                        "read shared memory, and the slots of the retired groups are all handed back: "
                        "arrive after the wait_group that retires the slot's reader")
                replace(e, e[:2] + (max(e[2] - 1, 0),) + e[3:])
        # -- bulk-store-reuse: a bulk store's source is rewritten only once its group is retired
        if _GENERIC_SMEM_STORE.match(i):
            a = self.addr(k)
            again = [e for e in of("src") if e[1] == k or (a is not None and e[2] == a)]
            if again:
                cause = min(e[3] for e in again)
                pending = min(e[4] for e in again)
                where = "while its group is not yet committed" if pending < 0 else (
                    f"with {pending} bulk group(s) committed after its own and no "
                    f"cp.async.bulk.wait_group N with N <= {pending} since")
                hit("bulk-store-reuse", cause, f"writes the source of the bulk store at instruction {cause} "
                    f"again {where}: the store may still be reading it")
                s.difference_update(again)
        if i.startswith("cp.async.bulk.commit_group") and always:
            for e in of("src"):
                replace(e, e[:4] + (_older(e[4]), e[-1]))
        m = _BULK_WAIT.match(i)
        if m and always:
            s.difference_update([e for e in of("src") if e[4] >= int(m.group(1))])
        if _MBAR_WAIT.match(i) and always:
            s.difference_update(of("staged"))
        if _BULK_STORE.match(i):
            for e in of("staged"):
                replace(e, ("src", e[1], self.addr(e[1]), k, -1, e[-1]))
        if _GENERIC_SMEM_STORE.match(i):
            s.update(("staged", k, p) for p in {e[-1] for e in of("path")})

