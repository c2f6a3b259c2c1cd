"""Small kernels the harness tests compile: portable ones, one that only a B200 can run, one that
only a Hopper GPU can run."""

from tvm.script import tirx as T

N = 4096


@T.prim_func
def vadd(x: T.Buffer((N,), "float32"), y: T.Buffer((N,), "float32"), out: T.Buffer((N,), "float32")):
    T.device_entry()
    bx = T.cta_id([N // 128])
    tx = T.thread_id([128])
    out[bx * 128 + tx] = x[bx * 128 + tx] + y[bx * 128 + tx]


@T.prim_func
def tmem_roundtrip(out: T.Buffer((128,), "int32")):
    T.device_entry()
    warp = T.warp_id([4])
    tid = T.thread_id([128])
    tmem_addr = T.shared_scalar("uint32")
    if warp == 0:
        T.ptx.tcgen05.alloc.cta_group__1.sync.aligned.shared__cta.b32(T.address_of(tmem_addr), T.uint32(32))
    T.cuda.cta_sync()
    out[tid] = T.cast(tmem_addr, "int32")
    T.cuda.cta_sync()
    if warp == 0:
        T.ptx.tcgen05.fence__after_thread_sync()  # the barrier -> the dealloc (gpubook.lint: after-sync)
        T.ptx.tcgen05.relinquish_alloc_permit.cta_group__1.sync.aligned()
        T.ptx.tcgen05.dealloc.cta_group__1.sync.aligned.b32(tmem_addr, T.uint32(32))


@T.prim_func
def wgmma_fence(out: T.Buffer((128,), "int32")):
    # Hopper's warpgroup MMA bookkeeping, raw: ptxas accepts it for sm_90a only.
    T.device_entry()
    tid = T.thread_id([128])
    T.ptx.wgmma.fence.sync.aligned()
    T.ptx.wgmma.commit_group.sync.aligned()
    T.ptx.wgmma.wait_group.sync.aligned(0)
    out[tid] = tid


NT = 1000  # not a multiple of the CTA size: the last CTA needs a tail guard


@T.prim_func
def vadd_tail(x: T.Buffer((NT,), "float32"), y: T.Buffer((NT,), "float32"), out: T.Buffer((NT,), "float32")):
    T.device_entry()
    bx = T.cta_id([(NT + 127) // 128])
    tx = T.thread_id([128])
    if bx * 128 + tx < NT:
        out[bx * 128 + tx] = x[bx * 128 + tx] + y[bx * 128 + tx]


@T.prim_func
def vadd_off_by_one(x: T.Buffer((NT,), "float32"), y: T.Buffer((NT,), "float32"), out: T.Buffer((NT,), "float32")):
    # Wrong on purpose: the tail guard `<=` lets thread NT write out[NT], one element past the
    # end. The comparison of out[0:NT] passes; only the guard zone after `out` sees the write.
    T.device_entry()
    bx = T.cta_id([(NT + 127) // 128])
    tx = T.thread_id([128])
    if bx * 128 + tx <= NT:
        out[bx * 128 + tx] = x[bx * 128 + tx] + y[bx * 128 + tx]
