"""gpubook.lowering traces the pipeline that gb.build uses, pass by pass."""

from __future__ import annotations

import kernels
from gpubook import lowering


def test_trace_lists_the_pipeline_in_start_order_with_nesting():
    steps = lowering.trace(kernels.vadd, "sm_100a")
    names = [s.name for s in steps]
    assert names[0] == "tirx.BindTarget"
    i = names.index("tirx.LowerTIRx")
    assert names[i + 1 : i + 3] == ["tirx.TilePrimitiveDispatch", "tirx.LowerTIRxCleanup"]
    assert steps[i + 1].depth == steps[i].depth + 1
    assert names.index("tirx.SplitHostDevice") < names.index("tirx.MakePackedAPI")
    stages = [s.stage for s in steps]
    assert stages[-1] == "device finalization" and "host finalization" in stages
    split = next(s for s in steps if s.name == "tirx.SplitHostDevice")
    assert split.changed and any(ln.startswith("+def vadd_kernel") or "vadd_kernel" in ln for ln in split.diff())


def test_unchanged_pass_has_an_empty_diff():
    steps = lowering.trace(kernels.vadd, "sm_100a")
    same = [s for s in steps if not s.changed]
    assert same and all(s.diff() == [] for s in same)


def test_excerpt_cuts_and_counts():
    text = lowering.excerpt([f"+line {i}" for i in range(20)], limit=5)
    assert text.count("\n") == 5 and text.endswith("15 more changed lines")
    long = lowering.excerpt(["+" + "x" * 300], width=60)
    assert " … " in long and len(long) <= 62


def test_dispatched_names_the_variant_of_each_tile_operation():
    from tvm.script import tirx as T
    from tvm.script.tirx import tile as Tx

    @T.prim_func
    def staged(x: T.Buffer((64, 128), "float32"), out: T.Buffer((64, 128), "float32")):
        T.device_entry()
        row = T.cta_id([64])
        _tx = T.thread_id([32])
        pool = T.SMEMPool()
        buf = pool.alloc((128,), "float32")
        pool.commit()
        Tx.cta.copy(buf[:], x[row, :])
        T.cuda.cta_sync()
        Tx.cta.copy(out[row, :], buf[:])

    chosen = lowering.dispatched(staged, "sm_100a")
    assert [(op, scope) for op, scope, _ in chosen] == [("copy", "cta"), ("copy", "cta")]
    from tvm.tirx.operator.tile_primitive.dispatcher import list_registered_schedules
    assert all(v in list_registered_schedules()["tirx.tile.copy"]["cuda"] for _, _, v in chosen)
    # the wrappers are gone afterwards: a second call records the same, not twice as much
    assert lowering.dispatched(staged, "sm_100a") == chosen
