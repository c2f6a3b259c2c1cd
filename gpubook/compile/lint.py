"""Check the book's ordering rules for asynchronous operations on a kernel's PTX, statically.

The rules (`RULES`) are the ones a kernel cannot be tested into obeying, because breaking them
fails rarely or only on another GPU. `gb.build` lints every kernel whose PTX is asynchronous
(mbarrier, cp.async.bulk, tcgen05, wgmma) and fails on a finding the call did not declare.

What the scan proves. The kernel's `.entry` is read as a control-flow graph (`ptxflow`):
labels resolved in their brace scope, loops iterated to a fixpoint. Each rule is a hazard that
an instruction opens (a `tcgen05.ld`, a generic shared-memory store, a synchronisation) and a
later one must close (`wait::ld`, the proxy fence, `fence::after_thread_sync`) before an
instruction that needs it closed. A hazard open on *any* path into an instruction counts, and
only an unguarded instruction closes one (`@p fence` closes nothing). Roles: the threads of the
block (`.maxntid`) are grouped by the direction they take at every branch whose condition is a
function of `%tid` alone (the warp-role `setp`s), and the graph is scanned once per group,
following only that group's edges; every other branch is followed both ways, except that two
branches on the same comparison of the same unchanging operands (or on `elect.sync`, taken to
elect the same lane each time) go the same way on one path. So a fence in the producer's branch
does nothing for the consumer's path, which never goes through it. What holds when the lint is
silent: for every role, on every path of its graph, each closing instruction stands between
the two it separates, in that thread's program order. Calls are not followed, except that a
call to a helper `.func` that waits (the bounded mbarrier wait) counts as a wait.

What it does not prove. Rules are per thread: that a barrier actually synchronises the threads
involved (named-barrier ids and counts, mbarrier counts, parities and transaction bytes) is
the simulator's and the GPU's to judge. Data is not followed: a branch on a loop counter or a
tile index goes both ways, so a path no thread takes can raise a finding (the fix is to put the
fence where every path passes). Addresses are compared only where a register's value is fixed
for the thread (`ptxroles.Values`: an unrolled epilogue's staging buffers). The rules on groups
(`bulk-store-reuse`, `wgmma-acc`, `wgmma-release`) count the groups each `wait_group N` leaves
pending; `lintgroups` says what each proves, and where `wgmma-release` counts slots instead of
matching them. A CLC response is whatever `query_cancel` decodes.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

from .lintgroups import START, Groups
from .ptxflow import Instruction, entry, functions, scan
from .ptxroles import roles

__all__ = ["RULES", "Finding", "asynchronous", "check_declared", "enforced", "functions", "lint", "report",
           "verdict"]

RULES = {
    "wait-ld": "a tcgen05.ld is followed by tcgen05.wait::ld before any use of its registers",
    "wait-st": "a tcgen05.st is followed by tcgen05.wait::st before the hand-off: the next "
               "barrier, arrive, tcgen05.commit, tcgen05.mma or dealloc",
    "proxy-fence": "generic shared-memory stores are followed by fence.proxy.async before an "
                   "async-proxy read (TMA store, tcgen05.mma, tcgen05.cp, wgmma)",
    "after-sync": "a tcgen05 operation that follows a thread synchronisation is preceded by "
                  "tcgen05.fence::after_thread_sync",
    "before-handoff": "a tcgen05.ld is completed (tcgen05.wait::ld) or ordered "
                      "(tcgen05.fence::before_thread_sync, tcgen05.commit) before the next barrier "
                      "or arrive, which may hand its TMEM columns to another role",
    "before-dealloc": "tcgen05.dealloc follows tcgen05.fence::before_thread_sync and a barrier "
                      "after the last tcgen05.ld",
    "init-fence": "mbarrier.init is followed by fence.mbarrier_init before the barrier that "
                  "publishes it",
    "cluster-init": "barriers that another CTA arrives on are published by a cluster barrier "
                    "(barrier.cluster), not by a CTA barrier alone",
    "clc-response": "a CLC response is read (query_cancel) after an mbarrier wait that follows its "
                    "try_cancel, and fence.proxy.async follows the read before the next try_cancel, "
                    "barrier or arrive",
    "bulk-store-reuse": "a generic store that filled the shared-memory source of a bulk (TMA) store, "
                        "or a store to its address, runs again only after a cp.async.bulk.wait_group N "
                        "with N at most the bulk groups committed after that store's",
    "wgmma-acc": "the accumulator and A-fragment registers of a wgmma.mma_async are named by no "
                 "other instruction before a wgmma.wait_group retires its group",
    "wgmma-release": "an mbarrier.arrive that hands a ring slot back while wgmma groups are in "
                     "flight is paid for by a group that read a slot and that a wgmma.wait_group "
                     "has retired (counted, not matched: see lintgroups)",
}

_SYNC = re.compile(r"^(?:bar\.sync|bar\.red|barrier\.sync|barrier\.cta\.sync|barrier\.red|"
                   r"barrier\.cluster\.wait|mbarrier\.try_wait|mbarrier\.test_wait)\b")
_MBAR_WAIT = re.compile(r"^mbarrier\.(?:try_wait|test_wait)\b")
_HANDOFF = re.compile(r"^(?:bar\.sync|bar\.arrive|bar\.red|barrier\.sync|barrier\.arrive|barrier\.red|"
                      r"barrier\.cta\.|barrier\.cluster\.arrive|mbarrier\.arrive)")
_PUBLISH = ("bar.sync", "barrier.sync", "barrier.cta.sync", "barrier.cluster.arrive")
_TC_OP = re.compile(r"^tcgen05\.(?:ld|st|mma|cp|shift|dealloc)\b")
_GENERIC_SMEM_STORE = re.compile(r"^(?:st\.shared(?:::cta)?\.|st\.volatile\.shared|stmatrix|"
                                 r"atom\.shared|red\.shared)")
_ASYNC_SMEM_READ = re.compile(r"^(?:cp\.async\.bulk\.tensor\.\dd\.global\.shared|"
                              r"cp\.async\.bulk\.global\.shared|cp\.reduce\.async\.bulk[\w:.]*\.global\.shared|"
                              r"tcgen05\.mma|tcgen05\.cp|wgmma\.mma_async)")
_PROXY_FENCE = re.compile(r"^fence\.proxy\.async(?:$|\.shared|\s)")
_REMOTE = re.compile(r"^(?:mapa\b|tcgen05\.commit\.[\w:.]*multicast|"
                     r"cp\.async\.bulk\.tensor\.[\w:.]*cta_group::2|mbarrier\.arrive[\w:.]*shared::cluster)")
_REG = re.compile(r"%[A-Za-z_]+\d+")
# The first words of every instruction some rule opens, closes or judges a hazard at (a superset)
_ACTIVE = re.compile(r"^(?:tcgen05|bar|barrier|mbarrier|cp|fence|st|stmatrix|atom|red|"
                     r"clusterlaunchcontrol|wgmma)\b")
_NONE: frozenset = frozenset()  # the conditions a new hazard assumes: none yet


def asynchronous(ptx: str) -> bool:
    """True when the PTX uses an asynchronous feature the rules are about."""
    return any(w in ptx for w in ("mbarrier", "cp.async.bulk", "tcgen05", "wgmma"))


@dataclass(frozen=True)
class Finding:
    """One broken rule: which, where in the kernel's instruction list, and what was seen."""

    rule: str
    index: int
    instruction: str
    detail: str

    def __str__(self) -> str:
        ins = self.instruction if len(self.instruction) <= 90 else self.instruction[:87] + "..."
        return f"[{self.rule}] instruction {self.index}: {ins}\n    {self.detail}"


def entry_instructions(ptx: str) -> tuple[str, list[str]]:
    """The kernel's entry and its instruction texts in program order (guards removed)."""
    name, ins = entry(ptx)
    return name, [i.text for i in ins]


def lint(ptx: str) -> list[Finding]:
    """Every place where the kernel's PTX, on some path through its entry, breaks one of RULES.

    A chapter that asserts a clean lint after `gb.build` (which linted the same PTX) gets the
    build's findings back: the scan of a PTX text is kept for the last few kernels."""
    return list(_scanned(ptx))


@functools.lru_cache(maxsize=16)
def _scanned(ptx: str) -> tuple[Finding, ...]:
    return tuple(_scan(ptx))


def _scan(ptx: str) -> list[Finding]:
    _, ins = entry(ptx)
    remote = any(_REMOTE.match(i.text) for i in ins)
    regs: dict[int, set[str]] = {}
    found: dict[tuple[str, int], Finding] = {}

    def ld_regs(k: int) -> set[str]:
        if k not in regs:
            m = re.search(r"\{([^}]*)\}", ins[k].text)
            regs[k] = set(_REG.findall(m.group(1) if m else ""))
        return regs[k]

    def text(k: int, n: int = 40) -> str:
        return ins[k].text[:n]

    def step(k: int, op: Instruction, s: set, final: bool) -> None:
        i, always = op.text, op.always

        def hit(rule: str, cause: int, detail: str) -> None:
            if final and (rule, cause) not in found:
                found[(rule, cause)] = Finding(rule, k, i, detail)

        def of(kind: str) -> list[tuple]:
            return [e for e in s if e[0] == kind]

        def drop(kind: str) -> None:
            s.difference_update(of(kind))

        def opened(*hazards: tuple) -> None:  # a hazard per path condition that reaches here
            paths = [e[-1] for e in of("path")]
            s.update(h + (f,) for h in hazards for f in paths)

        is_sync, handoff = bool(_SYNC.match(i)), bool(_HANDOFF.match(i))
        # -- wait-ld: registers of an unwaited tcgen05.ld must not be read
        if not i.startswith(("tcgen05.wait::ld", "tcgen05.ld")) and of("ld"):
            used = set(_REG.findall(i))
            for e in sorted(of("ld")):
                reg = sorted(used & ld_regs(e[1]))
                if reg:
                    hit("wait-ld", e[1], f"reads {reg[0]}, written by the tcgen05.ld at instruction "
                        f"{e[1]}, before any tcgen05.wait::ld")
                    drop("ld")
                    break
        if i.startswith("tcgen05.wait::ld") and always:
            drop("ld")
        if i.startswith("tcgen05.ld"):
            opened(("ld", k))
        # -- wait-st: a tcgen05.st completes before it is handed off
        if (handoff or i.startswith(("tcgen05.commit", "tcgen05.mma", "tcgen05.dealloc"))) and of("st"):
            cause = min(e[1] for e in of("st"))
            hit("wait-st", cause, f"hands off the tcgen05.st at instruction {cause} before any tcgen05.wait::st")
            drop("st")
        if i.startswith("tcgen05.wait::st") and always:
            drop("st")
        if i.startswith("tcgen05.st"):
            opened(("st", k))
        # -- before-handoff: tcgen05.ld -> wait::ld or fence::before_thread_sync -> barrier or arrive
        if handoff and of("tc"):
            cause = min(e[1] for e in of("tc"))
            hit("before-handoff", cause, f"follows the {text(cause, 12)} at instruction {cause} with "
                "neither its wait nor tcgen05.fence::before_thread_sync: the thread it releases may "
                "overwrite the columns before they are read")
            drop("tc")
        if always and i.startswith(("tcgen05.fence::before_thread_sync", "tcgen05.commit",
                                    "tcgen05.wait::ld", "tcgen05.wait::st")):
            drop("tc")
        if i.startswith("tcgen05.ld"):  # a tcgen05.st is wait-st's
            opened(("tc", k))
        # -- proxy-fence
        if _ASYNC_SMEM_READ.match(i) and of("store"):
            cause = min(e[1] for e in of("store"))
            hit("proxy-fence", cause, f"the generic shared-memory store at instruction {cause} "
                f"({text(cause)}...) has no fence.proxy.async after it")
            drop("store")
        if _PROXY_FENCE.match(i) and always:
            drop("store")
        if _GENERIC_SMEM_STORE.match(i):
            drop("store")
            opened(("store", k))
        # -- wgmma-acc, wgmma-release and bulk-store-reuse: groups (lintgroups)
        groups[0].step(k, op, s, hit)
        # -- after-sync and before-dealloc
        if _TC_OP.match(i) and of("sync"):
            cause = of("sync")[0][1]
            hit("after-sync", cause, f"follows the synchronisation at instruction {cause} "
                f"({text(cause)}) with no tcgen05.fence::after_thread_sync")
            drop("sync")
        if i.startswith("tcgen05.fence::after_thread_sync") and always:
            drop("sync")
        if i.startswith("tcgen05.fence::before_thread_sync") and always:
            s.update(("dsync", e[1], e[-1]) for e in of("dfence"))
            drop("dfence")
        if i.startswith("tcgen05.dealloc") and (of("dfence") or of("dsync")):
            what = "no tcgen05.fence::before_thread_sync" if of("dfence") else "a fence but no barrier"
            cause = min(e[1] for e in of("dfence") + of("dsync"))
            hit("before-dealloc", cause, f"after the last tcgen05.ld: {what} before the dealloc, "
                "so other warps may still be reading")
        if is_sync:
            drop("sync")
            opened(("sync", k))
            drop("dsync")
        if i.startswith("tcgen05.ld"):
            drop("dsync")
            drop("dfence")
            opened(("dfence", k))
        # -- clc-response
        if i.startswith("clusterlaunchcontrol.query_cancel") and of("req"):
            cause = min(e[1] for e in of("req"))
            hit("clc-response", cause, f"reads the response of the try_cancel at instruction {cause} "
                "before any mbarrier wait: it may not have arrived")
            drop("req")
        if (handoff or i.startswith("clusterlaunchcontrol.try_cancel")) and of("resp"):
            cause = min(e[1] for e in of("resp"))
            hit("clc-response", cause, f"releases the CLC response read at instruction {cause} with no "
                "fence.proxy.async: the next try_cancel may overwrite it before the read is done")
            drop("resp")
        if _MBAR_WAIT.match(i) and always:
            drop("req")
        if _PROXY_FENCE.match(i) and always:
            drop("resp")
        if i.startswith("clusterlaunchcontrol.try_cancel"):
            opened(("req", k))
        if i.startswith("clusterlaunchcontrol.query_cancel"):
            opened(("resp", k))
        # -- init-fence and cluster-init
        publishes = i.startswith(_PUBLISH)
        if publishes and of("init"):
            cause = of("init")[0][1]
            hit("init-fence", cause, f"publishes the mbarrier.init at instruction {cause} "
                "with no fence.mbarrier_init in between")
            drop("init")
        if publishes and of("pub"):
            if remote and not i.startswith("barrier.cluster"):
                hit("cluster-init", min(e[1] for e in of("pub")), "the kernel's barriers are arrived on "
                    "from other CTAs, but their initialisation is published by a CTA barrier only")
            drop("pub")
        if i.startswith("fence.mbarrier_init") and always:
            drop("init")
        if i.startswith("mbarrier.init"):
            drop("init")
            drop("pub")
            opened(("init", k), ("pub", k))

    # An instruction no rule names, reading no register a tcgen05.ld or a wgmma may still own,
    # leaves every hazard as it found it: the scan passes its state through without a step.
    base = Groups(ptx, ins)
    owned = base.watched.union(*(ld_regs(k) for k, op in enumerate(ins) if op.text.startswith("tcgen05.ld")))
    inert = [not _ACTIVE.match(op.text) and owned.isdisjoint(_REG.findall(op.text)) for op in ins]
    first: list = []
    groups: list[Groups] = []
    for role, tid in zip(roles(ptx, ins, first=first, vals=base.vals), first):
        groups[:] = [Groups(ptx, ins, tid, like=base)]
        scan(ins, step, [("path", _NONE), START + (_NONE,)], role, inert)
    return sorted(found.values(), key=lambda f: (f.index, f.rule))


def report(ptx: str) -> str:
    """The findings as text, or a line saying that every rule holds."""
    found = lint(ptx)
    if not found:
        return "no finding: " + ", ".join(RULES) + " all hold on every path of the PTX"
    return "\n".join(str(f) for f in found)


def check_declared(name: str, ptx: str, breaks: tuple[str, ...] = ()) -> list[Finding]:
    """Lint an asynchronous kernel at build time: the rules it breaks must be exactly `breaks`.

    Returns the findings (none for a kernel that declares none); raises ValueError on an
    undeclared finding, on a declared rule that is not found, or on an unknown rule name.
    """
    unknown = [r for r in breaks if r not in RULES]
    if unknown:
        raise ValueError(f"{name}: breaks={tuple(breaks)!r} names no lint rule: {', '.join(unknown)} "
                         f"(rules: {', '.join(RULES)})")
    if not asynchronous(ptx):
        if breaks:
            raise ValueError(f"{name} declares breaks={tuple(breaks)!r}, but its PTX has no "
                             "asynchronous operation for the lint to judge")
        return []
    found = lint(ptx)
    extra = [f for f in found if f.rule not in breaks]
    missing = sorted(set(breaks) - {f.rule for f in found})
    if extra:
        raise ValueError(f"{name} breaks the PTX ordering rules (declare a deliberate break with "
                         f"breaks=(...)):\n" + "\n".join(str(f) for f in extra))
    if missing:
        raise ValueError(f"{name} declares breaks={tuple(breaks)!r}, but the lint finds no "
                         f"{', '.join(missing)} in its PTX" + (": it finds " + ", ".join(
                             sorted({f.rule for f in found})) if found else ""))
    return found


def enforced(kernel, breaks: tuple[str, ...] = ()):
    """A built kernel with its PTX linted (`check_declared`): its `lint_breaks` set to the rules
    found, which are exactly the declared `breaks`, or ValueError."""
    found = check_declared(kernel.name, kernel.ptx, tuple(breaks))
    kernel.lint_breaks = tuple(sorted({f.rule for f in found}))
    return kernel


def verdict(ptx: str, breaks: tuple[str, ...] = ()) -> str | list[str]:
    """What a build's facts record: the declared rules its PTX breaks, "clean" or "not asynchronous"."""
    return list(breaks) or ("clean" if asynchronous(ptx) else "not asynchronous")
