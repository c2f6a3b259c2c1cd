"""Check the book's ordering rules for asynchronous operations on a kernel's PTX, statically.

The rules are the ones a kernel cannot be tested into obeying, because breaking them fails
rarely or only on another GPU: a `tcgen05.ld` is waited for before its registers are used,
generic shared-memory stores are fenced before an async-proxy read, a thread
synchronisation is followed by `tcgen05.fence::after_thread_sync` before the next tcgen05
operation, TMEM is freed only after a `before_thread_sync` fence and a barrier, an
`mbarrier.init` is fenced before the barrier that publishes it, and barriers that other CTAs
touch are published by a cluster barrier. The scan follows the kernel's PTX in program order
and ignores branches, so it proves nothing about paths; it flags the straight-line mistakes
that published kernels made.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

RULES = {
    "wait-ld": "a tcgen05.ld is followed by tcgen05.wait::ld before any use of its registers",
    "proxy-fence": "generic shared-memory stores are followed by fence.proxy.async before an "
                   "async-proxy read (TMA store, tcgen05.mma, tcgen05.cp, wgmma)",
    "after-sync": "a tcgen05 operation that follows a thread synchronisation is preceded by "
                  "tcgen05.fence::after_thread_sync",
    "before-dealloc": "tcgen05.dealloc follows tcgen05.fence::before_thread_sync and a barrier "
                      "after the last tcgen05.ld",
    "init-fence": "mbarrier.init is followed by fence.mbarrier_init before the barrier that "
                  "publishes it",
    "cluster-init": "barriers that another CTA arrives on are published by a cluster barrier "
                    "(barrier.cluster), not by a CTA barrier alone",
}

_LABEL = re.compile(r"^(?:[A-Za-z_$][\w$]*\s*:(?!:)\s*)+")
_PRED = re.compile(r"^@!?%?[\w$]+\s+")
_SYNC = re.compile(r"^(?:bar\.sync|bar\.red|barrier\.sync|barrier\.cta\.sync|barrier\.red|"
                   r"barrier\.cluster\.wait|mbarrier\.try_wait|mbarrier\.test_wait)\b")
_TC_OP = re.compile(r"^tcgen05\.(?:ld|st|mma|cp|shift|dealloc)\b")
_GENERIC_SMEM_STORE = re.compile(r"^(?:st\.shared(?:::cta)?\.|st\.volatile\.shared|stmatrix|"
                                 r"atom\.shared|red\.shared)")
_ASYNC_SMEM_READ = re.compile(r"^(?:cp\.async\.bulk\.tensor\.\dd\.global\.shared|"
                              r"cp\.async\.bulk\.global\.shared|tcgen05\.mma|tcgen05\.cp|"
                              r"wgmma\.mma_async)")
_REMOTE = re.compile(r"^(?:mapa\b|tcgen05\.commit\.[\w:.]*multicast|"
                     r"cp\.async\.bulk\.tensor\.[\w:.]*cta_group::2|mbarrier\.arrive[\w:.]*shared::cluster)")
_REG = re.compile(r"%[A-Za-z_]+\d+")


@dataclass
class Finding:
    """One broken rule: which, where in the kernel's instruction list, and what was seen."""

    rule: str
    index: int
    instruction: str
    detail: str

    def __str__(self) -> str:
        ins = self.instruction if len(self.instruction) <= 90 else self.instruction[:87] + "..."
        return f"[{self.rule}] instruction {self.index}: {ins}\n    {self.detail}"


def functions(ptx: str) -> dict[str, list[str]]:
    """The instructions of every `.entry` and `.func` of the PTX, by name, in program order."""
    text = re.sub(r"/\*.*?\*/", " ", ptx, flags=re.S)
    text = "\n".join(ln.split("//")[0] for ln in text.splitlines())
    out: dict[str, list[str]] = {}
    for m in re.finditer(r"\.(?:entry|func)\s+(?:\([^)]*\)\s*)?([\w$]+)", text):
        start = text.find("{", m.end())
        if start < 0:
            continue
        depth, i = 0, start
        while i < len(text):  # the body ends at the matching brace
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            if depth == 0:
                break
            i += 1
        out[m.group(1)] = _instructions(text[start + 1 : i])
    return out


def _instructions(body: str) -> list[str]:
    """Statements of a body: split on ';', block braces and labels removed, operand braces kept."""
    out = []
    for st in body.split(";"):
        st = st.strip()
        while True:  # strip block braces, labels and guards in front of the instruction
            before = st
            st = st.lstrip("{}").strip()
            st = _LABEL.sub("", st)
            st = _PRED.sub("", st)
            if st == before:
                break
        st = st.rstrip("}").strip()
        if st and not st.startswith(".") and not st.startswith("%"):
            out.append(" ".join(st.split()))
    return out


def entry_instructions(ptx: str) -> tuple[str, list[str]]:
    """The kernel's entry and its instructions, with calls to helpers that wait marked as waits."""
    funcs = functions(ptx)
    entries = re.findall(r"\.entry\s+([\w$]+)", ptx)
    if not entries:
        raise ValueError("no .entry in this PTX")
    waiting = {name for name, body in funcs.items() if any(_SYNC.match(i) for i in body)}
    body = []
    for ins in funcs[entries[0]]:
        m = re.match(r"^call(?:\.uni)?\s.*?([\w$]+)\s*,", ins) or re.match(r"^call(?:\.uni)?\s+([\w$]+)", ins)
        if m and m.group(1) in waiting:
            ins = f"mbarrier.try_wait (in {m.group(1)}) {ins}"
        body.append(ins)
    return entries[0], body


def lint(ptx: str) -> list[Finding]:
    """Every place where the kernel's PTX, read in program order, breaks one of RULES."""
    _, ins = entry_instructions(ptx)
    found: list[Finding] = []
    pending_ld: dict[str, int] = {}     # register written by a tcgen05.ld not yet waited for
    store_at: int | None = None          # last generic smem store not yet fenced to the async proxy
    synced_at: int | None = None         # last synchronisation not yet followed by after_thread_sync
    dealloc_state = "none"               # none | need-fence | need-sync | ok
    init_at: int | None = None           # an mbarrier.init not yet fenced
    inits_seen = False
    first_sync_after_init: str | None = None
    remote = any(_REMOTE.match(i) for i in ins)
    for k, i in enumerate(ins):
        # -- wait-ld: registers of an unwaited tcgen05.ld must not be read
        if pending_ld and not i.startswith("tcgen05.wait::ld"):
            used = set(_REG.findall(i)) & pending_ld.keys()
            if used and not i.startswith("tcgen05.ld"):
                reg = sorted(used)[0]
                found.append(Finding("wait-ld", k, i, f"reads {reg}, written by the tcgen05.ld at "
                                     f"instruction {pending_ld[reg]}, before any tcgen05.wait::ld"))
                pending_ld.clear()
        if i.startswith("tcgen05.wait::ld"):
            pending_ld.clear()
        if i.startswith("tcgen05.ld"):
            regs = re.search(r"\{([^}]*)\}", i)
            for reg in _REG.findall(regs.group(1) if regs else ""):
                pending_ld[reg] = k
            dealloc_state = "need-fence"
        # -- proxy-fence
        if _GENERIC_SMEM_STORE.match(i):
            store_at = k
        if i.startswith("fence.proxy.async"):
            store_at = None
        if _ASYNC_SMEM_READ.match(i) and store_at is not None:
            found.append(Finding("proxy-fence", k, i, f"the generic shared-memory store at instruction "
                                 f"{store_at} ({ins[store_at][:40]}...) has no fence.proxy.async after it"))
            store_at = None
        # -- after-sync and before-dealloc
        is_sync = bool(_SYNC.match(i))
        if _TC_OP.match(i) and synced_at is not None:
            found.append(Finding("after-sync", k, i, f"follows the synchronisation at instruction "
                                 f"{synced_at} ({ins[synced_at][:40]}) with no tcgen05.fence::after_thread_sync"))
            synced_at = None
        if i.startswith("tcgen05.fence::after_thread_sync"):
            synced_at = None
        if i.startswith("tcgen05.fence::before_thread_sync") and dealloc_state == "need-fence":
            dealloc_state = "need-sync"
        if is_sync:
            synced_at = k
            if dealloc_state == "need-sync":
                dealloc_state = "ok"
        if i.startswith("tcgen05.dealloc") and dealloc_state in ("need-fence", "need-sync"):
            what = ("no tcgen05.fence::before_thread_sync" if dealloc_state == "need-fence"
                    else "a fence but no barrier")
            found.append(Finding("before-dealloc", k, i, f"after the last tcgen05.ld: {what} before "
                                 "the dealloc, so other warps may still be reading"))
        # -- init-fence and cluster-init
        if i.startswith("mbarrier.init"):
            init_at, inits_seen, first_sync_after_init = k, True, None
        if i.startswith("fence.mbarrier_init"):
            init_at = None
        publishes = i.startswith(("bar.sync", "barrier.sync", "barrier.cta.sync", "barrier.cluster.arrive"))
        if publishes and init_at is not None:
            found.append(Finding("init-fence", k, i, f"publishes the mbarrier.init at instruction {init_at} "
                                 "with no fence.mbarrier_init in between"))
            init_at = None
        if inits_seen and first_sync_after_init is None and publishes:
            first_sync_after_init = i
            if remote and not i.startswith("barrier.cluster"):
                found.append(Finding("cluster-init", k, i, "the kernel's barriers are arrived on from "
                                     "other CTAs, but their initialisation is published by a CTA barrier only"))
    return found


def report(ptx: str) -> str:
    """The findings as text, or a line saying that every rule holds."""
    found = lint(ptx)
    if not found:
        return "no finding: " + ", ".join(RULES) + " all hold on the straight-line PTX"
    return "\n".join(str(f) for f in found)
