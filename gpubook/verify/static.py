"""Static facts of a built kernel that the chapters assert: PTX counts, proxy fences before
operand reuse, TMEM columns, register exchanges, `wgmma` left asynchronous by ptxas, the
script's fingerprint."""

from __future__ import annotations

import hashlib
import re
from typing import Any


# -- static facts ---------------------------------------------------------------------------------
PTX_EXTRA: list[tuple[str, str]] = [
    ("fence.proxy.async", r"fence\.proxy\.async"),
    ("trap", r"trap\b"),
    ("mbarrier.init", r"mbarrier\.init"),
    ("tcgen05.fence::before", r"tcgen05\.fence::before_thread_sync"),
    ("tcgen05.fence::after", r"tcgen05\.fence::after_thread_sync"),
    ("tcgen05.dealloc", r"tcgen05\.dealloc"),
    ("relinquish", r"tcgen05\.relinquish_alloc_permit"),
    ("bulk commit_group", r"cp\.async\.bulk\.commit_group"),
    ("bulk wait_group.read", r"cp\.async\.bulk\.wait_group\.read"),
    ("setmaxnreg.dec", r"setmaxnreg\.dec"),
    ("setmaxnreg.inc", r"setmaxnreg\.inc"),
]


def ptx_facts(kernel: Any) -> dict[str, int]:
    """The kernel's PTX counts (gb.build's families) and the ladder's extra ones (fences, traps,
    barrier inits, bulk groups, register reallocation)."""
    from ..compile.report import count_ptx

    return {**kernel.ptx_counts, **count_ptx(kernel.ptx, PTX_EXTRA)}


def proxy_fenced(ptx: str, consumer: str) -> bool:
    """True when, before the first instruction matching `consumer` (a regex: the tensor core's
    `tcgen05\\.mma`, a TMA store), the last st.shared is followed by a fence.proxy.async and then
    a barrier: generic stores published to the async proxy before the consumer is released."""
    from ..compile.report import ptx_instructions

    seq = [ins for ins in ptx_instructions(ptx)
           if re.match(r"st\.shared|fence\.proxy\.async|bar(rier)?\.(cta\.)?sync|" + consumer, ins)]
    first = next((i for i, ins in enumerate(seq) if re.match(consumer, ins)), None)
    stores = [i for i, ins in enumerate(seq[: first or 0]) if ins.startswith("st.shared")]
    if first is None or not stores:
        return False
    kinds = ["fence" if ins.startswith("fence") else "bar" if ins.startswith("bar") else "other"
             for ins in seq[stores[-1] + 1 : first]]
    return "fence" in kinds and "bar" in kinds[kinds.index("fence"):]


_ALIGNED = re.compile(r"bar\.(sync|arrive|red)\b|barrier\.(cluster\.)?\w+\.aligned|\S+\.sync\.aligned\b")


def not_rejoined(ptx: str) -> list[str]:
    """The `.aligned` instructions (CTA and cluster barriers, `tcgen05.ld`/`st` and their waits,
    ...) that follow an `elect.sync` in program order with no `bar.warp.sync` in between: each is
    one a warp may reach with its elected lane still apart. Branches are ignored: a reading of
    the text, in the order ptxas lays it out."""
    from ..compile.report import ptx_instructions

    found, apart = [], False
    for ins in ptx_instructions(ptx):
        if ins.startswith("elect.sync"):
            apart = True
        elif ins.startswith("bar.warp.sync"):
            apart = False
        elif apart and _ALIGNED.match(ins):
            found.append(ins.split()[0])
            apart = False
    return found


def refill_fenced(ptx: str) -> bool:
    """True when the PTX has a tcgen05.mma and, in program order, every st.shared after the first
    one follows a fence.proxy.async that follows the last mbarrier wait before it: ordinary
    stores into tiles the tensor core read are ordered after its reads (a write after a read,
    across proxies). Branches are ignored (`gpubook.lint` follows them)."""
    from ..compile.report import ptx_instructions

    seen_mma, fenced = False, True
    for ins in ptx_instructions(ptx):
        if ins.startswith("tcgen05.mma"):
            seen_mma = True
        elif re.match(r"mbarrier\.(?:try_wait|test_wait)", ins):
            fenced = False
        elif ins.startswith("fence.proxy.async"):
            fenced = True
        elif ins.startswith("st.shared") and seen_mma and not fenced:
            return False
    return seen_mma


def tmem_columns(kernel: Any) -> dict[str, list[int]]:
    """The column count of every tcgen05.alloc and tcgen05.dealloc the kernel's CUDA source
    issues: {'alloc': [...], 'dealloc': [...]} (TMEMPool passes them as constants)."""
    out: dict[str, list[int]] = {}
    for kind in ("alloc", "dealloc"):
        out[kind] = [int(n) for n in re.findall(
            rf"tcgen05_{kind}_{kind}\w*\(.*?, \(uint\)(\d+)\);", kernel.source)]
    return out


def setmaxnreg_values(ptx: str) -> dict[str, list[int]]:
    """{'dec': [...], 'inc': [...]}: the register counts of every setmaxnreg in the PTX."""
    out: dict[str, list[int]] = {"dec": [], "inc": []}
    for kind, n in re.findall(r"setmaxnreg\.(dec|inc)\.sync\.aligned\.u32\s+(\d+)", ptx):
        out[kind].append(int(n))
    return out


WGMMA_SYNC = (("ARRIVE", r"wgmma\.fence\b"), ("DEPBAR", r"wgmma\.wait_group\b"))


def wgmma_async(kernel: Any) -> dict[str, int]:
    """{'ARRIVE': n, 'DEPBAR': m}: the WARPGROUP.ARRIVE and WARPGROUP.DEPBAR of the kernel's SASS,
    after asserting that ptxas left its `wgmma` asynchronous. Where ptxas cannot prove which
    registers the MMAs in flight touch, it serializes every `wgmma` of the kernel ("Potential
    Performance Loss: wgmma.mma_async instructions are serialized"): it waits for each HGMMA
    on its own, a DEPBAR after each. So the SASS must hold exactly one DEPBAR per
    `wgmma.wait_group` of the PTX, and at least one ARRIVE per `wgmma.fence` (ptxas may add an
    ARRIVE where it duplicates a path, which costs no wait). Raises AssertionError naming both
    counts."""
    from ..compile.report import ptx_instructions, sass_instructions

    ptx = ptx_instructions(kernel.ptx)
    sass = sass_instructions(kernel.sass)
    found = {op: sum(1 for ins in sass if ins.startswith(f"WARPGROUP.{op}")) for op, _ in WGMMA_SYNC}
    asked = {op: sum(1 for ins in ptx if re.match(rx, ins)) for op, rx in WGMMA_SYNC}
    if not asked["ARRIVE"] or found["DEPBAR"] != asked["DEPBAR"] or found["ARRIVE"] < asked["ARRIVE"]:
        raise AssertionError(f"{getattr(kernel, 'name', 'kernel')}: wgmma serialized by ptxas? SASS WARPGROUP "
                             f"{found} against the PTX's wgmma.fence/wait_group {asked}")
    return found


def fingerprint(func: Any) -> str:
    """The fingerprint gb.build would give this PrimFunc (its TIRx script's hash), without building."""
    return hashlib.sha256(func.script().encode()).hexdigest()[:16]


