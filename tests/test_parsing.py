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
