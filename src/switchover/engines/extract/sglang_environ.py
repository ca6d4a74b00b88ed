"""The environment variables an SGLang release reads: the fields of the `Envs` registry in sglang/srt/environ.py
(0.5.3 on: `SGLANG_X = EnvBool(False)`, the kind from the field class's `parse` return type, the default as written,
a `deprecated_name=` alias read when the field is unset), every `SGLANG_*` / `SGL_*` variable the package still reads
by name (`get_bool_env_var("SGLANG_X")`, `os.getenv(...)`), which is all of them before the registry, and the names
environ.py says are deprecated (sglang_deprecations), each with the release's note. A registry field wins over a
read of the same name elsewhere."""

from __future__ import annotations

import ast
from typing import Any

from switchover.engines.extract.pyargs import default_text
from switchover.engines.extract.pyenv import EnvRead, annotation_kind, scan
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import ClassV, Const, FuncV, Unknown, V, text_of
from switchover.engines.extract.sglang_deprecations import Deprecation, deprecations
from switchover.engines.extract.sglang_deprecations import prefix_aliases as _prefix_aliases

_MODULE = "sglang.srt.environ"
_REGISTRY = "Envs"
_FIELD_BASE = "EnvField"
PREFIXES = ("SGLANG_", "SGL_")
# not the server: the frontend language, benchmark and evaluation scripts, test helpers
_SKIP = ("sglang/lang/", "sglang/bench_", "sglang/eval/", "sglang/test/")


def environment(ev: Evaluator, source: Source) -> dict[str, dict[str, Any]]:
    """Variable name -> EnvSpan fields (but first/last) for one release; a name environ.py says is deprecated carries
    the note (and is listed even where nothing else reads it: environ.py reads it to warn, or to forward its value)."""
    out = _registry(ev, source)
    for name, facts in scan(source, ev, PREFIXES, skip=_SKIP).items():
        out.setdefault(name, facts)
    mod = source.module(_MODULE)
    for found in (deprecations(ev, mod) if mod is not None else {}).values():
        _mark(out, found, mod.path if mod is not None else "")
    return dict(sorted(out.items()))


def prefix_aliases(source: Source) -> dict[str, str]:
    """The variable prefixes the release reads as others ({"SGL_": "SGLANG_"}), from environ.py (none before it)."""
    mod = source.module(_MODULE)
    return _prefix_aliases(mod) if mod is not None else {}


def _mark(out: dict[str, dict[str, Any]], found: Deprecation, path: str) -> None:
    """Add the deprecation note to the variable's facts; a name only the deprecation reads gets the replacement's
    kind when its value is forwarded unchanged."""
    forwarded = out.get(found.replacement or "", {}).get("kind") if found.forwarded else None
    facts = out.setdefault(found.name, EnvRead(found.name, path, forwarded or "unknown").facts())
    if facts["kind"] == "unknown" and forwarded:
        facts["kind"] = forwarded
    facts["deprecated"] = found.note()


def _registry(ev: Evaluator, source: Source) -> dict[str, dict[str, Any]]:
    mod = source.module(_MODULE)
    registry = ev.module_value(mod, _REGISTRY) if mod is not None else None
    if not isinstance(registry, ClassV):
        return {}
    out: dict[str, dict[str, Any]] = {}
    aliases: list[EnvRead] = []
    for stmt in registry.node.body:
        if not (
            isinstance(stmt, ast.Assign)
            and len(stmt.targets) == 1
            and isinstance(stmt.targets[0], ast.Name)
            and isinstance(stmt.value, ast.Call)
        ):
            continue
        cls = ev.eval(stmt.value.func, registry.mod, {})
        if not (isinstance(cls, ClassV) and any(k.node.name == _FIELD_BASE for k in ev.mro(cls))):
            continue
        name, call = stmt.targets[0].id, stmt.value
        kind = _parsed_kind(ev, cls)
        given = call.args[0] if call.args else next((k.value for k in call.keywords if k.arg == "default"), None)
        default = _default(ev.eval(given, registry.mod, {})) if given is not None else None
        out[name] = EnvRead(name, registry.mod.path, kind, default).facts()
        alias = next((k.value for k in call.keywords if k.arg == "deprecated_name"), None)
        if isinstance(alias, ast.Constant) and isinstance(alias.value, str):  # read while `name` is unset
            aliases.append(
                EnvRead(
                    alias.value,
                    registry.mod.path,
                    kind,
                    deprecated=Deprecation(alias.value, name, f"Read only while {name} is unset.").note(),
                )
            )
    for read in aliases:
        out.setdefault(read.name, read.facts())
    return out


def _parsed_kind(ev: Evaluator, cls: ClassV) -> str:
    """The kind the field class's `parse(value)` returns (EnvBool -> bool, EnvTuple -> list, EnvJSON -> json)."""
    for klass in ev.mro(cls):
        parse = next((s for s in klass.node.body if isinstance(s, ast.FunctionDef) and s.name == "parse"), None)
        if parse is not None and parse.returns is not None:
            kind = annotation_kind(text_of(parse.returns))
            if kind == "unknown" and "dict" in text_of(parse.returns):
                return "json"
            return kind
    return "unknown"


def _default(value: V) -> str | None:
    """A field's default as written; a computed one (`EnvBool(_default_hip)`) by its function's name."""
    if isinstance(value, FuncV) and not isinstance(value.node, ast.Lambda):
        return f"{value.node.name}()"
    if isinstance(value, Const | Unknown) or value is not None:
        return default_text(value)
    return None


__all__ = ["PREFIXES", "environment", "prefix_aliases"]
