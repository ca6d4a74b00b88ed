"""Names in vLLM's parser registries at a release (`ToolParserManager`, `ReasoningParserManager`): classes
registered by decorator in the modules the package's `__init__` imports (`@ToolParserManager.register_module("x")`),
and names registered lazily when the `__init__` runs (`register_lazy_module("x", ...)`, often in a loop over a dict).
A parser file the package does not import is not registered, so it is not counted."""

from __future__ import annotations

import ast

from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import Const, FuncV, Method, Module, Seq, V, plain

_LAZY = ("register_lazy_module",)
_DECORATOR = ("register_module",)


def registered_names(ev: Evaluator, source: Source, manager: str, packages: tuple[str, ...]) -> list[str] | None:
    """Every name registered with `manager` when the first of `packages` the release has is imported."""
    package = next((p for p in packages if source.module(p) is not None), None)
    if package is None:
        return None
    init = source.module(package)
    assert init is not None
    names = set(_lazy(ev, init, manager))
    for dotted in _imported(init, package):
        mod = source.module(dotted)
        if mod is not None:
            names |= _decorated(mod.node, manager)
    names |= _decorated(init.node, manager)
    return sorted(names)


def _lazy(ev: Evaluator, init: Module, manager: str) -> list[str]:
    """Run the package's `__init__` body and record the names given to the lazy registration call."""
    seen: list[str] = []

    def hook(e: Evaluator, func: V, args: list[V], kwargs: dict[str, V]) -> V | None:
        name = (
            func.node.name
            if isinstance(func, FuncV) and hasattr(func.node, "name")
            else (func.name if isinstance(func, Method) else "")
        )
        if name not in _LAZY:
            return None
        given = kwargs.get("name", args[0] if args else None)
        seen.extend(_strings(given))
        return Const(None)

    ev.hooks.insert(0, hook)
    try:
        ev.exec_block(init.node.body, init, {})
    finally:
        ev.hooks.remove(hook)
    return seen


def _strings(value: V | None) -> list[str]:
    if value is None:
        return []
    try:
        got = plain(value)
    except ValueError:
        return []
    if isinstance(got, str):
        return [got]
    return [g for g in got if isinstance(g, str)] if isinstance(got, list) else []


def _imported(init: Module, package: str) -> list[str]:
    """Modules inside the package that its `__init__` imports."""
    out = []
    for node in ast.walk(init.node):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            base = f"{package}.{base}" if base else package
        if base.startswith(package + "."):
            out.append(base)
        elif base == package:
            out += [f"{package}.{a.name}" for a in node.names]
    return out


def _decorated(tree: ast.AST, manager: str) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(tree):
        if not isinstance(node, ast.ClassDef):
            continue
        for deco in node.decorator_list:
            if not (
                isinstance(deco, ast.Call)
                and isinstance(deco.func, ast.Attribute)
                and deco.func.attr in _DECORATOR
                and ast.unparse(deco.func.value).endswith(manager)
            ):
                continue
            arg = next(
                (k.value for k in deco.keywords if k.arg in ("name", "module_name")),
                deco.args[0] if deco.args else None,
            )
            if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
                names.add(arg.value)
            elif isinstance(arg, ast.List | ast.Tuple):
                names |= {e.value for e in arg.elts if isinstance(e, ast.Constant) and isinstance(e.value, str)}
            elif arg is None:
                names.add(node.name)  # registered under the class name
    return names


__all__ = ["Seq", "registered_names"]
