"""gpubook's layers, read from its import graph: each module imports only its own layer and those
below it, models and verify do not import each other, no import cycle, no module over 400 lines.

Every import counts, a function's deferred one too: it is still a dependency.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PKG = Path(__file__).resolve().parents[1] / "gpubook"
# Lowest first. Two sub-packages may share a layer; they then must not import each other.
LAYERS = {"facts": 0, "compile": 1, "run": 2, "verify": 3, "models": 3, "book": 4}
MAX_LINES = 400


def module_name(path: Path, root: Path = PKG) -> str:
    parts = list(path.relative_to(root.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def import_graph(root: Path = PKG) -> dict[str, set[str]]:
    """Module -> the gpubook modules it imports (a package's __init__ counts as the package)."""
    files = {module_name(p, root): p for p in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for mod, path in files.items():
        package = mod if path.name == "__init__.py" else mod.rpartition(".")[0]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom):
                if node.level:
                    base = package.split(".")
                    base = base[: len(base) - node.level + 1]
                    target = ".".join(base + ([node.module] if node.module else []))
                else:
                    target = node.module or ""
                if not target.startswith("gpubook"):
                    continue
                for alias in node.names:  # `from .pkg import mod` names a module, not only a symbol
                    deps.add(f"{target}.{alias.name}" if f"{target}.{alias.name}" in files else target)
            elif isinstance(node, ast.Import):
                deps |= {a.name for a in node.names if a.name.startswith("gpubook")}
        graph[mod] = {d for d in deps if d in files and d != mod}
    return graph


def layer(mod: str) -> tuple[str, int] | None:
    parts = mod.split(".")
    if len(parts) < 2 or parts[1] not in LAYERS:
        return None  # gpubook itself and its __main__: the package's front, above every layer
    return parts[1], LAYERS[parts[1]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def violations(graph: dict[str, set[str]]) -> list[str]:
    bad = []
    for mod, deps in sorted(graph.items()):
        here = layer(mod)
        if here is None:
            continue
        for dep in sorted(deps):
            there = layer(dep)
            if there is None:
                bad.append(f"{mod} imports the package front {dep}")
            elif there[1] > here[1]:
                bad.append(f"{mod} ({here[0]}) imports {dep} ({there[0]}), a higher layer")
            elif there[1] == here[1] and there[0] != here[0]:
                bad.append(f"{mod} ({here[0]}) imports {dep} ({there[0]}), its peer layer")
    return bad


def test_every_module_sits_in_a_layer():
    loose = [p.name for p in PKG.glob("*.py") if p.name not in ("__init__.py", "__main__.py")]
    assert not loose, f"modules outside the layers: {loose}"
    assert {p.name for p in PKG.iterdir() if p.is_dir() and (p / "__init__.py").exists()} == set(LAYERS)


def test_imports_point_down_and_never_round():
    graph = import_graph()
    assert not violations(graph), "\n".join(violations(graph))
    assert not cycles(graph), cycles(graph)


def test_no_module_is_over_the_limit():
    long = {module_name(p): n for p in PKG.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, long


@pytest.mark.parametrize("planted, message", [
    ({"gpubook.facts.hardware": {"gpubook.run.bench"}}, "a higher layer"),
    ({"gpubook.models.fa4": {"gpubook.verify.check"}}, "its peer layer"),
])
def test_a_planted_upward_or_sideways_edge_is_reported(planted, message):
    graph = import_graph()
    for mod, deps in planted.items():
        graph[mod] = graph[mod] | deps
    assert any(message in v for v in violations(graph))


def test_a_planted_cycle_is_reported(tmp_path):
    pkg = tmp_path / "gpubook" / "run"
    pkg.mkdir(parents=True)
    (tmp_path / "gpubook" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    (pkg / "a.py").write_text("from . import b\n")
    (pkg / "b.py").write_text("def f():\n    from .a import x\n")
    assert cycles(import_graph(tmp_path / "gpubook")) == [["gpubook.run.a", "gpubook.run.b"]]
