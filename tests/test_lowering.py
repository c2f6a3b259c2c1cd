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
