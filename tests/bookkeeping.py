"""Which cells of a chapter only feed `glue`: the bookkeeping cells a reader should not see.

A code cell is bookkeeping when it calls `glue` at least once and does nothing else a reader
could learn from: every statement is a `glue(...)` call, an import, or an assignment (or a
loop or branch of these) whose names no later cell reads. Such a cell belongs under
`remove-cell` (or `remove-input` / `hide-input` where it draws a figure the reader may want
to inspect).
"""

from __future__ import annotations

import ast
from pathlib import Path


def _is_glue(node: ast.AST) -> bool:
    if isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        f = node.value.func
        return (isinstance(f, ast.Name) and f.id == "glue") or (isinstance(f, ast.Attribute) and f.attr == "glue")
    return False


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


def _quiet(stmt: ast.stmt) -> bool:
    """A statement that shows the reader nothing: glue, imports, assignments, loops of them."""
    if _is_glue(stmt) or isinstance(stmt, (ast.Import, ast.ImportFrom, ast.Assign, ast.AugAssign, ast.AnnAssign)):
        if isinstance(stmt, (ast.Assign, ast.AugAssign, ast.AnnAssign)):
            calls = [n for n in ast.walk(stmt) if isinstance(n, ast.Call)]
            return not any(isinstance(c.func, ast.Name) and c.func.id in ("print", "display") for c in calls)
        return True
    if isinstance(stmt, (ast.For, ast.If)):
        return all(_quiet(s) for s in stmt.body + stmt.orelse)
    return False


def bookkeeping_cells(sources: list[str]) -> list[int]:
    """Indexes (into `sources`, the code cells in order) of the cells that only feed glue."""
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
        if tree is None or not tree.body or not any(_is_glue(n) for n in ast.walk(tree) if isinstance(n, ast.Expr)):
            continue
        if not all(_quiet(s) for s in tree.body):
            continue
        live = set()
        for name in stores[i]:
            for j in range(i + 1, len(trees)):
                if name in free[j]:
                    live.add(name)
                    break
                if name in stores[j]:
                    break
        if not live:
            found.append(i)
    return found


def chapter_code_cells(path: Path) -> list[tuple[str, list[str]]]:
    """(source, tags) of every code cell of a MyST chapter."""
    import jupytext

    nb = jupytext.read(path)
    return [(c.source, list(c.metadata.get("tags", []))) for c in nb.cells if c.cell_type == "code"]
