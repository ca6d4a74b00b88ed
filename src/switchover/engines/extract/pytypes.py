"""Type hints read from source as the sets engines turn into argparse keywords: `Optional[Literal['a', 'b']]` is
{Literal['a', 'b'], None}; a dataclass, an enum, a dict subclass and a builtin are told apart without importing."""

from __future__ import annotations

import ast
from dataclasses import dataclass

from switchover.engines.extract.pyeval import Evaluator
from switchover.engines.extract.pynodes import is_field_spec
from switchover.engines.extract.pyvalues import ClassV, Const, Ext, FieldDef, Generic, Instance, Map, Seq, Unknown, V

BUILTIN_TYPES = {"bool", "int", "float", "str", "dict", "list", "tuple", "set", "bytes", "type"}
_DATACLASS_MARKS = ("dataclass", "config", "pydantic_dataclass")
# wrappers a type hint reads through (pydantic's SkipValidation[int] is an int to argparse)
_WRAPPERS = {"Annotated", "SkipValidation", "InitVar", "Required", "NotRequired", "ReadOnly", "Final"}


@dataclass(frozen=True)
class Atom:
    """One member of a type hint's union: a builtin (`int`), `None`, `Literal` (with values), `dataclass`, `enum`,
    `dictlike` or `other` (a class the CLI reads as a string); `args` for generics (list[int] -> int)."""

    kind: str
    values: tuple[V, ...] = ()
    name: str = ""


def atoms(ev: Evaluator, hint: V) -> list[Atom]:
    """The members of a hint's union, aliases and Annotated[...] unwrapped."""
    if isinstance(hint, Const) and hint.value is None:
        return [Atom("None")]
    if isinstance(hint, Generic):
        origin = hint.origin
        if origin == "Optional":
            return [*_flat(ev, hint.args), Atom("None")]
        if origin in ("Union", "UnionType"):
            return _flat(ev, hint.args)
        if origin in _WRAPPERS:
            return atoms(ev, hint.args[0]) if hint.args else [Atom("other")]
        if origin == "Literal":
            return [Atom("Literal", tuple(hint.args))]
        return [Atom(origin if origin in BUILTIN_TYPES else "other", tuple(hint.args), origin)]
    if isinstance(hint, Ext):
        short = hint.short
        if short == "None" or hint.dotted == "types.NoneType":
            return [Atom("None")]
        return [Atom(short if short in BUILTIN_TYPES else "other", name=hint.dotted)]
    if isinstance(hint, ClassV):
        return [Atom(class_kind(ev, hint), name=hint.node.name)]
    return [Atom("other", name=getattr(hint, "text", ""))]


def _flat(ev: Evaluator, hints: list[V]) -> list[Atom]:
    return [a for h in hints for a in atoms(ev, h)]


def class_kind(ev: Evaluator, cls: ClassV) -> str:
    """dataclass (a config the CLI reads as JSON), enum, dictlike (a dict / TypedDict subclass) or other."""
    if ev.is_enum(cls):
        return "enum"
    bases = {b.rsplit(".", 1)[-1] for b in ev.base_names(cls)}
    if bases & {"dict", "TypedDict", "Dict"}:
        return "dictlike"
    for klass in ev.mro(cls):
        for deco in klass.node.decorator_list:
            head = ast.unparse(deco.func if isinstance(deco, ast.Call) else deco).rsplit(".", 1)[-1]
            if head in _DATACLASS_MARKS:
                return "dataclass"
    if bases & {"BaseModel", "Struct"}:
        return "dataclass"
    return "other"


def has(found: list[Atom], kind: str) -> bool:
    return any(a.kind == kind for a in found)


def get(found: list[Atom], kind: str) -> Atom | None:
    return next((a for a in found if a.kind == kind), None)


def field_default(ev: Evaluator, fdef: FieldDef) -> V | None:
    """A field's default (a `field(default_factory=...)` called), or None when it has none."""
    if fdef.default is None:
        return None
    value = ev.eval(fdef.default, fdef.owner.mod, {})
    if not is_field_spec(value):
        return value
    assert isinstance(value, Map)
    if "default" in value.items:
        return value.items["default"]
    factory = value.items.get("default_factory")
    if factory is None:
        return None
    if isinstance(factory, Ext) and factory.short in ("list", "dict", "set", "tuple"):
        return Seq([]) if factory.short != "dict" else Map({})
    if isinstance(factory, ClassV):
        return Instance(factory)
    out = ev.call(factory, [], {})
    return out if not isinstance(out, Unknown) else Unknown(f"{getattr(factory, 'text', 'factory')}()")


def field_doc(fdef: FieldDef) -> str:
    """The attribute docstring under a field (vLLM's and SGLang's help text), or ''."""
    body = fdef.owner.node.body
    for i, stmt in enumerate(body):
        if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == fdef.name:
            nxt = body[i + 1] if i + 1 < len(body) else None
            if isinstance(nxt, ast.Expr) and isinstance(nxt.value, ast.Constant) and isinstance(nxt.value.value, str):
                return nxt.value.value
    return ""
