"""The import graph between switchover's top-level packages and modules has no cycle (issue 16).

Every `import` / `from ... import` in src/switchover counts, including ones inside functions and under
TYPE_CHECKING: a cycle hidden in a function is still a cycle a reader has to untangle.
"""

from __future__ import annotations

import ast
from pathlib import Path

import switchover

SRC = Path(switchover.__file__).parent

# Known cycles owned by other work (remove the entry when it is gone; the test below checks it still exists).
# Empty: every cycle found fails the test.
KNOWN: set[frozenset[str]] = set()


def _unit(module: str) -> str | None:
    parts = module.split(".")
    return parts[1] if parts[0] == "switchover" and len(parts) > 1 else None


def import_graph(src: Path = SRC) -> dict[str, set[str]]:
    """Top-level unit (subpackage or module under switchover/) → the units it imports."""
    graph: dict[str, set[str]] = {}
    for path in src.rglob("*.py"):
        source_unit = path.relative_to(src).parts[0].removesuffix(".py")
        if source_unit == "__init__":
            continue
        deps = graph.setdefault(source_unit, set())
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
                if node.module == "switchover":
                    names = [f"switchover.{a.name}" for a in node.names]
            elif isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            else:
                continue
            for name in names:
                unit = _unit(name)
                if unit and unit != source_unit:
                    deps.add(unit)
    return graph


def cycles(graph: dict[str, set[str]]) -> list[frozenset[str]]:
    """Strongly connected components with more than one unit (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[frozenset[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph.get(v, ())):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = set()
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.add(w)
                if w == v:
                    break
            if len(component) > 1:
                found.append(frozenset(component))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_cycle_finder_finds_a_cycle_and_no_false_one() -> None:
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [frozenset({"a", "b", "c"})]
    assert cycles({"a": {"b"}, "b": {"c"}, "c": set()}) == []


def test_graph_sees_imports_inside_functions(tmp_path: Path) -> None:
    (tmp_path / "a").mkdir()
    (tmp_path / "a" / "m.py").write_text("def f():\n    from switchover.b.x import y\n")
    (tmp_path / "b.py").write_text("from switchover import a\nimport switchover.c\n")
    assert import_graph(tmp_path) == {"a": {"b"}, "b": {"a", "c"}}


def test_no_package_cycle_beyond_the_known_ones() -> None:
    found = set(cycles(import_graph()))
    assert found <= KNOWN, f"new import cycle(s) between packages: {[sorted(c) for c in found - KNOWN]}"
    assert found >= KNOWN, f"known cycle(s) gone, drop them from KNOWN: {[sorted(c) for c in KNOWN - found]}"


def test_config_imports_only_leaf_modules() -> None:
    """Every package may read switchover.yaml, so config must not import any package that does."""
    graph = import_graph()
    assert graph["config"] <= {"errors", "inputs", "yamlfile", "expr", "ledger_record", "wire"}, graph["config"]
