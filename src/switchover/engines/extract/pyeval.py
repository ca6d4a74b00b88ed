"""Reading a Python package's source as data, without importing it: modules and names across imports, and a small
evaluator for the code that builds command-line parsers (constants, containers, classes, dataclass fields, type
hints, calls into the package's own functions). What it cannot know (a runtime value, a library call) is `Unknown`.

Engine extractors use it to run `make_arg_parser(parser)`-style functions over a release's source, so what they
report is what the release's code does, not what a pattern matched.
"""

from __future__ import annotations

import ast
from collections.abc import Callable, Iterator

from switchover.engines.extract import SourceTree
from switchover.engines.extract.pynodes import BUILTINS as _BUILTINS
from switchover.engines.extract.pynodes import EXPR as _EXPR
from switchover.engines.extract.pynodes import STMT as _STMT
from switchover.engines.extract.pynodes import call_method as _method
from switchover.engines.extract.pynodes import is_field_spec
from switchover.engines.extract.pyvalues import (
    Break,
    ClassV,
    Const,
    Ext,
    FieldDef,
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
    text_of,
)

Hook = Callable[["Evaluator", V, list[V], dict[str, V]], "V | None"]
_MAX_DEPTH = 24
_BUDGET = 2_000_000  # statements + expressions per Evaluator: a bound on pathological source


class Source:
    """A release's package source: modules by dotted name, parsed once; remembers every file it read."""

    def __init__(self, tree: SourceTree, package: str) -> None:
        self.tree = tree
        self.package = package  # only this package is read: other packages beside it (a venv) are external
        self.read: set[str] = set()
        self._modules: dict[str, Module | None] = {}

    def text(self, path: str) -> str | None:
        text = self.tree.read(path)
        if text is not None:
            self.read.add(path)
        return text

    def module(self, dotted: str) -> Module | None:
        if dotted.split(".")[0] != self.package:
            return None
        if dotted not in self._modules:
            self._modules[dotted] = self._load(dotted)
        return self._modules[dotted]

    def _load(self, dotted: str) -> Module | None:
        base = dotted.replace(".", "/")
        for path, is_pkg in ((f"{base}.py", False), (f"{base}/__init__.py", True)):
            text = self.text(path)
            if text is None:
                continue
            try:
                node = ast.parse(text)
            except SyntaxError:
                return None
            mod = Module(dotted, path, node, is_pkg)
            _index(mod.index, node.body)
            return mod
        return None


def _index(index: dict[str, list[ast.stmt]], body: list[ast.stmt]) -> None:
    """Top-level bindings by name (inside if/try blocks too), in source order."""
    for stmt in body:
        for name in _bound_names(stmt):
            index.setdefault(name, []).append(stmt)
        if isinstance(stmt, ast.If):
            _index(index, stmt.body)
            _index(index, stmt.orelse)
        elif isinstance(stmt, ast.Try):
            _index(index, stmt.body)
            _index(index, stmt.orelse)
            for handler in stmt.handlers:
                _index(index, handler.body)


def _bound_names(stmt: ast.stmt) -> list[str]:
    if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
        return [stmt.name]
    if isinstance(stmt, ast.Assign):
        return [n.id for t in stmt.targets for n in ast.walk(t) if isinstance(n, ast.Name)]
    if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.value is not None:
        return [stmt.target.id]
    if isinstance(stmt, ast.Import):
        return [(a.asname or a.name).split(".")[0] for a in stmt.names]
    if isinstance(stmt, ast.ImportFrom):
        return [a.asname or a.name for a in stmt.names if a.name != "*"]
    return []


class Evaluator:
    """Evaluates expressions and runs function bodies over a `Source`; `hooks` handle calls the evaluator does not
    know (argparse parsers, an engine's own helpers), first match wins."""

    def __init__(self, source: Source, hooks: list[Hook] | None = None) -> None:
        self.source = source
        self.hooks = list(hooks or [])
        self._globals: dict[tuple[str, str], V] = {}
        self._resolving: set[tuple[str, str]] = set()
        self._depth = 0
        self._steps = 0
        self.site: Module | None = None  # the module of the call being made, for hooks that record where

    # --- names
    def module_value(self, mod: Module, name: str) -> V:
        """A module-level name: its definition, an import, or an external name."""
        key = (mod.name, name)
        if key in self._globals:
            return self._globals[key]
        if key in self._resolving:
            return Unknown(name)
        self._resolving.add(key)
        try:
            value = self._module_value(mod, name)
        finally:
            self._resolving.discard(key)
        self._globals[key] = value
        return value

    def _module_value(self, mod: Module, name: str) -> V:
        """A class or function defined under the name wins (a later `X = wrap(X)` keeps X); else the last
        assignment that can be read; else the import."""
        stmts = mod.index.get(name)
        if not stmts:
            return self._unbound(mod, name)
        defs = [s for s in stmts if isinstance(s, ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef)]
        if defs:
            last = defs[-1]
            return ClassV(mod, last) if isinstance(last, ast.ClassDef) else FuncV(mod, last)
        imports = [s for s in stmts if isinstance(s, ast.Import | ast.ImportFrom)]
        for assign in reversed([s for s in stmts if isinstance(s, ast.Assign | ast.AnnAssign)]):
            if isinstance(assign, ast.Assign) and not all(isinstance(t, ast.Name) for t in assign.targets):
                continue
            value = self.eval(assign.value, mod, {}) if assign.value is not None else Unknown(name)
            if not isinstance(value, Unknown) or not imports:
                return value
        first = imports[0] if imports else stmts[0]
        if isinstance(first, ast.ImportFrom):
            return self.import_from(mod, first, name)
        if isinstance(first, ast.Import):
            return self.import_name(first, name)
        return Unknown(name)

    def _unbound(self, mod: Module, name: str) -> V:
        """A name the module does not bind: a submodule of a package, a star import's, or external."""
        sub = self.source.module(f"{mod.name}.{name}") if mod.is_pkg else None
        if sub is not None:
            return ModuleV(sub)
        for stmt in mod.node.body:
            if isinstance(stmt, ast.ImportFrom) and any(a.name == "*" for a in stmt.names) and stmt.module:
                star = self.source.module(stmt.module)
                if star is not None and name in star.index:
                    return self.module_value(star, name)
        return Ext(name)

    def import_from(self, mod: Module, stmt: ast.ImportFrom, name: str) -> V:
        alias = next(a for a in stmt.names if (a.asname or a.name) == name)
        base = stmt.module or ""
        if stmt.level:
            parts = mod.name.split(".")
            keep = len(parts) - stmt.level + (1 if mod.is_pkg else 0)
            base = ".".join([*parts[:keep], *([base] if base else [])])
        sub = self.source.module(f"{base}.{alias.name}") if base else None
        if sub is not None:
            return ModuleV(sub)
        target = self.source.module(base) if base else None
        if target is None:
            return Ext(f"{base}.{alias.name}" if base else alias.name)
        return self.module_value(target, alias.name)

    def import_name(self, stmt: ast.Import, name: str) -> V:
        alias = next(a for a in stmt.names if (a.asname or a.name).split(".")[0] == name)
        dotted = alias.name if alias.asname else alias.name.split(".")[0]
        target = self.source.module(dotted)
        return ModuleV(target) if target else Ext(dotted)

    def attr(self, obj: V, name: str) -> V:
        """`obj.name` for what the evaluator knows."""
        if isinstance(obj, ModuleV):
            return self.module_value(obj.mod, name)
        if isinstance(obj, ClassV):
            return self.class_attr(obj, name, bound=obj)
        if isinstance(obj, Instance):
            return obj.attrs[name] if name in obj.attrs else self.class_attr(obj.cls, name, bound=obj)
        if isinstance(obj, Member):
            return {"value": obj.value, "name": Const(obj.name)}.get(name, Unknown(f"{obj.name}.{name}"))
        if isinstance(obj, Super):
            for base in self.mro(obj.owner)[1:]:
                found = self._own_attr(base, name, obj.bound)
                if found is not None:
                    return found
            return Unknown(f"super().{name}")
        if isinstance(obj, Ext):
            return Ext(f"{obj.dotted}.{name}")
        if isinstance(obj, Unknown):
            return Unknown(f"{obj.text}.{name}")
        return Method(obj, name)

    def class_attr(self, cls: ClassV, name: str, bound: V | None) -> V:
        for klass in self.mro(cls):
            found = self._own_attr(klass, name, bound)
            if found is not None:
                return found
        return (
            Method(bound, name)
            if bound is not None and not isinstance(bound, ClassV)
            else Unknown(f"{cls.node.name}.{name}")
        )

    def _own_attr(self, cls: ClassV, name: str, bound: V | None) -> V | None:
        for stmt in cls.node.body:
            if isinstance(stmt, ast.FunctionDef | ast.AsyncFunctionDef) and stmt.name == name:
                decorators = {text_of(d) for d in stmt.decorator_list}
                if "staticmethod" in decorators:
                    return FuncV(cls.mod, stmt, None, cls)
                if "classmethod" in decorators:
                    return FuncV(cls.mod, stmt, bound.cls if isinstance(bound, Instance) else bound, cls)
                return FuncV(cls.mod, stmt, None if isinstance(bound, ClassV) else bound, cls)
            if isinstance(stmt, ast.ClassDef) and stmt.name == name:
                return ClassV(cls.mod, stmt)
            if _assigns(stmt, name):
                value = self.eval(stmt.value, cls.mod, {}) if stmt.value is not None else None  # type: ignore[attr-defined]
                if value is None:
                    continue
                if self.is_enum(cls):
                    return Member(cls, name, value)
                return _field_default(value)
        return None

    def mro(self, cls: ClassV) -> list[ClassV]:
        out: list[ClassV] = [cls]
        for base in cls.node.bases:
            value = self.eval(base, cls.mod, {})
            if isinstance(value, Generic):
                continue
            if isinstance(value, ClassV):
                out += [c for c in self.mro(value) if all(c.node is not o.node for o in out)]
        return out

    def base_names(self, cls: ClassV) -> set[str]:
        """The dotted names of every external base (argparse.ArgumentParser, enum.Enum) up the class tree."""
        names: set[str] = set()
        for klass in self.mro(cls):
            for base in klass.node.bases:
                value = self.eval(base, klass.mod, {})
                if isinstance(value, Ext):
                    names.add(value.dotted)
        return names

    def is_enum(self, cls: ClassV) -> bool:
        return any(n.split(".")[-1].endswith("Enum") for n in self.base_names(cls))

    def enum_members(self, cls: ClassV) -> list[Member]:
        out = []
        for stmt in cls.node.body:
            if isinstance(stmt, ast.Assign) and len(stmt.targets) == 1 and isinstance(stmt.targets[0], ast.Name):
                name = stmt.targets[0].id
                if name.startswith("_"):
                    continue
                value = self.eval(stmt.value, cls.mod, {})
                if isinstance(stmt.value, ast.Call) and text_of(stmt.value.func).endswith("auto"):
                    value = Const(name.lower())  # StrEnum's auto(): the lower-cased member name
                out.append(Member(cls, name, value))
        return out

    def fields(self, cls: ClassV) -> list[FieldDef]:
        """Dataclass-style fields (annotated class attributes, bases first), ClassVar and InitVar left out."""
        found: dict[str, FieldDef] = {}
        for klass in reversed(self.mro(cls)):
            for stmt in klass.node.body:
                if not (isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)):
                    continue
                head = text_of(stmt.annotation).split("[")[0]
                if head.split(".")[-1] in ("ClassVar", "InitVar") or head.strip("'\"").startswith("ClassVar"):
                    continue
                found[stmt.target.id] = FieldDef(stmt.target.id, stmt.annotation, stmt.value, klass)
        return list(found.values())

    # --- expressions
    def eval(self, node: ast.expr | None, mod: Module, env: dict[str, V]) -> V:
        if node is None:
            return Const(None)
        self._tick()
        handler = _EXPR.get(type(node))
        if handler is None:
            return Unknown(text_of(node))
        try:
            return handler(self, node, mod, env)
        except RecursionError:
            return Unknown(text_of(node))

    def _tick(self) -> None:
        self._steps += 1
        if self._steps > _BUDGET:
            raise RuntimeError("source evaluation exceeded its step budget")

    def annotation(self, node: ast.expr, mod: Module) -> V:
        """A type annotation (string annotations parsed first)."""
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            try:
                return self.eval(ast.parse(node.value, mode="eval").body, mod, {})
            except SyntaxError:
                return Unknown(node.value)
        return self.eval(node, mod, {})

    def call(self, func: V, args: list[V], kwargs: dict[str, V]) -> V:
        for hook in self.hooks:
            out = hook(self, func, args, kwargs)
            if out is not None:
                return out
        builtin = _BUILTINS.get(func.dotted) if isinstance(func, Ext) else None
        if builtin is not None:
            return builtin(self, args, kwargs)
        if isinstance(func, Method):
            return _method(self, func, args, kwargs)
        if isinstance(func, FuncV):
            return self.run(func, args, kwargs)
        if isinstance(func, ClassV):
            return self.construct(func, args, kwargs)
        if isinstance(func, Super | Unknown | Ext):
            return Unknown(f"{getattr(func, 'dotted', getattr(func, 'text', 'super'))}(...)")
        return Unknown("call")

    def construct(self, cls: ClassV, args: list[V], kwargs: dict[str, V]) -> V:
        """An instance whose attributes are the arguments given (by keyword, or positionally by field order)."""
        if self.is_enum(cls) and args:
            return next((m for m in self.enum_members(cls) if _same(m.value, args[0])), Unknown(cls.node.name))
        names = [f.name for f in self.fields(cls)]
        attrs = dict(zip(names, args, strict=False))
        attrs.update(kwargs)
        return Instance(cls, attrs)

    def run(self, func: FuncV, args: list[V], kwargs: dict[str, V]) -> V:
        """Run a function body over the evaluator's values; the returned value (Const(None) when it falls off)."""
        if self._depth >= _MAX_DEPTH:
            return Unknown(f"{getattr(func.node, 'name', 'lambda')}(...)")
        env = dict(func.closure or {})
        env.update(self._bind(func, args, kwargs))
        if func.owner is not None:
            env["__class__"] = func.owner
        if isinstance(func.node, ast.Lambda):
            return self.eval(func.node.body, func.mod, env)
        self._depth += 1
        try:
            self.exec_block(func.node.body, func.mod, env)
        except Return as ret:
            return ret.value
        except Break:
            pass
        finally:
            self._depth -= 1
        return Const(None)

    def _bind(self, func: FuncV, args: list[V], kwargs: dict[str, V]) -> dict[str, V]:
        a = func.node.args
        params = [p.arg for p in [*a.posonlyargs, *a.args]]
        if func.bound is not None:
            args = [func.bound, *args]
        env: dict[str, V] = {}
        defaults = a.defaults
        for i, name in enumerate(params):
            di = i - (len(params) - len(defaults))
            env[name] = (
                args[i]
                if i < len(args)
                else kwargs.get(name, self.eval(defaults[di], func.mod, {}) if di >= 0 else Unknown(name))
            )
        for p, d in zip(a.kwonlyargs, a.kw_defaults, strict=True):
            env[p.arg] = kwargs.get(p.arg, self.eval(d, func.mod, {}) if d is not None else Unknown(p.arg))
        if a.vararg:
            env[a.vararg.arg] = Seq(list(args[len(params) :]))
        if a.kwarg:
            env[a.kwarg.arg] = Map({k: v for k, v in kwargs.items() if k not in env})
        return env

    # --- statements
    def exec_block(self, body: list[ast.stmt], mod: Module, env: dict[str, V]) -> None:
        for stmt in body:
            self._tick()
            handler = _STMT.get(type(stmt))
            if handler is not None:
                handler(self, stmt, mod, env)

    def assign(self, target: ast.expr, value: V, mod: Module, env: dict[str, V]) -> None:
        if isinstance(target, ast.Name):
            env[target.id] = value
        elif isinstance(target, ast.Tuple | ast.List):
            items = value.items if isinstance(value, Seq) else []
            for i, elt in enumerate(target.elts):
                self.assign(elt, items[i] if i < len(items) else Unknown(text_of(elt)), mod, env)
        elif isinstance(target, ast.Subscript):
            obj, key = self.eval(target.value, mod, env), self.eval(target.slice, mod, env)
            if isinstance(obj, Map) and isinstance(key, Const):
                obj.items[key.value] = value
        elif isinstance(target, ast.Attribute):
            obj = self.eval(target.value, mod, env)
            if isinstance(obj, Instance):
                obj.attrs[target.attr] = value

    def iterate(self, value: V) -> Iterator[V] | None:
        if isinstance(value, Seq):
            return iter(list(value.items))
        if isinstance(value, Map):
            return iter([Const(k) for k in value.items])
        if isinstance(value, ClassV) and self.is_enum(value):
            return iter(self.enum_members(value))
        if isinstance(value, Const) and isinstance(value.value, str | tuple | list):
            return iter([Const(c) for c in value.value])
        return None


def _assigns(stmt: ast.stmt, name: str) -> bool:
    if isinstance(stmt, ast.Assign):
        return any(isinstance(t, ast.Name) and t.id == name for t in stmt.targets)
    return isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name) and stmt.target.id == name


def _field_default(value: V) -> V:
    """`x: int = field(default=3)` read as a class attribute is its default."""
    if is_field_spec(value):
        assert isinstance(value, Map)
        return value.items.get("default", Unknown("field"))
    return value


def _same(a: V, b: V) -> bool:
    return isinstance(a, Const) and isinstance(b, Const) and a.value == b.value
