"""The environment variables an SGLang release says are deprecated, read from sglang/srt/environ.py (no import), and
the variable prefix it renames (`SGL_X` read as `SGLANG_X`). The release marks a name deprecated in four ways, all
run when environ.py is imported: a call to one of its own functions that warns when the old name is set
(`_print_deprecated_env("SGLANG_LOG_GC", "SGLANG_GC_LOG")`, `_warn_deprecated_env_to_cli_flag(name, hint)`), a loop
over a literal {old: new} dict that warns the same way, a registry dict of deprecation objects
(`_DEPRECATED_ENVS = {"SGLANG_X": _DeprecatedEnv(replacement=..., note=...)}`), and a registry field's
`deprecated_name=` alias (read in sglang_environ). Which argument is the old name, which the replacement and which a
note is read from the function or class itself: the name tested `in os.environ` is the old one, the name written to
`os.environ[...]` the replacement, and the value is forwarded unchanged when what is written is the old name's value.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TypeGuard

from switchover.engines.extract.pyeval import Evaluator
from switchover.engines.extract.pyvalues import ClassV, Module, text_of

_ENVIRON = {"os.environ", "environ"}
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_SAYS_DEPRECATED = re.compile(r"deprecat", re.IGNORECASE)
_MAX_NOTE = 240


@dataclass(frozen=True)
class Deprecation:
    """One deprecated variable: its replacement (None: none), the release's own hint, whether the release copies
    the value to the replacement unchanged."""

    name: str
    replacement: str | None = None
    hint: str | None = None
    forwarded: bool = False

    def note(self) -> str:
        """The EnvSpan.deprecated text."""
        text = (
            "Deprecated."
            + (f" Use {self.replacement} instead." if self.replacement else "")
            + (f" {' '.join(self.hint.split())}" if self.hint else "")
        )
        return text if len(text) <= _MAX_NOTE else text[: _MAX_NOTE - 3] + "..."


@dataclass(frozen=True)
class _Roles:
    """Which parameters of a deprecation handler are the old name, the replacement and the value transform."""

    params: tuple[str, ...]
    old: str | None
    new: str | None
    transform: str | None
    forwards: bool  # what is written to the replacement is the old name's value as read


def prefix_aliases(mod: Module) -> dict[str, str]:
    """{old prefix: new prefix} for a function environ.py runs at import that copies every `os.environ` key starting
    with the old prefix to the same name under the new one (`key.replace("SGL_", "SGLANG_", 1)`)."""
    out: dict[str, str] = {}
    for func in _run_at_import(mod):
        tested = {_text(c.args[0]) for c in ast.walk(func) if _method_call(c, "startswith")}
        if not _writes_environ(func):
            continue
        for call in ast.walk(func):
            if _method_call(call, "replace") and len(call.args) >= 2:
                old, new = _text(call.args[0]), _text(call.args[1])
                if old in tested and old and new and old.endswith("_") and new.endswith("_"):
                    out[old] = new
    return out


def deprecations(ev: Evaluator, mod: Module) -> dict[str, Deprecation]:
    """Every variable environ.py says is deprecated through a warning function, a loop over a literal dict, or a
    registry of deprecation objects; a name declared twice (a replacement, then a hint) keeps both."""
    out: dict[str, Deprecation] = {}
    for found in [*_by_calls(mod), *_by_loops(mod), *_by_registry(ev, mod)]:
        seen = out.get(found.name)
        if seen is not None:
            hints = list(dict.fromkeys(h for h in (seen.hint, found.hint) if h))
            found = Deprecation(
                found.name,
                seen.replacement or found.replacement,
                " ".join(hints) or None,
                seen.forwarded or found.forwarded,
            )
        out[found.name] = found
    return out


def _by_calls(mod: Module) -> Iterator[Deprecation]:
    """`warn_fn("OLD", "NEW")`: a module function that warns when a parameter's variable is set."""
    handlers = {
        s.name: roles
        for s in mod.node.body
        if isinstance(s, ast.FunctionDef) and (roles := _function_roles(s)) is not None
    }
    for call in ast.walk(mod.node):
        if isinstance(call, ast.Call) and isinstance(call.func, ast.Name) and call.func.id in handlers:
            found = _from_call(call, handlers[call.func.id], skip_self=False)
            if found is not None:
                yield found


def _by_loops(mod: Module) -> Iterator[Deprecation]:
    """`for old, new in {"OLD_MS": "NEW_S"}.items(): if old in os.environ: warn(...deprecated...)`, the dict a
    literal assigned to a name in the module (or one of its functions)."""
    literals = {
        t.id: s.value
        for s in ast.walk(mod.node)
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Dict)
        for t in s.targets
        if isinstance(t, ast.Name)
    }
    for loop in ast.walk(mod.node):
        if not (
            isinstance(loop, ast.For)
            and isinstance(loop.target, ast.Tuple)
            and len(loop.target.elts) == 2
            and _method_call(loop.iter, "items", literal=False)
        ):
            continue
        assert isinstance(loop.iter.func, ast.Attribute)
        table = literals.get(text_of(loop.iter.func.value))
        old, new = (e.id if isinstance(e, ast.Name) else "" for e in loop.target.elts)
        if table is None or not (_tests_environ(loop, old) and _says_deprecated(loop)):
            continue
        forwards = _written_value_is_read(loop, new, old)
        for key, value in zip(table.keys, table.values, strict=True):
            old_name, new_name = _name(key), _name(value)
            if old_name and new_name:
                yield Deprecation(old_name, new_name, None, forwards)


def _by_registry(ev: Evaluator, mod: Module) -> Iterator[Deprecation]:
    """`{"OLD": Handler(replacement="NEW", note="...")}` where Handler's methods warn when the key's variable is
    set and write its value to the replacement."""
    for stmt in mod.node.body:
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if not isinstance(value, ast.Dict):
            continue
        for key, item in zip(value.keys, value.values, strict=True):
            old = _name(key)
            if old is None or not isinstance(item, ast.Call):
                continue
            cls = ev.eval(item.func, mod, {})
            roles = _class_roles(cls) if isinstance(cls, ClassV) else None
            if roles is None:
                continue
            found = _from_call(item, roles, skip_self=True, old=old)
            if found is not None:
                yield found


def _from_call(call: ast.Call, roles: _Roles, *, skip_self: bool, old: str | None = None) -> Deprecation | None:
    """The deprecation one call of a handler declares, its arguments bound to the handler's parameters."""
    params = roles.params[1:] if skip_self else roles.params
    bound: dict[str, ast.expr] = dict(zip(params, call.args, strict=False))
    bound.update({k.arg: k.value for k in call.keywords if k.arg})
    name = old or _name(bound.get(roles.old or ""))
    if name is None:
        return None
    replacement = _name(bound.get(roles.new or ""))
    transform = bound.get(roles.transform or "")
    transformed = transform is not None and not (isinstance(transform, ast.Constant) and transform.value is None)
    hints = [
        v.value
        for p, v in bound.items()
        if p not in (roles.old, roles.new, roles.transform) and isinstance(v, ast.Constant) and isinstance(v.value, str)
    ]
    return Deprecation(
        name, replacement, hints[0] if hints else None, replacement is not None and roles.forwards and not transformed
    )


def _function_roles(func: ast.FunctionDef) -> _Roles | None:
    """A function that warns that the variable one of its parameters names is deprecated."""
    params = tuple(a.arg for a in [*func.args.posonlyargs, *func.args.args])
    old = next((p for p in params if _tests_environ(func, p)), None)
    if old is None or not _says_deprecated(func):
        return None
    new = next((p for p in params if p != old and _writes_environ(func, ast.Name, p)), None)
    return _Roles(params, old, new, None, new is not None and _written_value_is_read(func, new, old))


def _class_roles(cls: ClassV) -> _Roles | None:
    """A class whose methods warn that the variable passed to them is deprecated and may write its value to the
    replacement its constructor was given (`self.replacement`), through a transform it was given (`self.transform`)."""
    methods = [s for s in cls.node.body if isinstance(s, ast.FunctionDef)]
    init = next((m for m in methods if m.name == "__init__"), None)
    if init is None:
        return None
    warns = [
        m
        for m in methods
        if m is not init and _says_deprecated(m) and any(_tests_environ(m, a.arg) for a in m.args.args[1:])
    ]
    if not warns:
        return None
    params = tuple(a.arg for a in init.args.args)
    kept = {
        t.attr: s.value.id
        for s in ast.walk(init)
        if isinstance(s, ast.Assign) and isinstance(s.value, ast.Name)
        for t in s.targets
        if isinstance(t, ast.Attribute) and text_of(t.value) == "self"
    }
    new = next((kept[a] for a in kept if any(_writes_environ(m, ast.Attribute, a) for m in warns)), None)
    called = {text_of(c.func).removeprefix("self.") for m in warns for c in ast.walk(m) if isinstance(c, ast.Call)}
    transform = next((kept[a] for a in kept if a in called), None)
    return _Roles(params, None, new, transform, new is not None)


# --- small readers of the handler's body
def _run_at_import(mod: Module) -> list[ast.FunctionDef]:
    called = {
        s.value.func.id
        for s in mod.node.body
        if isinstance(s, ast.Expr) and isinstance(s.value, ast.Call) and isinstance(s.value.func, ast.Name)
    }
    return [s for s in mod.node.body if isinstance(s, ast.FunctionDef) and s.name in called]


def _method_call(node: ast.AST, method: str, *, literal: bool = True) -> TypeGuard[ast.Call]:
    """`x.method("...")` (with a string first argument when `literal`)."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == method):
        return False
    return not literal or (
        bool(node.args) and isinstance(node.args[0], ast.Constant) and isinstance(node.args[0].value, str)
    )


def _tests_environ(scope: ast.AST, param: str) -> bool:
    """`param in os.environ` / `not in` / `os.getenv(param)` somewhere in `scope`."""
    for node in ast.walk(scope):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Name)
            and node.left.id == param
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and text_of(node.comparators[0]) in _ENVIRON
        ):
            return True
        if (
            isinstance(node, ast.Call)
            and text_of(node.func) in ("os.getenv", "os.environ.get")
            and node.args
            and isinstance(node.args[0], ast.Name)
            and node.args[0].id == param
        ):
            return True
    return False


def _writes_environ(scope: ast.AST, kind: type[ast.expr] | None = None, name: str = "") -> bool:
    """`os.environ[...] = ...` in `scope`; with `kind`, only where the key is that parameter (a Name) or that
    attribute of self."""
    for node in ast.walk(scope):
        if not (
            isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Store) and text_of(node.value) in _ENVIRON
        ):
            continue
        key = node.slice
        if (
            kind is None
            or (kind is ast.Name and isinstance(key, ast.Name) and key.id == name)
            or (kind is ast.Attribute and isinstance(key, ast.Attribute) and key.attr == name)
        ):
            return True
    return False


def _written_value_is_read(scope: ast.AST, new: str, old: str) -> bool:
    """`os.environ[new] = os.environ[old]`: the replacement gets the old name's value as it was set."""
    for node in ast.walk(scope):
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Subscript) and isinstance(t.slice, ast.Name) and t.slice.id == new for t in node.targets
        ):
            value = node.value
            return (
                isinstance(value, ast.Subscript)
                and text_of(value.value) in _ENVIRON
                and isinstance(value.slice, ast.Name)
                and value.slice.id == old
            )
    return False


def _says_deprecated(scope: ast.AST) -> bool:
    return any(
        isinstance(n, ast.Constant) and isinstance(n.value, str) and _SAYS_DEPRECATED.search(n.value)
        for n in ast.walk(scope)
    )


def _text(node: ast.expr | None) -> str | None:
    return node.value if isinstance(node, ast.Constant) and isinstance(node.value, str) else None


def _name(node: ast.expr | None) -> str | None:
    """A variable name written as a string constant."""
    text = _text(node)
    return text if text is not None and _NAME.fullmatch(text) else None


__all__ = ["Deprecation", "deprecations", "prefix_aliases"]
