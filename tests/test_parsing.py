"""TIRx's parser with gpubook's way of finding itself (compile/parsing.py) parses every kernel as
TVM's own method does: the same scripts, the same refusal outside a parser."""

from __future__ import annotations

import pytest
from tvm.script import tirx as T
from tvm.script.parser.core.parser import ScriptMacro

import gpubook  # noqa: F401 - arms the replacement
from gpubook.compile import parsing

import sim_kernels


def _parse_all():
    """Kernels whose parse calls inline functions and macros, nested in loops and branches."""

    @T.inline
    def add_one(buf, i):
        buf[i] = buf[i] + T.int32(1)

    @T.macro
    def twice(buf, i):
        add_one(buf, i)
        add_one(buf, i)

    @T.prim_func
    def nested(a: T.Buffer((64,), "int32")):
        for i in range(64):
            if i % 2 == 0:
                twice(a, i)
            else:
                add_one(a, i)

    return [nested.script(), sim_kernels.make_tma_gemm().script(), sim_kernels.make_clc_tiles().script()]


def test_the_replacements_are_in_place_once_tvm_is_loaded():
    import inspect

    from tvm.tirx.script.parser import entry

    assert ScriptMacro._find_parser_def is parsing.find_parser
    assert parsing.original() is not None and parsing.original() is not parsing.find_parser
    assert entry.inspect.stack is parsing.stack and entry.inspect.isfunction is inspect.isfunction


def test_kernels_parse_to_the_same_script_either_way(monkeypatch):
    from tvm.tirx.script.parser import entry

    ours = _parse_all()
    monkeypatch.setattr(ScriptMacro, "_find_parser_def", parsing.original())
    parsing.uninstall_entry(entry)
    try:
        assert _parse_all() == ours
    finally:
        parsing.install_entry(entry)


def test_the_stack_keeps_what_prim_func_reads():
    import inspect

    def here():
        return parsing.stack(), inspect.stack()

    ours, theirs = here()
    assert [f.frame for f in ours] == [f.frame for f in theirs]
    assert [(f.lineno, f.function) for f in ours] == [(f.lineno, f.function) for f in theirs]
    assert ours[:parsing.FULL_RECORDS][1:] == theirs[:parsing.FULL_RECORDS][1:]  # source lines too
    assert all(f.code_context is None for f in ours[parsing.FULL_RECORDS:])


def test_a_macro_called_outside_a_parser_is_refused_alike(monkeypatch):
    @T.macro
    def noop():
        pass

    with pytest.raises(RuntimeError) as ours:
        noop()
    monkeypatch.setattr(ScriptMacro, "_find_parser_def", parsing.original())
    with pytest.raises(RuntimeError) as theirs:
        noop()
    assert str(ours.value) == str(theirs.value)


def test_the_lazy_stack_reads_as_inspect_stack():
    import inspect

    def here():  # records read while the callers wait, as TIRx's builder reads them
        ours, theirs = parsing.lazy_stack(), inspect.stack(context=1)
        return len(ours), list(ours), list(ours[2:]), ours[-1], theirs

    n, ours, tail, last, theirs = here()
    assert n == len(theirs) and ours[1:] == theirs[1:] and tail == theirs[2:] and last == theirs[-1]
    assert [f.positions for f in ours[1:]] == [f.positions for f in theirs[1:]]
    assert ours[0].frame is theirs[0].frame


def _meta_records():
    """What TIRx's builder remembers of each allocation made by a meta_class constructor."""
    from tvm.tirx.script.builder import ir

    @T.meta_class
    class Scratch:
        def __init__(self):
            self.acc = T.alloc_local([4], "float32")
            self.flag = T.alloc_local([1], "int32")

    seen = []
    record = ir._MetaConstructionScope.record

    def keep(scope, value, frame_info):
        record(scope, value, frame_info)
        r = scope.created[-1]
        seen.append((r.filename, r.lineno, r.colno, r.code))

    ir._MetaConstructionScope.record = keep
    try:
        @T.prim_func
        def uses(a: T.Buffer((4,), "float32")):
            s = Scratch()
            s.flag[0] = T.int32(0)
            for i in range(4):
                s.acc[i] = a[i]
                a[i] = s.acc[i] + T.float32(1)
    finally:
        ir._MetaConstructionScope.record = record
    return uses.script(), seen


def test_meta_class_allocations_remember_the_same_frame_either_way():
    from tvm.tirx.script.builder import ir

    assert ir.inspect.stack is parsing.lazy_stack
    ours = _meta_records()
    parsing.uninstall_entry(ir)
    try:
        theirs = _meta_records()
    finally:
        parsing.install_entry(ir)
    assert ours == theirs and len(ours[1]) == 2
    assert all(code.startswith("self.") and file == __file__ for file, _, _, code in ours[1])
