"""mbarrier waits for TIRx kernels: the plain spin, or a bounded one that reports and traps.

A kernel whose barrier protocol is wrong (an expect_tx byte count that never arrives, a
parity that is off by one phase) hangs in `mbarrier.try_wait` forever. In a teaching or
debugging build, `wait` replaces that spin by a loop with a time budget: when the budget
runs out, one lane of each waiting warp prints which barrier (a small id and its
shared-memory address), which phase parity it was waiting for, and its block and thread;
a few milliseconds later (so that the other waiting warps can print as well) the thread
executes `trap`, which ends the kernel with an error instead of a hang.

Production builds keep the plain wait: the bounded form is chosen explicitly
(`bounded=True`), by `GPUBOOK_BOUNDED_WAIT=1` in the environment when the kernel is
parsed, or for every wait of a kernel (those inside `tvm.tirx.lang.pipeline` included) by
parsing it inside `with bounded_waits():`.
"""

from __future__ import annotations

import contextlib
import os
from typing import Any, Iterator

BOUNDED_ENV = "GPUBOOK_BOUNDED_WAIT"
DEFAULT_BUDGET_NS = 2_000_000_000  # two seconds of %globaltimer, far beyond any legitimate wait
REPORT_PREFIX = "gpubook: mbarrier wait timed out"
REPORT_PATTERN = REPORT_PREFIX + r": barrier \d+"

_HELPER = "gpubook_mbarrier_wait_bounded"
_SOURCE = r"""
__device__ __noinline__ void gpubook_mbarrier_wait_bounded_at(unsigned int addr, int phase, int bar_id,
                                                               unsigned long long budget_ns) {
    unsigned long long start, now;
    unsigned long long tries = 0;
    unsigned int done = 0;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(start));
    while (true) {
        asm volatile(
            "{\n"
            ".reg .pred p;\n"
            "mbarrier.try_wait.parity.acquire.cta.shared::cta.b64 p, [%1], %2;\n"
            "selp.u32 %0, 1, 0, p;\n"
            "}\n"
            : "=r"(done) : "r"(addr), "r"(phase) : "memory");
        if (done) return;
        ++tries;
        asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
        if (now - start > budget_ns) break;
    }
    unsigned int active = __activemask();
    if ((threadIdx.x & 31) == (unsigned int)(__ffs(active) - 1)) {
        printf("gpubook: mbarrier wait timed out: barrier %d at shared 0x%x waiting for phase parity %d; "
               "block (%d,%d,%d) thread (%d,%d,%d), %d waiting lanes, %llu polls in %llu ns\n",
               bar_id, addr, phase & 1, (int)blockIdx.x, (int)blockIdx.y, (int)blockIdx.z,
               (int)threadIdx.x, (int)threadIdx.y, (int)threadIdx.z, __popc(active), tries,
               now - start);
    }
    // Give the other waiting warps time to print too: a trap ends the whole kernel at once.
    for (int i = 0; i < 4000; ++i) __nanosleep(1000);
    asm volatile("trap;");
}
__forceinline__ __device__ void gpubook_mbarrier_wait_bounded(void* bar, int phase, int bar_id,
                                                              unsigned long long budget_ns) {
    gpubook_mbarrier_wait_bounded_at((unsigned int)__cvta_generic_to_shared(bar), phase, bar_id,
                                     budget_ns);
}
__forceinline__ __device__ void gpubook_mbarrier_wait_bounded_u32(unsigned int bar, int phase,
                                                                  int bar_id,
                                                                  unsigned long long budget_ns) {
    gpubook_mbarrier_wait_bounded_at(bar, phase, bar_id, budget_ns);
}
"""


def bounded_default() -> bool:
    """True when GPUBOOK_BOUNDED_WAIT asks for bounded waits in kernels parsed from now on."""
    return os.environ.get(BOUNDED_ENV, "") not in ("", "0", "false", "no")


def bounded_wait(bar: Any, phase: Any, bar_id: int = -1, budget_ns: int = DEFAULT_BUDGET_NS) -> Any:
    """The bounded wait as a TIRx call: spin on try_wait.parity, report and trap after budget_ns."""
    from tvm.script import tirx as T

    raw = str(getattr(bar, "ty", "")) == "uint32"  # a shared-window address, as T.cuda allows
    name = _HELPER + ("_u32" if raw else "")
    return T.cuda.func_call(name, bar, phase, T.int32(bar_id), T.uint64(budget_ns),
                            source_code=_SOURCE)


def wait(bar: Any, phase: Any, bar_id: int = -1, bounded: bool | None = None,
         budget_ns: int = DEFAULT_BUDGET_NS) -> Any:
    """Wait until the phase of parity `phase` of the mbarrier at `bar` has completed.

    Call it inside a `T.prim_func` where `T.cuda.mbarrier_wait(bar, phase)` would go.
    `bounded=None` follows GPUBOOK_BOUNDED_WAIT; `bar_id` is the number the report prints.
    """
    from tvm.script import tirx as T

    if bounded is None:
        bounded = bounded_default()
    if bounded:
        return bounded_wait(bar, phase, bar_id, budget_ns)
    return T.cuda.mbarrier_wait(bar, phase)


@contextlib.contextmanager
def bounded_waits(budget_ns: int = DEFAULT_BUDGET_NS) -> Iterator[None]:
    """Make every `T.cuda.mbarrier_wait` parsed inside the block a bounded wait (id -1).

    This reaches the waits that `tvm.tirx.lang.pipeline` emits for `Pipeline`, `MBarrier`
    and `TMABar`, so a whole kernel can be built in its debugging form unchanged; the
    report then names each barrier by its shared-memory address.
    """
    from tvm.script import tirx as T

    plain = T.cuda.mbarrier_wait
    T.cuda.mbarrier_wait = lambda bar, phase: bounded_wait(bar, phase, -1, budget_ns)
    try:
        yield
    finally:
        T.cuda.mbarrier_wait = plain
