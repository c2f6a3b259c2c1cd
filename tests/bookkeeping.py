"""Which cells of a chapter are bookkeeping: code a reader should not see.

A code cell is bookkeeping when it feeds `glue` or shows a table and does nothing else a
reader could learn from. Every statement of it is one of:

- a `glue(...)` call, or an import;
- a table shown: `Markdown(...)` (or `HTML(...)`), `display(...)` of one, or a call to a
  helper that returns a Markdown table (a function named `markdown`, `*_markdown`, `*_table`
  or `tally`, as in `gpubook.book.*` and `gpubook.models.roofline`);
- text built for a table: an assignment whose value is a string, an f-string, a `join`, a
  list or generator of strings, or a `Markdown(...)`; a function whose every `return` gives
  such text (the row formatter of a table);
- any other assignment whose names no later cell reads (a value only the table uses);
- a loop, branch or `with` block of these.

and it glues or shows a table at least once. A `print`, a bare expression that is not a
table (a tuple of results, a kernel), or a name a later cell reads makes it a teaching cell,
even when it also glues. Such a cell belongs under `remove-cell` when it only feeds `glue`,
`remove-input` when its table stays on the page, `hide-input` when a reader may want to see
how the table was computed.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

HIDDEN_TAGS = frozenset({"remove-cell", "remove-input", "hide-input"})


_TABLE_FUNC = re.compile(r"^(markdown|\w+_markdown|\w+_table|tally)$")
_DISPLAY_CLASSES = {"Markdown", "HTML"}


def _func_name(call: ast.Call) -> str:
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return ""


def _is_glue_call(node: ast.AST) -> bool:
    return isinstance(node, ast.Call) and _func_name(node) == "glue"


def _is_table(node: ast.AST, text_funcs: set[str]) -> bool:
    """An expression that makes a table or Markdown to show: Markdown(...), a table helper."""
    if not isinstance(node, ast.Call):
        return False
    name = _func_name(node)
    return name in _DISPLAY_CLASSES or bool(_TABLE_FUNC.match(name)) or name in text_funcs


def _is_display_table(node: ast.AST, text_funcs: set[str]) -> bool:
    return (isinstance(node, ast.Call) and _func_name(node) == "display" and bool(node.args)
            and all(_is_table(a, text_funcs) for a in node.args))


def _is_text(node: ast.AST | None, text_names: set[str], text_funcs: set[str]) -> bool:
    """An expression whose value is text built for a table (or a Markdown object)."""
    if node is None:
        return False
    if isinstance(node, ast.Constant):
        return isinstance(node.value, str)
    if isinstance(node, ast.JoinedStr):
        return True
    if isinstance(node, ast.Name):
        return node.id in text_names
    if isinstance(node, ast.BinOp) and isinstance(node.op, (ast.Add, ast.Mod)):
        return _is_text(node.left, text_names, text_funcs)
    if isinstance(node, ast.IfExp):
        return _is_text(node.body, text_names, text_funcs) and _is_text(node.orelse, text_names, text_funcs)
    if isinstance(node, (ast.List, ast.Tuple)):
        return bool(node.elts) and all(_is_text(e, text_names, text_funcs) for e in node.elts)
    if isinstance(node, (ast.ListComp, ast.GeneratorExp)):
        return _is_text(node.elt, text_names, text_funcs)
    if isinstance(node, ast.Call):
        if _is_table(node, text_funcs):
            return True
        f = node.func
        if isinstance(f, ast.Attribute) and f.attr in ("join", "format"):
            return True
        return isinstance(f, ast.Name) and f.id == "str"
    return False


def _shows(node: ast.AST) -> bool:
    """Whether a statement prints or displays something (other than glue)."""
    return any(isinstance(c, ast.Call) and _func_name(c) in ("print", "display")
               for c in ast.walk(node))


def _text_function(fn: ast.FunctionDef, text_funcs: set[str]) -> bool:
    """A function that only formats: every return gives text, and it prints nothing."""
    returns = [n for n in ast.walk(fn) if isinstance(n, ast.Return)]
    local: set[str] = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.Assign) and _is_text(n.value, local, text_funcs):
            local |= {t.id for t in n.targets if isinstance(t, ast.Name)}
    return (bool(returns) and not _shows(fn)
            and all(_is_text(r.value, local, text_funcs) for r in returns))


def _stored(node: ast.AST) -> set[str]:
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store)}


def _free(tree: ast.Module) -> set[str]:
    """Names a cell reads before it assigns them (in statement order)."""
    assigned: set[str] = set()
    free: set[str] = set()
    for stmt in tree.body:
        loads = {n.id for n in ast.walk(stmt) if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load)}
        free |= loads - assigned
        assigned |= _stored(stmt)
        if isinstance(stmt, (ast.FunctionDef, ast.ClassDef)):
            assigned.add(stmt.name)
    return free


class _Cell:
    """Walks one cell's statements; records whether each is bookkeeping, and what it stores."""

    def __init__(self, tables: bool) -> None:
        self.tables = tables  # False: the narrower rule of glue-only cells
        self.text_names: set[str] = set()
        self.text_funcs: set[str] = set()
        self.kept: set[str] = set()  # names that must stay unread by later cells
        self.feeds = False  # glues, or shows a table

    def quiet(self, stmt: ast.stmt) -> bool:
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            return True
        if isinstance(stmt, (ast.Pass, ast.Continue, ast.Break)):
            return self.tables
        if isinstance(stmt, ast.Expr):
            v = stmt.value
            if _is_glue_call(v) or (self.tables and (_is_display_table(v, self.text_funcs)
                                                     or _is_table(v, self.text_funcs))):
                self.feeds = True
                return True
            return self.tables and isinstance(v, ast.Constant) and isinstance(v.value, str)  # a docstring
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            if _shows(stmt):
                return False
            if self.tables and _is_text(stmt.value, self.text_names, self.text_funcs):
                self.text_names |= _stored(stmt)
            else:
                self.kept |= _stored(stmt)
            return True
        if isinstance(stmt, ast.FunctionDef):
            if self.tables and _text_function(stmt, self.text_funcs):
                self.text_funcs.add(stmt.name)
                return True
            return False
        if isinstance(stmt, ast.For):
            return all(self.quiet(s) for s in stmt.body + stmt.orelse)  # the loop variable is local
        if isinstance(stmt, ast.If):
            return all(self.quiet(s) for s in stmt.body + stmt.orelse)
        if isinstance(stmt, ast.With):
            return self.tables and all(self.quiet(s) for s in stmt.body)
        return False


def bookkeeping_cells(sources: list[str], tables: bool = True) -> list[int]:
    """Indexes (into `sources`, the code cells in order) of the bookkeeping cells.

    tables=False applies only the narrower rule of cells that feed glue and show nothing."""
    trees: list[ast.Module | None] = []
    for src in sources:
        try:
            trees.append(ast.parse(src))
        except SyntaxError:  # IPython magics and the like: not plain Python, never bookkeeping
            trees.append(None)
    free = [_free(t) if t else set() for t in trees]
    stores = [_stored(t) if t else set() for t in trees]
    found = []
    for i, tree in enumerate(trees):
        if tree is None or not tree.body:
            continue
        cell = _Cell(tables)
        if not all(cell.quiet(s) for s in tree.body) or not cell.feeds:
            continue
        live = False
        for name in cell.kept:
            for j in range(i + 1, len(trees)):
                if name in free[j]:
                    live = True
                    break
                if name in stores[j]:
                    break
        if not live:
            found.append(i)
    return found


def glue_tail(source: str) -> int:
    """How many `glue(..., display=False)` statements end a cell that also does something else.

    Such a tail only feeds the prose; it belongs in a hidden cell right after the cell."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return 0

    def quiet_glue(s: ast.stmt) -> bool:
        return (isinstance(s, ast.Expr) and _is_glue_call(s.value)
                and any(k.arg == "display" and isinstance(k.value, ast.Constant) and k.value.value is False
                        for k in s.value.keywords))

    n = len(body)
    while n and quiet_glue(body[n - 1]):
        n -= 1
    return len(body) - n if n else 0


def imports_myst_nb(source: str) -> bool:
    """Whether a cell imports myst_nb (glue): the book's machinery, not the lesson's."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        return False
    for node in ast.walk(tree):
        if isinstance(node, ast.Import) and any(a.name.split(".")[0] == "myst_nb" for a in node.names):
            return True
        if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "myst_nb":
            return True
    return False


def chapter_code_cells(path: Path) -> list[tuple[str, list[str]]]:
    """(source, tags) of every code cell of a MyST chapter."""
    import jupytext

    nb = jupytext.read(path)
    return [(c.source, list(c.metadata.get("tags", []))) for c in nb.cells if c.cell_type == "code"]
