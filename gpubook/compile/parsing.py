"""TIRx's script parser without its quadratic search for itself.

Each call of a `@T.macro` / `@T.inline` inside a kernel being parsed finds the parser that is
running through `ScriptMacro._find_parser_def`, which in apache-tvm 0.27 builds
`inspect.getouterframes(inspect.currentframe())`: a FrameInfo for every frame of the stack,
each with its source line (and `inspect.getmodule`, which scans every loaded module), and then
reads only `.frame` of each. The parser recurses once per nested statement, so a kernel of a few
hundred lines with a few hundred macro calls spent most of its parse there: half of chapter
11B's execution time.

Likewise `T.prim_func` takes `inspect.stack()` of its caller each time it is called, and reads
the frame of every record but the source line of one (the third, to tell a class body from a
function). And every buffer or scalar allocated while a `@T.meta_class` object (a pipeline,
a tile scheduler, a shared-memory pool) is constructed takes `inspect.stack()` too, to remember
the first frame outside TIRx's builder for an error message should the object not own it: a
full record of some fifty frames, of which it reads the file names up to that frame and the
source line of that one. That was a quarter of chapter 10's execution time.

`install()` replaces the first with the same walk over `frame.f_back` (the frames
`getouterframes` lists, in the same order) without the frame records; the module of
`T.prim_func` gets a `stack()` whose records are TVM's for the first three frames and carry the
frame, its file, line and function, without the source line, for the rest; the builder's module
gets a `stack()` whose records are TVM's, each made when it is first read. The same parser is
found, the same error raised, the same kernels parsed, the same frame remembered
(tests/test_parsing.py compares them both ways); nothing else of the parser changes. `arm()`, which
`import gpubook` calls, installs it when TVM's parser modules are loaded, now or later, and
imports nothing itself: a GPU host that only replays has no apache-tvm, and a process that never
parses a kernel never loads it.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import sys
import types
from collections.abc import Sequence
from typing import Any

PARSER_MODULE = "tvm.script.parser.core.parser"
ENTRY_MODULE = "tvm.tirx.script.parser.entry"  # T.prim_func
BUILDER_MODULE = "tvm.tirx.script.builder.ir"  # T.alloc_buffer and friends, T.meta_class
FULL_RECORDS = 3  # the records of inspect.stack() that T.prim_func reads whole

MODULES = (PARSER_MODULE, ENTRY_MODULE, BUILDER_MODULE)

_installed: list[Any] = []


def find_parser(macro: Any) -> Any:
    """The running parser, as `ScriptMacro._find_parser_def` finds it, without frame records."""
    from tvm.script.parser.core.parser import ScriptMacro

    frame = inspect.currentframe()
    while frame is not None:
        parser = frame.f_globals.get(ScriptMacro.parser_object_name)
        if parser is not None:
            return parser
        frame = frame.f_back
    raise RuntimeError(f"{ScriptMacro.parser_object_name} not available")


def _callers(frame: types.FrameType | None) -> list[types.FrameType]:
    """`frame` and the frames that called it, innermost first (the order `inspect.stack` lists)."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    return frames


def _record(frame: types.FrameType, context: int) -> inspect.FrameInfo:
    """The record `inspect.stack(context)` makes of a frame, its source lines included."""
    info = inspect.getframeinfo(frame, context)
    return inspect.FrameInfo(frame, *info, positions=info.positions)


def stack(context: int = 1) -> list[inspect.FrameInfo]:
    """`inspect.stack(context)` of the caller: TVM's records for the first FULL_RECORDS frames,
    then records of the frame, file, line and function without the source line."""
    return [_record(frame, context) if i < FULL_RECORDS else
            inspect.FrameInfo(frame, frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name, None, None)
            for i, frame in enumerate(_callers(sys._getframe(1)))]


class FrameRecords(Sequence):
    """`inspect.stack(context)` of a list of frames, each record made (as TVM's) when first read."""

    def __init__(self, frames: list[types.FrameType], context: int) -> None:
        self._frames, self._context = frames, context
        self._records: dict[int, inspect.FrameInfo] = {}

    def __len__(self) -> int:
        return len(self._frames)

    def __getitem__(self, index: Any) -> Any:
        if isinstance(index, slice):
            return FrameRecords(self._frames[index], self._context)
        frame = self._frames[index]  # IndexError ends iteration, as a list's does
        key = index % len(self._frames)
        if key not in self._records:
            self._records[key] = _record(frame, self._context)
        return self._records[key]


def lazy_stack(context: int = 1) -> FrameRecords:
    """`inspect.stack(context)` of the caller, its records made as they are read."""
    return FrameRecords(_callers(sys._getframe(1)), context)


class _Inspect(types.ModuleType):
    """`inspect` as the module of T.prim_func sees it: the same, but for `stack`."""

    stack = staticmethod(stack)

    def __getattr__(self, name: str) -> Any:
        return getattr(inspect, name)


class _LazyInspect(_Inspect):
    """`inspect` as TIRx's builder sees it: the same, but for a lazy `stack`."""

    stack = staticmethod(lazy_stack)


def install() -> None:
    """Put `find_parser` in place of `ScriptMacro._find_parser_def` (once per process)."""
    if _installed:
        return
    from tvm.script.parser.core.parser import ScriptMacro

    _installed.append(ScriptMacro._find_parser_def)
    ScriptMacro._find_parser_def = find_parser


def install_entry(module: Any) -> None:
    """Give the module of T.prim_func (or of the builder) its `stack` above."""
    if getattr(module, "inspect", None) is inspect:
        module.inspect = (_LazyInspect if module.__name__ == BUILDER_MODULE else _Inspect)("inspect")


def uninstall_entry(module: Any) -> None:
    """TVM's own `inspect` back (for comparison)."""
    module.inspect = inspect


def original() -> Any:
    """TVM's own method, for comparison (None until `install` ran)."""
    return _installed[0] if _installed else None


class _WhenLoaded(importlib.abc.MetaPathFinder):
    """Finds TVM's parser modules as the path finder would, and installs the replacements as soon
    as each module has executed."""

    def find_spec(self, name: str, path: Any, target: Any = None) -> Any:
        if name not in MODULES:
            return None
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        if spec is None or spec.loader is None or not hasattr(spec.loader, "exec_module"):
            return spec
        loader_exec = spec.loader.exec_module

        def exec_module(module: Any) -> None:
            loader_exec(module)
            install() if name == PARSER_MODULE else install_entry(module)

        spec.loader.exec_module = exec_module  # type: ignore[method-assign]
        return spec


def arm() -> None:
    """Install now where TVM's parser modules are loaded, else as soon as they are."""
    if PARSER_MODULE in sys.modules:
        install()
    for name in (ENTRY_MODULE, BUILDER_MODULE):
        if name in sys.modules:
            install_entry(sys.modules[name])
    if not all(name in sys.modules for name in MODULES) \
            and not any(isinstance(f, _WhenLoaded) for f in sys.meta_path):
        sys.meta_path.insert(0, _WhenLoaded())
