"""Prometheus series defined in a release's Python source: every `Gauge(name=...)`, `Counter(...)`,
`Histogram(...)`, `Summary(...)` (or an engine's wrapper such as `self._gauge_cls(...)`) whose name carries the
engine's prefix, with its type and file.

Names are kept as scraped: prometheus_client exposes a counter `x` (or `x_total`) as `x_total`, so counters are
stored with exactly one `_total`; histograms and summaries by their base name (no _bucket/_sum/_count).
"""

from __future__ import annotations

import ast
import re

from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import Const, text_of

_TYPES = (("histogram", "histogram"), ("summary", "summary"), ("counter", "counter"), ("gauge", "gauge"))


def metrics_in(
    source: Source, paths: tuple[str, ...], *, prefix: str, hidden_when: str | None = None
) -> dict[str, dict[str, str]]:
    """name -> {path, type} for the series defined in `paths` (files, or folders ending with '/').

    A definition under an `if` whose condition names `hidden_when` (vLLM's --show-hidden-metrics-for-version) is
    not served by default and is left out."""
    ev = Evaluator(source)
    found: dict[str, dict[str, str]] = {}
    for path in _files(source, paths):
        mod_name = path.removesuffix(".py").replace("/", ".").removesuffix(".__init__")
        mod = source.module(mod_name)
        if mod is None:
            continue
        for call, hidden, scope in _calls(mod.node, hidden_when):
            kind = _kind(call)
            if kind is None or hidden:
                continue
            name = _name(ev, mod, call)
            names = [name] if name is not None else _through_variable(call, scope, prefix)
            for name in names:
                if not name.startswith(prefix):
                    continue
                if kind == "counter":
                    name = name.removesuffix("_total") + "_total"
                found.setdefault(name, {"path": path, "type": kind})
    return found


def _files(source: Source, paths: tuple[str, ...]) -> list[str]:
    out: list[str] = []
    for path in paths:
        out += source.tree.paths(path, ".py") if path.endswith("/") else [path]
    return sorted(set(out))


def _calls(tree: ast.AST, hidden_when: str | None) -> list[tuple[ast.Call, bool, ast.AST]]:
    """Every call in the module, each with whether it sits under a hiding `if`, and its function (or module)."""
    out: list[tuple[ast.Call, bool, ast.AST]] = []

    def walk(node: ast.AST, hidden: bool, scope: ast.AST) -> None:
        if isinstance(node, ast.If) and hidden_when and hidden_when in text_of(node.test):
            for stmt in node.body:
                walk(stmt, True, scope)
            for stmt in node.orelse:
                walk(stmt, hidden, scope)
            return
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            scope = node
        if isinstance(node, ast.Call):
            out.append((node, hidden, scope))
        for child in ast.iter_child_nodes(node):
            walk(child, hidden, scope)

    walk(tree, False, tree)
    return out


def _through_variable(call: ast.Call, scope: ast.AST, prefix: str) -> list[str]:
    """Names given through a variable in the same function: `name = "vllm:x"` before `Gauge(name=name)`, or
    `for name, doc in [("vllm:x", "..."), ...]: Counter(name=name)` (a loop or a comprehension)."""
    node = next((k.value for k in call.keywords if k.arg == "name"), call.args[0] if call.args else None)
    if not isinstance(node, ast.Name):
        return []
    var = node.id
    literals: list[ast.expr] = []
    lists: dict[str, list[ast.expr]] = {}
    for stmt in ast.walk(scope):
        if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
            lists.setdefault(stmt.targets[0].id, []).append(stmt.value)
    literals += lists.get(var, [])
    for loop in ast.walk(scope):
        if not isinstance(loop, ast.For | ast.comprehension):
            continue
        target = loop.target
        slots = [target] if isinstance(target, ast.Name) else list(target.elts) if isinstance(target, ast.Tuple) else []
        index = next((i for i, t in enumerate(slots) if isinstance(t, ast.Name) and t.id == var), None)
        if index is None:
            continue
        sources = lists.get(loop.iter.id, []) if isinstance(loop.iter, ast.Name) else [loop.iter]
        for source in sources:
            for elt in source.elts if isinstance(source, ast.List | ast.Tuple) else []:
                picked = (
                    elt.elts[index]
                    if isinstance(elt, ast.Tuple) and index < len(elt.elts)
                    else (elt if isinstance(target, ast.Name) else None)
                )
                if picked is not None:
                    literals.append(picked)
    return [
        lit.value
        for lit in literals
        if isinstance(lit, ast.Constant)
        and isinstance(lit.value, str)
        and re.fullmatch(re.escape(prefix) + r"[A-Za-z_:][\w:]*", lit.value)
    ]


def _kind(call: ast.Call) -> str | None:
    func = call.func
    name = func.attr if isinstance(func, ast.Attribute) else func.id if isinstance(func, ast.Name) else ""
    low = name.lower()
    if re.search(r"labels|observe|inc|set|remove|clear|register", low) and not re.search(r"_cls$|^[A-Z]", name):
        return None
    return next((kind for needle, kind in _TYPES if needle in low), None)


def _name(ev: Evaluator, mod: object, call: ast.Call) -> str | None:
    node = next((k.value for k in call.keywords if k.arg == "name"), call.args[0] if call.args else None)
    if node is None:
        return None
    value = ev.eval(node, mod, {})  # type: ignore[arg-type]
    return value.value if isinstance(value, Const) and isinstance(value.value, str) else None
