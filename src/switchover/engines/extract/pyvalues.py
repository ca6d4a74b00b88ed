"""The values the source evaluator (`pyeval`) works with: what is known about a Python value read from a release's
source, from a constant to a class or a function not yet run."""

from __future__ import annotations

import ast
import copy
from dataclasses import dataclass, field
from typing import Any


class V:
    """A value the evaluator knows something about."""


@dataclass(eq=False)
class Const(V):
    value: Any


@dataclass(eq=False)
class Seq(V):
    items: list[V]


@dataclass(eq=False)
class Map(V):
    items: dict[Any, V]


@dataclass(eq=False)
class Unknown(V):
    text: str


@dataclass(eq=False)
class Ext(V):
    """A name from outside the package (stdlib, a library, a builtin) by its dotted name."""

    dotted: str

    @property
    def short(self) -> str:
        return self.dotted.rsplit(".", 1)[-1]


@dataclass(eq=False)
class Generic(V):
    """A subscripted type: Literal[...], Optional[X], list[int], Annotated[T, meta]."""

    origin: str
    args: list[V]


@dataclass(eq=False)
class ModuleV(V):
    mod: Module


@dataclass(eq=False)
class ClassV(V):
    mod: Module
    node: ast.ClassDef


@dataclass(eq=False)
class FuncV(V):
    mod: Module
    node: ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda
    bound: V | None = None
    owner: ClassV | None = None
    closure: dict[str, V] | None = None


@dataclass(eq=False)
class Instance(V):
    cls: ClassV
    attrs: dict[str, V] = field(default_factory=dict)


@dataclass(eq=False)
class Member(V):
    """An enum member."""

    cls: ClassV
    name: str
    value: V


@dataclass(eq=False)
class Super(V):
    owner: ClassV
    bound: V | None


@dataclass(eq=False)
class Method(V):
    """A method of a value the evaluator or a hook implements (Map.items, a parser's add_argument)."""

    obj: V
    name: str


@dataclass
class Module:
    name: str
    path: str
    node: ast.Module = field(repr=False)
    is_pkg: bool
    index: dict[str, list[ast.stmt]] = field(default_factory=dict, repr=False)


@dataclass(frozen=True)
class FieldDef:
    """One dataclass-style field: its name, annotation and default as written, and the class declaring it."""

    name: str
    annotation: ast.expr
    default: ast.expr | None
    owner: ClassV


class Return(Exception):
    def __init__(self, value: V) -> None:
        super().__init__()
        self.value = value


class Break(Exception):
    pass


def text_of(node: ast.AST) -> str:
    try:
        return ast.unparse(node)
    except Exception:
        return "?"


def plain(value: V) -> Any:
    """A Python value for what is fully known (constants and containers of them), else raise ValueError."""
    if isinstance(value, Const):
        return value.value
    if isinstance(value, Seq):
        return [plain(v) for v in value.items]
    if isinstance(value, Map):
        return {k: plain(v) for k, v in value.items.items()}
    if isinstance(value, Member):
        return plain(value.value)
    raise ValueError(value)


def deep_copy(value: V) -> V:
    if isinstance(value, Seq):
        return Seq([deep_copy(v) for v in value.items])
    if isinstance(value, Map):
        return Map({k: deep_copy(v) for k, v in value.items.items()})
    return copy.copy(value) if isinstance(value, Instance) else value
