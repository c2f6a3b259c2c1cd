"""Trace the TIRx lowering pipeline pass by pass: names, nesting, and the IR before and after each."""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any

# Passes that only group others: they are listed as stages, not as steps.
CONTAINERS = {"_pipeline", "sequential"}


@dataclass
class PassStep:
    """One pass as it ran: its name, the stage it belongs to, and the module around it."""

    name: str
    stage: str
    depth: int
    before: str
    after: str

    @property
    def changed(self) -> bool:
        return bool(self.diff())

    def diff(self, context: int = 0) -> list[str]:
        """The unified diff of the module's script across this pass, indentation ignored."""
        a = [ln.strip() for ln in self.before.splitlines()]
        b = [ln.strip() for ln in self.after.splitlines()]
        lines = difflib.unified_diff(a, b, lineterm="", n=context)
        return [ln for ln in lines if not ln.startswith(("---", "+++", "@@"))]


def trace(func: Any, arch: str) -> list[PassStep]:
    """Compile `func` for `arch` exactly as gpubook.build does, recording every pass that runs."""
    import tvm
    from tvm.ir.instrument import pass_instrument

    from .build import _compile

    @pass_instrument
    class _Recorder:
        def __init__(self) -> None:
            self.open: list[tuple[str, PassStep | None]] = []
            self.steps: list[PassStep] = []
            self.top: list[str] = []

        def run_before_pass(self, mod: Any, info: Any) -> None:
            if not self.open:
                self.top.append(info.name)
            step = None
            if info.name not in CONTAINERS:
                depth = sum(1 for _, st in self.open if st is not None)
                step = PassStep(info.name, _stage(self.top), depth, mod.script(), "")
                self.steps.append(step)  # listed in the order the passes start
            self.open.append((info.name, step))

        def run_after_pass(self, mod: Any, info: Any) -> None:
            _, step = self.open.pop()
            if step is not None:
                step.after = mod.script()

    rec = _Recorder()
    with tvm.transform.PassContext(instruments=[rec]):
        _compile(func, arch)
    return rec.steps


def _stage(top: list[str]) -> str:
    """Name the stage from the top-level passes seen so far (tirx.build's fixed order)."""
    last = top[-1]
    if last == "_pipeline":
        return "TIRx pipeline"
    if last == "tirx.Filter":
        return "split into host and device modules"
    if last == "sequential":
        return "host finalization" if top.count("sequential") == 1 else "device finalization"
    return "setup"


def excerpt(lines: list[str], limit: int = 12, width: int = 110) -> str:
    """At most `limit` diff lines, long ones cut in the middle, with a count of what was left out."""
    shown = []
    for ln in lines[:limit]:
        shown.append(ln if len(ln) <= width else ln[: width // 2 - 2] + " … " + ln[-(width // 2 - 1):])
    if len(lines) > limit:
        shown.append(f"… {len(lines) - limit} more changed lines")
    return "\n".join(shown)


def dispatched(func: Any, arch: str) -> list[tuple[str, str, str]]:
    """(operation, scope, variant) of every tile operation of `func`, in the order TIRx lowered them.

    Lowers the kernel once with each registered dispatch variant wrapped, so that the variant
    that returned the implementation is recorded.
    """
    from tvm.tirx.operator.tile_primitive import dispatcher

    from .build import lower

    chosen: list[tuple[str, str, str]] = []
    saved = []

    def wrap(impl: Any, op: str, variant: str) -> Any:
        def run(op_call: Any, sctx: Any) -> Any:
            res = impl(op_call, sctx)
            chosen.append((op.removeprefix("tirx.tile."), str(sctx.scope_kind), variant))
            return res
        return run

    for (op, _target), cases in dispatcher._DISPATCH_TABLE.items():
        for case in cases:
            saved.append((case, case.impl))
            case.impl = wrap(case.impl, op.name, case.variant)
    try:
        lower(func, arch)
    finally:
        for case, impl in saved:
            case.impl = impl
    return chosen
