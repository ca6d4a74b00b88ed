"""How the source evaluator (`pyeval`) reads each kind of Python expression and statement, and the few builtins and
container methods that parser-building code uses (dict and list methods, `get_args`, `dataclasses.field`, ...)."""

from __future__ import annotations

import ast
import operator
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from switchover.engines.extract.pyvalues import (
    Break,
    ClassV,
    Const,
    Ext,
    FuncV,
    Generic,
    Instance,
    Map,
    Member,
    Method,
    Module,
    ModuleV,
    Return,
    Seq,
    Super,
    Unknown,
    V,
    deep_copy,
    plain,
    text_of,
)

if TYPE_CHECKING:
    from switchover.engines.extract.pyeval import Evaluator

Env = dict[str, V]
_TYPING_ORIGINS = {
    "List": "list",
    "Dict": "dict",
    "Tuple": "tuple",
    "Set": "set",
    "FrozenSet": "set",
    "Type": "type",
    "Sequence": "list",
    "Iterable": "list",
    "Mapping": "dict",
}
FIELD_MARK = "__field__"


# --- expressions
def _constant(ev: Evaluator, node: ast.Constant, mod: Module, env: Env) -> V:
    return Const(node.value)


def _name(ev: Evaluator, node: ast.Name, mod: Module, env: Env) -> V:
    if node.id in env:
        return env[node.id]
    if node.id in ("True", "False", "None"):
        return Const({"True": True, "False": False, "None": None}[node.id])
    return ev.module_value(mod, node.id)


def _attribute(ev: Evaluator, node: ast.Attribute, mod: Module, env: Env) -> V:
    return ev.attr(ev.eval(node.value, mod, env), node.attr)


def _sequence(ev: Evaluator, node: ast.List | ast.Tuple | ast.Set, mod: Module, env: Env) -> V:
    items: list[V] = []
    for elt in node.elts:
        if isinstance(elt, ast.Starred):
            inner = ev.iterate(ev.eval(elt.value, mod, env))
            if inner is None:
                return Unknown(text_of(node))
            items += list(inner)
        else:
            items.append(ev.eval(elt, mod, env))
    return Seq(items)


def _dict(ev: Evaluator, node: ast.Dict, mod: Module, env: Env) -> V:
    out: dict[Any, V] = {}
    for k, v in zip(node.keys, node.values, strict=True):
        if k is None:
            inner = ev.eval(v, mod, env)
            if isinstance(inner, Map):
                out.update(inner.items)
            continue
        key = ev.eval(k, mod, env)
        if isinstance(key, Const | Member):
            out[plain(key) if isinstance(key, Member) else key.value] = ev.eval(v, mod, env)
    return Map(out)


def _joined(ev: Evaluator, node: ast.JoinedStr, mod: Module, env: Env) -> V:
    parts = []
    for value in node.values:
        if isinstance(value, ast.Constant):
            parts.append(str(value.value))
            continue
        assert isinstance(value, ast.FormattedValue)
        inner = ev.eval(value.value, mod, env)
        if isinstance(inner, Const) and value.format_spec is None and value.conversion in (-1, 115):
            parts.append(str(inner.value))
        else:
            return Unknown(text_of(node))
    return Const("".join(parts))


_BINOPS: dict[type, Callable[[Any, Any], Any]] = {
    ast.Add: operator.add,
    ast.Mult: operator.mul,
    ast.Sub: operator.sub,
    ast.Mod: operator.mod,
}


def _binop(ev: Evaluator, node: ast.BinOp, mod: Module, env: Env) -> V:
    left, right = ev.eval(node.left, mod, env), ev.eval(node.right, mod, env)
    if isinstance(node.op, ast.BitOr) and not (isinstance(left, Const) and isinstance(right, Const)):
        return Generic("Union", [left, right])  # X | Y in an annotation
    if isinstance(node.op, ast.Add) and isinstance(left, Seq) and isinstance(right, Seq):
        return Seq(left.items + right.items)
    op = _BINOPS.get(type(node.op))
    if op is not None and isinstance(left, Const) and isinstance(right, Const):
        try:
            return Const(op(left.value, right.value))
        except Exception:
            return Unknown(text_of(node))
    return Unknown(text_of(node))


def _unary(ev: Evaluator, node: ast.UnaryOp, mod: Module, env: Env) -> V:
    inner = ev.eval(node.operand, mod, env)
    if isinstance(inner, Const) and isinstance(node.op, ast.USub) and isinstance(inner.value, int | float):
        return Const(-inner.value)
    if isinstance(inner, Const) and isinstance(node.op, ast.Not):
        return Const(not inner.value)
    return Unknown(text_of(node))


def _subscript(ev: Evaluator, node: ast.Subscript, mod: Module, env: Env) -> V:
    obj = ev.eval(node.value, mod, env)
    if isinstance(obj, Ext | ClassV | Generic):
        inner = node.slice
        elts = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        origin = obj.short if isinstance(obj, Ext) else (obj.node.name if isinstance(obj, ClassV) else obj.origin)
        # a string is a forward reference where a type is expected; Literal values and Annotated metadata are data
        args = [
            ev.annotation(e, mod)
            if isinstance(e, ast.Constant)
            and isinstance(e.value, str)
            and origin != "Literal"
            and not (origin == "Annotated" and i > 0)
            else ev.eval(e, mod, env)
            for i, e in enumerate(elts)
        ]
        if isinstance(obj, Generic) and obj.origin == "Annotated" and not obj.args:
            return Generic("Annotated", args)
        return Generic(_TYPING_ORIGINS.get(origin, origin), args)
    key = ev.eval(node.slice, mod, env)
    if isinstance(obj, Map) and isinstance(key, Const):
        return obj.items.get(key.value, Unknown(text_of(node)))
    if isinstance(obj, Seq) and isinstance(key, Const) and isinstance(key.value, int):
        return obj.items[key.value] if -len(obj.items) <= key.value < len(obj.items) else Unknown(text_of(node))
    return Unknown(text_of(node))


def _call(ev: Evaluator, node: ast.Call, mod: Module, env: Env) -> V:
    if isinstance(node.func, ast.Name) and node.func.id == "super" and "__class__" in env:
        owner = env["__class__"]
        assert isinstance(owner, ClassV)
        first = next(iter(v for k, v in env.items() if k in ("self", "cls")), None)
        return Super(owner, first)
    func = ev.eval(node.func, mod, env)
    args: list[V] = []
    for a in node.args:
        if isinstance(a, ast.Starred):
            inner = ev.iterate(ev.eval(a.value, mod, env))
            args += list(inner) if inner is not None else []
        else:
            args.append(ev.eval(a, mod, env))
    kwargs: dict[str, V] = {}
    for kw in node.keywords:
        value = ev.eval(kw.value, mod, env)
        if kw.arg is not None:
            kwargs[kw.arg] = value
        elif isinstance(value, Map):
            kwargs.update({str(k): v for k, v in value.items.items()})
        else:
            kwargs["**"] = value  # unknown keyword arguments: said, not guessed
    ev.site = mod
    out = ev.call(func, args, kwargs)
    return Unknown(text_of(node)) if isinstance(out, Unknown) and out.text.endswith("(...)") else out


def _comprehension(ev: Evaluator, node: ast.ListComp | ast.SetComp | ast.GeneratorExp, mod: Module, env: Env) -> V:
    if len(node.generators) != 1:
        return Unknown(text_of(node))
    gen = node.generators[0]
    items = ev.iterate(ev.eval(gen.iter, mod, env))
    if items is None:
        return Unknown(text_of(node))
    out = []
    for item in items:
        local = dict(env)
        ev.assign(gen.target, item, mod, local)
        tests = [ev.eval(t, mod, local) for t in gen.ifs]
        if any(isinstance(t, Const) and not t.value for t in tests):
            continue
        if any(not isinstance(t, Const) for t in tests):
            return Unknown(text_of(node))
        out.append(ev.eval(node.elt, mod, local))
    return Seq(out)


def _dictcomp(ev: Evaluator, node: ast.DictComp, mod: Module, env: Env) -> V:
    if len(node.generators) != 1 or node.generators[0].ifs:
        return Unknown(text_of(node))
    gen = node.generators[0]
    items = ev.iterate(ev.eval(gen.iter, mod, env))
    if items is None:
        return Unknown(text_of(node))
    out: dict[Any, V] = {}
    for item in items:
        local = dict(env)
        ev.assign(gen.target, item, mod, local)
        key = ev.eval(node.key, mod, local)
        if isinstance(key, Const):
            out[key.value] = ev.eval(node.value, mod, local)
    return Map(out)


def _ifexp(ev: Evaluator, node: ast.IfExp, mod: Module, env: Env) -> V:
    test = ev.eval(node.test, mod, env)
    if isinstance(test, Const):
        return ev.eval(node.body if test.value else node.orelse, mod, env)
    return Unknown(text_of(node))


def _lambda(ev: Evaluator, node: ast.Lambda, mod: Module, env: Env) -> V:
    return FuncV(mod, node, closure=dict(env))


EXPR: dict[type, Callable[..., V]] = {
    ast.Constant: _constant,
    ast.Name: _name,
    ast.Attribute: _attribute,
    ast.List: _sequence,
    ast.Tuple: _sequence,
    ast.Set: _sequence,
    ast.Dict: _dict,
    ast.JoinedStr: _joined,
    ast.BinOp: _binop,
    ast.UnaryOp: _unary,
    ast.Subscript: _subscript,
    ast.Call: _call,
    ast.ListComp: _comprehension,
    ast.SetComp: _comprehension,
    ast.GeneratorExp: _comprehension,
    ast.DictComp: _dictcomp,
    ast.IfExp: _ifexp,
    ast.Lambda: _lambda,
}


# --- statements
def _s_assign(ev: Evaluator, stmt: ast.Assign, mod: Module, env: Env) -> None:
    value = ev.eval(stmt.value, mod, env)
    for target in stmt.targets:
        ev.assign(target, value, mod, env)


def _s_annassign(ev: Evaluator, stmt: ast.AnnAssign, mod: Module, env: Env) -> None:
    if stmt.value is not None:
        ev.assign(stmt.target, ev.eval(stmt.value, mod, env), mod, env)


def _s_augassign(ev: Evaluator, stmt: ast.AugAssign, mod: Module, env: Env) -> None:
    fake = ast.BinOp(left=_load(stmt.target), op=stmt.op, right=stmt.value)
    ev.assign(stmt.target, ev.eval(fake, mod, env), mod, env)


def _load(target: ast.expr) -> ast.expr:
    return ast.fix_missing_locations(ast.parse(ast.unparse(target), mode="eval").body)


def _s_expr(ev: Evaluator, stmt: ast.Expr, mod: Module, env: Env) -> None:
    if isinstance(stmt.value, ast.Call):
        ev.eval(stmt.value, mod, env)


def _s_return(ev: Evaluator, stmt: ast.Return, mod: Module, env: Env) -> None:
    raise Return(ev.eval(stmt.value, mod, env) if stmt.value is not None else Const(None))


def _s_if(ev: Evaluator, stmt: ast.If, mod: Module, env: Env) -> None:
    """A known condition runs its branch; an unknown one runs both (what either could add is read)."""
    test = ev.eval(stmt.test, mod, env)
    if isinstance(test, Const):
        ev.exec_block(stmt.body if test.value else stmt.orelse, mod, env)
        return
    for branch in (stmt.body, stmt.orelse):
        try:
            ev.exec_block(branch, mod, env)
        except (Return, Break):
            continue  # a branch that leaves early does not end the other


def _s_for(ev: Evaluator, stmt: ast.For, mod: Module, env: Env) -> None:
    items = ev.iterate(ev.eval(stmt.iter, mod, env))
    if items is None:
        return
    for item in items:
        ev.assign(stmt.target, item, mod, env)
        try:
            ev.exec_block(stmt.body, mod, env)
        except Break:
            return


def _s_block(ev: Evaluator, stmt: ast.With | ast.Try, mod: Module, env: Env) -> None:
    ev.exec_block(stmt.body, mod, env)
    if isinstance(stmt, ast.Try):
        ev.exec_block(stmt.orelse, mod, env)
        ev.exec_block(stmt.finalbody, mod, env)


def _s_delete(ev: Evaluator, stmt: ast.Delete, mod: Module, env: Env) -> None:
    for target in stmt.targets:
        if isinstance(target, ast.Subscript):
            obj, key = ev.eval(target.value, mod, env), ev.eval(target.slice, mod, env)
            if isinstance(obj, Map) and isinstance(key, Const):
                obj.items.pop(key.value, None)


def _s_def(ev: Evaluator, stmt: ast.FunctionDef, mod: Module, env: Env) -> None:
    env[stmt.name] = FuncV(mod, stmt, closure=env)


def _s_import(ev: Evaluator, stmt: ast.Import | ast.ImportFrom, mod: Module, env: Env) -> None:
    """An import inside a function binds like a module-level one."""
    for alias in stmt.names:
        name = alias.asname or alias.name.split(".")[0]
        if alias.name == "*":
            continue
        if isinstance(stmt, ast.ImportFrom):
            env[name] = ev.import_from(mod, stmt, name)
        else:
            env[name] = ev.import_name(stmt, name)


def _s_break(ev: Evaluator, stmt: ast.stmt, mod: Module, env: Env) -> None:
    raise Break()


STMT: dict[type, Callable[..., None]] = {
    ast.Assign: _s_assign,
    ast.AnnAssign: _s_annassign,
    ast.AugAssign: _s_augassign,
    ast.Expr: _s_expr,
    ast.Return: _s_return,
    ast.If: _s_if,
    ast.For: _s_for,
    ast.With: _s_block,
    ast.Try: _s_block,
    ast.Delete: _s_delete,
    ast.FunctionDef: _s_def,
    ast.Import: _s_import,
    ast.ImportFrom: _s_import,
    ast.Break: _s_break,
    ast.Raise: _s_break,
}


# --- builtins (by dotted name) and container methods
def _b_list(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    if not args:
        return Seq([])
    items = ev.iterate(args[0])
    return Seq(list(items)) if items is not None else Unknown("list(...)")


def _b_sorted(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    out = _b_list(ev, args[:1], {})
    if isinstance(out, Seq) and all(isinstance(i, Const) for i in out.items) and "key" not in kwargs:
        try:
            return Seq(
                sorted(
                    out.items,
                    key=lambda c: c.value,  # type: ignore[attr-defined]
                    reverse=bool(plain(kwargs["reverse"]) if "reverse" in kwargs else False),
                )
            )
        except TypeError:
            return out
    return out


def _b_dict(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    base = deep_copy(args[0]) if args and isinstance(args[0], Map) else Map({})
    assert isinstance(base, Map)
    base.items.update(kwargs)
    return base


def _b_get_args(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    if args and isinstance(args[0], Generic):
        return Seq(list(args[0].args))
    return Unknown("get_args(...)")


def _b_field(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    out: dict[Any, V] = {FIELD_MARK: Const(True)}
    if args:
        out["default"] = args[0]
    out.update(kwargs)
    return Map(out)


def _b_str(ev: Evaluator, args: list[V], kwargs: dict[str, V]) -> V:
    if args and isinstance(args[0], Const):
        return Const(str(args[0].value))
    return Unknown("str(...)")


BUILTINS: dict[str, Callable[[Evaluator, list[V], dict[str, V]], V]] = {
    "list": _b_list,
    "tuple": _b_list,
    "set": _b_list,
    "frozenset": _b_list,
    "sorted": _b_sorted,
    "dict": _b_dict,
    "copy.deepcopy": lambda ev, a, k: deep_copy(a[0]) if a else Unknown("deepcopy"),
    "copy.copy": lambda ev, a, k: deep_copy(a[0]) if a else Unknown("copy"),
    "typing.get_args": _b_get_args,
    "typing_extensions.get_args": _b_get_args,
    "get_args": _b_get_args,
    "dataclasses.field": _b_field,
    "field": _b_field,
    "pydantic.Field": _b_field,
    "msgspec.field": _b_field,
    "str": _b_str,
}

_STR_METHODS = {
    "replace",
    "lower",
    "upper",
    "strip",
    "lstrip",
    "rstrip",
    "removeprefix",
    "removesuffix",
    "split",
    "join",
    "format",
    "startswith",
    "endswith",
    "title",
    "capitalize",
}


def call_method(ev: Evaluator, method: Method, args: list[V], kwargs: dict[str, V]) -> V:
    """A method of a container or string the evaluator holds."""
    obj, name = method.obj, method.name
    if isinstance(obj, Map):
        return _map_method(ev, obj, name, args)
    if isinstance(obj, Seq):
        return _seq_method(ev, obj, name, args)
    if isinstance(obj, Const) and isinstance(obj.value, str) and name in _STR_METHODS:
        try:
            if name == "join":
                items = ev.iterate(args[0]) if args else None
                return Const(obj.value.join(str(plain(i)) for i in items)) if items is not None else Unknown("join")
            return Const(
                getattr(obj.value, name)(*[plain(a) for a in args], **{k: plain(v) for k, v in kwargs.items()})
            )
        except (ValueError, TypeError, KeyError, IndexError):
            return Unknown(f"str.{name}(...)")
    return Unknown(f".{name}(...)")


def _map_method(ev: Evaluator, obj: Map, name: str, args: list[V]) -> V:
    key = plain(args[0]) if args and isinstance(args[0], Const) else None
    if name == "items":
        return Seq([Seq([Const(k), v]) for k, v in obj.items.items()])
    if name == "keys":
        return Seq([Const(k) for k in obj.items])
    if name == "values":
        return Seq(list(obj.items.values()))
    if name in ("get", "pop", "setdefault"):
        fallback = args[1] if len(args) > 1 else Const(None)
        if name == "pop":
            return obj.items.pop(key, fallback)
        if name == "setdefault":
            return obj.items.setdefault(key, fallback)
        return obj.items.get(key, fallback)
    if name == "update" and args and isinstance(args[0], Map):
        obj.items.update(args[0].items)
        return Const(None)
    if name == "copy":
        return Map(dict(obj.items))
    return Unknown(f"dict.{name}(...)")


def _seq_method(ev: Evaluator, obj: Seq, name: str, args: list[V]) -> V:
    if name == "append" and args:
        obj.items.append(args[0])
    elif name == "extend" and args:
        more = ev.iterate(args[0])
        obj.items.extend(more or [])
    elif name in ("insert",) and len(args) == 2 and isinstance(args[0], Const):
        obj.items.insert(int(args[0].value), args[1])
    elif name == "copy":
        return Seq(list(obj.items))
    elif name == "index" and args:
        return next(
            (
                Const(i)
                for i, v in enumerate(obj.items)
                if isinstance(v, Const) and isinstance(args[0], Const) and v.value == args[0].value
            ),
            Unknown("index"),
        )
    else:
        return Unknown(f"list.{name}(...)")
    return Const(None)


def is_field_spec(value: V) -> bool:
    return isinstance(value, Map) and FIELD_MARK in value.items


__all__ = ["BUILTINS", "EXPR", "STMT", "Instance", "ModuleV", "call_method", "is_field_spec"]
