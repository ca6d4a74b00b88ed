"""Environment variables a Python engine reads by name, found in its source with `ast` (no import): `os.getenv("X",
d)`, `os.environ.get("X", d)`, `os.environ["X"]`, `"X" in os.environ`, and calls to the package's own wrappers around
them (a function that hands one of its parameters to `os.getenv`: SGLang's `get_bool_env_var(name, default)`, vLLM's
`env_with_choices(env_name, default, choices)`). Each read gives the variable's kind (the conversion around the read,
or the wrapper's return type), its default as written, and the choices a wrapper checks the value against.

A variable read in several places is one fact: the first file (by path) cites it, the kind is the one the reads agree
on (a plain string read defers to a converted one; two different conversions make it unknown) and so is the default
(none recorded when they differ).
"""

from __future__ import annotations

import ast
import bisect
import re
from dataclasses import dataclass
from typing import Any

from switchover.engines.extract.pyargs import choices_of, default_text
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import ClassV, Const, FuncV, Module, Unknown, V, text_of

_READ_CALLS = {"os.getenv", "getenv", "os.environ.get", "environ.get"}
_ENVIRON = {"os.environ", "environ"}
_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
_CONVERSIONS = {"int": "int", "float": "float", "bool": "bool", "json.loads": "json"}
_SKIP_DIRS = ("/test/", "/tests/", "/benchmarks/", "/examples/")
_WEAK = ("unknown", "str")  # kinds a converted read elsewhere overrides


@dataclass(frozen=True)
class EnvRead:
    """One read of an environment variable: where, the kind of value it is turned into, its default as written
    (None: none), the values a wrapper accepts (None: any), the release's deprecation note (None: none)."""

    name: str
    path: str
    kind: str = "unknown"
    default: str | None = None
    choices: tuple[str, ...] | None = None
    deprecated: str | None = None

    def facts(self) -> dict[str, Any]:
        """EnvSpan fields but first/last."""
        out: dict[str, Any] = {"path": self.path, "kind": self.kind}
        if self.default is not None:
            out["default"] = self.default
        if self.choices is not None:
            out["choices"] = list(self.choices)
        if self.deprecated is not None:
            out["deprecated"] = self.deprecated
        return out


@dataclass(frozen=True)
class _Wrapper:
    """A package function that reads the variable named by one of its parameters."""

    params: tuple[str, ...]
    name_param: str
    default_param: str | None
    choices_param: str | None
    kind: str


def may_read(text: str, prefixes: tuple[str, ...]) -> bool:
    """Whether a file can hold a read `scan` records (see `read_lines`); files without one are never parsed, so a
    cache may leave them out."""
    return _hits(prefixes).search(text) is not None


def read_lines(text: str, prefixes: tuple[str, ...]) -> list[int]:
    """The lines (1-based) that can hold a read: a string literal with one of the prefixes, or a read call whose
    argument may be a constant."""
    pattern = _hits(prefixes)
    return [i for i, line in enumerate(text.split("\n"), 1) if pattern.search(line)]


def _hits(prefixes: tuple[str, ...]) -> re.Pattern[str]:
    quoted = "|".join(re.escape(p) for p in prefixes)
    return re.compile(rf"""["'](?:{quoted})|getenv\(|environ\.get\(|environ\[|in\s+os\.environ""")


class EnvReader:
    """Finds environment reads in a release's modules (one per extraction: wrappers and parents are cached)."""

    def __init__(self, ev: Evaluator, prefixes: tuple[str, ...] = ("",)) -> None:
        self.ev = ev
        self.prefixes = prefixes  # a wrapper call is looked at only when it names such a variable
        self._wrappers: dict[int, _Wrapper | None] = {}
        self._parents: dict[int, ast.AST] = {}  # node -> parent, for the nodes `reads` visited

    def reads(self, node: ast.AST, mod: Module, lines: list[int] | None = None) -> list[EnvRead]:
        """Every read under `node` (a module, a function, an expression) of module `mod`; with `lines` (sorted),
        only in statements and expressions that span one of those lines."""
        out = []
        stack: list[tuple[ast.AST, ast.AST | None]] = [(node, None)]
        while stack:
            sub, parent = stack.pop()
            if lines is not None and not _spans(sub, lines):
                continue
            if parent is not None:
                self._parents[id(sub)] = parent
            found = self._read(sub, mod)
            if found is not None:
                out.append(found)
            stack.extend((child, sub) for child in ast.iter_child_nodes(sub))
        return out

    def _read(self, node: ast.AST, mod: Module) -> EnvRead | None:
        if isinstance(node, ast.Call):
            if text_of(node.func) in _READ_CALLS:
                name = self._name(_arg(node, 0, "key"), mod)
                if name is None:
                    return None
                default = _arg(node, 1, "default")
                return EnvRead(name, mod.path, self._kind_around(node, mod), self._default(default, mod))
            return self._wrapped(node, mod)
        if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and text_of(node.value) in _ENVIRON:
            name = self._name(node.slice, mod)
            return EnvRead(name, mod.path, self._kind_around(node, mod)) if name else None
        if (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and text_of(node.comparators[0]) in _ENVIRON
        ):
            name = self._name(node.left, mod)
            return EnvRead(name, mod.path) if name else None  # a presence test says nothing of the value
        return None

    def _name(self, node: ast.expr | None, mod: Module) -> str | None:
        if node is None:
            return None
        if isinstance(node, ast.Constant):
            value: Any = node.value
        elif isinstance(node, ast.Name):
            found = self.ev.module_value(mod, node.id)
            value = found.value if isinstance(found, Const) else None
        else:
            return None
        return value if isinstance(value, str) and _NAME.fullmatch(value) else None

    def _default(self, node: ast.expr | None, mod: Module) -> str | None:
        return default_text(self.ev.eval(node, mod, {})) if node is not None else None

    # --- wrappers
    def _wrapped(self, call: ast.Call, mod: Module) -> EnvRead | None:
        """A call to a package function that reads the variable its argument names."""
        literals = [
            a
            for a in [*call.args, *(k.value for k in call.keywords)]
            if isinstance(a, ast.Constant)
            and isinstance(a.value, str)
            and _NAME.fullmatch(a.value)
            and a.value.startswith(self.prefixes)
        ]
        if not literals:
            return None
        func = self.ev.eval(call.func, mod, {})
        if not isinstance(func, FuncV) or isinstance(func.node, ast.Lambda):
            return None
        wrapper = self._wrapper(func)
        if wrapper is None:
            return None
        name = self._name(_param(call, wrapper, wrapper.name_param), mod)
        if name is None:
            return None
        default = None
        if wrapper.default_param is not None:
            given = _param(call, wrapper, wrapper.default_param)
            default = (
                self._default(given, mod)
                if given is not None
                else _signature_default(self.ev, func, wrapper.default_param)
            )
        choices = None
        if wrapper.choices_param is not None:
            given = _param(call, wrapper, wrapper.choices_param)
            choices = self._choices(given, mod) if given is not None else None
        return EnvRead(name, mod.path, wrapper.kind, default, choices)

    def _wrapper(self, func: FuncV) -> _Wrapper | None:
        key = id(func.node)
        if key not in self._wrappers:
            self._wrappers[key] = None  # a wrapper calling itself is not one
            self._wrappers[key] = _wrapper_of(func.node) or self._passing_on(func)  # type: ignore[arg-type]
        return self._wrappers[key]

    def _passing_on(self, func: FuncV) -> _Wrapper | None:
        """A function that hands its parameter to another wrapper (vLLM's env_set_with_choices)."""
        node = func.node
        assert not isinstance(node, ast.Lambda)
        params = tuple(p.arg for p in [*node.args.posonlyargs, *node.args.args])
        for sub in ast.walk(node):
            if not isinstance(sub, ast.Call) or not any(isinstance(a, ast.Name) and a.id in params for a in sub.args):
                continue
            callee = self.ev.eval(sub.func, func.mod, {})
            inner = (
                self._wrapper(callee) if isinstance(callee, FuncV) and not isinstance(callee.node, ast.Lambda) else None
            )
            named = _param(sub, inner, inner.name_param) if inner is not None else None
            if inner is None or not (isinstance(named, ast.Name) and named.id in params):
                continue
            kind = annotation_kind(text_of(node.returns)) if node.returns is not None else inner.kind
            return _Wrapper(
                params,
                named.id,
                "default" if "default" in params else None,
                "choices" if "choices" in params else None,
                kind,
            )
        return None

    def _choices(self, node: ast.expr, mod: Module) -> tuple[str, ...] | None:
        """Choices given as a list, or as a lambda naming an enum's members (`list(Enum.__members__.keys())`, the
        enum class found through `__import__('module')` or a name)."""
        if isinstance(node, ast.Lambda):
            for sub in ast.walk(node.body):
                if isinstance(sub, ast.Attribute) and sub.attr == "__members__":
                    cls = self._class(sub.value, mod)
                    if cls is not None and self.ev.is_enum(cls):
                        return tuple(m.name for m in self.ev.enum_members(cls))
            return None
        listed = choices_of(self.ev, self.ev.eval(node, mod, {}))
        return tuple(listed) if listed is not None else None

    def _class(self, node: ast.expr, mod: Module) -> ClassV | None:
        if (
            isinstance(node, ast.Attribute)
            and isinstance(node.value, ast.Call)
            and text_of(node.value.func) == "__import__"
            and node.value.args
            and isinstance(node.value.args[0], ast.Constant)
        ):
            target = self.ev.source.module(str(node.value.args[0].value))
            found: V = self.ev.module_value(target, node.attr) if target is not None else Unknown(node.attr)
        else:
            found = self.ev.eval(node, mod, {})
        return found if isinstance(found, ClassV) else None

    # --- kinds
    def _kind_around(self, node: ast.expr, mod: Module) -> str:
        """The kind of value the read becomes: int(...)/float(...)/bool(...), a comparison with strings (bool), a
        package function's return type, `.split(...)` (list); a plain read is a string."""
        parents = self._parents
        kind, cur = "str", node
        for _ in range(8):
            parent = parents.get(id(cur))
            if isinstance(parent, ast.Call) and cur in parent.args:
                conv = _CONVERSIONS.get(text_of(parent.func)) or self._returns(parent.func, mod)
                if conv is None:
                    break
                kind, cur = conv, parent
                continue
            if isinstance(parent, ast.Attribute) and parent.value is cur:
                above = parents.get(id(parent))
                if parent.attr == "split":
                    return "list"
                if parent.attr in ("lower", "upper", "strip", "casefold") and isinstance(above, ast.Call):
                    cur = above
                    continue
                break
            if isinstance(parent, ast.Compare) and parent.left is cur and _truth_words(parent.comparators):
                return "bool"
            if isinstance(parent, ast.BoolOp):
                cur = parent
                continue
            break
        return kind

    def _returns(self, func: ast.expr, mod: Module) -> str | None:
        """The kind a package function returns, by its annotation (vLLM's maybe_convert_int -> int | None)."""
        if not isinstance(func, ast.Name):
            return None
        found = self.ev.eval(func, mod, {})
        if isinstance(found, FuncV) and not isinstance(found.node, ast.Lambda) and found.node.returns is not None:
            kind = annotation_kind(text_of(found.node.returns))
            return kind if kind != "unknown" else None
        return None


def _spans(node: ast.AST, lines: list[int]) -> bool:
    start = getattr(node, "lineno", None)
    if start is None:
        return True
    i = bisect.bisect_left(lines, start)
    return i < len(lines) and lines[i] <= (getattr(node, "end_lineno", None) or start)


def _arg(call: ast.Call, index: int, keyword: str) -> ast.expr | None:
    if len(call.args) > index:
        return call.args[index]
    return next((k.value for k in call.keywords if k.arg == keyword), None)


def _param(call: ast.Call, wrapper: _Wrapper, param: str) -> ast.expr | None:
    return _arg(call, wrapper.params.index(param), param)


def _signature_default(ev: Evaluator, func: FuncV, param: str) -> str | None:
    a = func.node.args
    params = [p.arg for p in [*a.posonlyargs, *a.args]]
    offset = len(params) - len(a.defaults)
    if param in params and params.index(param) >= offset:
        return default_text(ev.eval(a.defaults[params.index(param) - offset], func.mod, {}))
    return None


def _wrapper_of(node: ast.FunctionDef | ast.AsyncFunctionDef) -> _Wrapper | None:
    """How a function reads the variable one of its parameters names (None: it reads none that way)."""
    params = tuple(p.arg for p in [*node.args.posonlyargs, *node.args.args])
    for sub in ast.walk(node):
        named: ast.expr | None = None
        fallback: ast.expr | None = None
        if isinstance(sub, ast.Call) and text_of(sub.func) in _READ_CALLS:
            named, fallback = _arg(sub, 0, "key"), _arg(sub, 1, "default")
        elif isinstance(sub, ast.Subscript) and isinstance(sub.ctx, ast.Load) and text_of(sub.value) in _ENVIRON:
            named = sub.slice  # `os.environ[name] = ...` writes the variable: not a read
        if not (isinstance(named, ast.Name) and named.id in params):
            continue
        default = (
            fallback.id
            if isinstance(fallback, ast.Name) and fallback.id in params
            else ("default" if "default" in params else None)
        )
        kind = annotation_kind(text_of(node.returns)) if node.returns is not None else "unknown"
        if kind == "unknown":
            kind = next(
                (k for k in ("bool", "int", "float", "str") if re.search(rf"(^|_){k}(_|$)", node.name)), "unknown"
            )
        return _Wrapper(params, named.id, default, "choices" if "choices" in params else None, kind)
    return None


def annotation_kind(text: str) -> str:
    """The kind an annotation names: `int | None` -> int, `Callable[[], list[str]]` -> list, `Literal[...]` ->
    str."""
    text = text.replace("typing.", "").strip("'\" ")
    if text.startswith("Callable[") and "]," in text:
        text = text[text.index("],") + 2 : -1].strip()
    text = re.sub(r"^Optional\[(.*)\]$", r"\1", text)
    parts = [p.strip() for p in text.split("|") if p.strip() not in ("None", "")]
    head = parts[0] if len(parts) == 1 else ""
    for prefix, kind in (
        ("bool", "bool"),
        ("int", "int"),
        ("float", "float"),
        ("str", "str"),
        ("Literal", "str"),
        ("list", "list"),
        ("List", "list"),
        ("set", "list"),
        ("Set", "list"),
        ("tuple", "list"),
        ("Tuple", "list"),
        ("dict", "json"),
        ("Dict", "json"),
    ):
        if re.match(rf"{prefix}\b", head):
            return kind
    return "unknown"


_TRUTH = {"1", "0", "true", "false", "yes", "no", "on", "off", "y", "n"}


def _truth_words(nodes: list[ast.expr]) -> bool:
    """A comparison with "1" / "true" / ("true", "1") reads a switch; with other strings ("", "auto") a string."""
    words: list[object] = []
    for node in nodes:
        elts = node.elts if isinstance(node, ast.Tuple | ast.List | ast.Set) else [node]
        if not all(isinstance(e, ast.Constant) and isinstance(e.value, str) for e in elts):
            return False
        words += [e.value for e in elts]  # type: ignore[attr-defined]
    return bool(words) and all(str(w).lower() in _TRUTH for w in words)


def merge(reads: list[EnvRead]) -> dict[str, dict[str, Any]]:
    """One fact per variable from all its reads (see the module docstring)."""
    by_name: dict[str, list[EnvRead]] = {}
    for read in sorted(reads, key=lambda r: r.path):
        by_name.setdefault(read.name, []).append(read)
    out: dict[str, dict[str, Any]] = {}
    for name, found in sorted(by_name.items()):
        strong = {r.kind for r in found if r.kind not in _WEAK}
        kind = (
            strong.pop()
            if len(strong) == 1
            else "unknown"
            if strong
            else ("str" if any(r.kind == "str" for r in found) else "unknown")
        )
        defaults = {r.default for r in found if r.default is not None}
        choices = next((r.choices for r in found if r.choices is not None), None)
        note = next((r.deprecated for r in found if r.deprecated is not None), None)
        out[name] = EnvRead(
            name, found[0].path, kind, defaults.pop() if len(defaults) == 1 else None, choices, note
        ).facts()
    return out


def scan(
    source: Source, ev: Evaluator, prefixes: tuple[str, ...], *, skip: tuple[str, ...] = ()
) -> dict[str, dict[str, Any]]:
    """Every variable with one of `prefixes` that the package reads by name, anywhere but tests and `skip`."""
    reader = EnvReader(ev, prefixes)
    reads: list[EnvRead] = []
    for path in source.tree.paths(f"{source.package}/", ".py"):
        if any(d in "/" + path for d in _SKIP_DIRS) or path.startswith(skip):
            continue
        text = source.text(path)
        if text is None or not may_read(text, prefixes):
            continue
        mod = source.module(path.removesuffix(".py").removesuffix("/__init__").replace("/", "."))
        if mod is None:
            continue
        reads += [r for r in reader.reads(mod.node, mod, read_lines(text, prefixes)) if r.name.startswith(prefixes)]
    return merge(reads)


__all__ = ["EnvRead", "EnvReader", "annotation_kind", "may_read", "merge", "read_lines", "scan"]
