"""The environment variables a vLLM release reads, from `vllm/envs.py` (0.4.2 on): the `environment_variables`
table maps each name to the function that reads it, and the release warns about (or refuses) a `VLLM_*` variable
missing from it, so the table is the list. Per entry: the variables its function reads (`VLLM_HOST_IP` also falls
back to `HOST_IP`), the kind of value the function returns (`bool(int(os.getenv(...)))`, a helper's return type;
else the `if TYPE_CHECKING:` declaration), the default the read falls back to as written, the choices
`env_with_choices` / `env_list_with_choices` check, and the release's deprecation note: the warning a
`deprecated_env(...)` wrapper gives (0.22, 0.23), else the comment above the entry where it says the variable is
deprecated (`# [DEPRECATED] ...`, `# Deprecated, see profiler_config.`). A name in `removed_environment_variables`
(0.34: setting it is an error) is not in the table, so the release shows it absent, not deprecated. Releases before
envs.py (0.4.0, 0.4.1) read `VLLM_*` variables where they use them: those are found in the whole package."""

from __future__ import annotations

import ast
import re
from typing import Any

from switchover.engines.extract.pyenv import EnvRead, EnvReader, annotation_kind, scan
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import FuncV, Module, text_of

_MODULE = "vllm.envs"
_TABLE = "environment_variables"
_CONVERSIONS = {"int": "int", "float": "float", "bool": "bool", "json.loads": "json", "str": "str"}
_DEPRECATED = re.compile(r"\bdeprecated\b", re.IGNORECASE)
_MAX_NOTE = 240


def environment(ev: Evaluator, source: Source) -> dict[str, dict[str, Any]]:
    """Variable name -> EnvSpan fields (but first/last) for one release."""
    reader = EnvReader(ev)
    mod = source.module(_MODULE)
    table = _table(mod) if mod is not None else None
    if mod is None or table is None:
        return scan(source, ev, ("VLLM_",))
    declared = _declared(mod)
    lines = (source.text(mod.path) or "").split("\n")
    out: dict[str, dict[str, Any]] = {}
    fallbacks: list[EnvRead] = []
    for key_node, value in zip(table.keys, table.values, strict=True):
        if not (isinstance(key_node, ast.Constant) and isinstance(key_node.value, str)):
            continue
        key = key_node.value
        reads = _reads_of(ev, reader, value, mod)
        own = next((r for r in reads if r.name == key), None)
        if own is None and reads:
            fallbacks += reads  # the entry reads other names only (S3_ACCESS_KEY_ID reads S3_ACCESS_KEY)
            continue
        kind = _returned_kind(ev, value, mod)
        if kind == "unknown" and own is not None and own.kind != "unknown":
            kind = own.kind
        if kind == "unknown":
            kind = declared.get(key, "unknown")
        note = _warned(ev, value, mod) or _deprecation(lines, key_node)
        out[key] = EnvRead(
            key, mod.path, kind, own.default if own else None, own.choices if own else None, note
        ).facts()
        fallbacks += [r for r in reads if r.name != key]
    for read in fallbacks:
        out.setdefault(read.name, EnvRead(read.name, mod.path, read.kind, read.default, read.choices).facts())
    return dict(sorted(out.items()))


def _table(mod: Module) -> ast.Dict | None:
    for stmt in mod.index.get(_TABLE, []):
        value = stmt.value if isinstance(stmt, ast.Assign | ast.AnnAssign) else None
        if isinstance(value, ast.Dict):
            return value
    return None


def _warned(ev: Evaluator, value: ast.expr, mod: Module) -> str | None:
    """The warning an entry's wrapper gives when the variable is set (0.22: `deprecated_env(name, "v0.23", hint,
    getter)`), its f-string filled with the entry's arguments: the release's own deprecation note."""
    if not isinstance(value, ast.Call):
        return None
    func = ev.eval(value.func, mod, {})
    if not isinstance(func, FuncV) or isinstance(func.node, ast.Lambda):
        return None
    params = [a.arg for a in [*func.node.args.posonlyargs, *func.node.args.args]]
    bound = {p: a for p, a in zip(params, value.args, strict=False)} | {k.arg: k.value for k in value.keywords if k.arg}
    for call in ast.walk(func.node):
        if not (isinstance(call, ast.Call) and text_of(call.func).endswith("warn") and call.args):
            continue
        text = _filled(call.args[0], bound)
        if text is not None and _DEPRECATED.search(text):
            return _short(text)
    return None


def _filled(message: ast.expr, bound: dict[str, ast.expr]) -> str | None:
    """A warning's text with its {param} parts taken from string constants the call passed (None: not all are)."""
    parts = message.values if isinstance(message, ast.JoinedStr) else [message]
    out = []
    for part in parts:
        if isinstance(part, ast.FormattedValue) and isinstance(part.value, ast.Name):
            part = bound.get(part.value.id, part)
        if not (isinstance(part, ast.Constant) and isinstance(part.value, str)):
            return None
        out.append(part.value)
    return "".join(out)


def _short(note: str) -> str:
    note = " ".join(note.split())
    return note if len(note) <= _MAX_NOTE else note[: _MAX_NOTE - 3] + "..."


def _deprecation(lines: list[str], key: ast.expr) -> str | None:
    """The comment block right above a table entry, when it says the variable is deprecated."""
    block: list[str] = []
    for line in reversed(lines[: key.lineno - 1]):
        text = line.strip()
        if not text.startswith("#"):
            break
        block.insert(0, text.lstrip("#").strip())
    note = " ".join(block)
    return _short(note) if _DEPRECATED.search(note) else None


def _declared(mod: Module) -> dict[str, str]:
    """Kinds from the `if TYPE_CHECKING:` block (`VLLM_PORT: Optional[int] = None`)."""
    out: dict[str, str] = {}
    for stmt in mod.node.body:
        if isinstance(stmt, ast.If) and text_of(stmt.test).endswith("TYPE_CHECKING"):
            for decl in stmt.body:
                if isinstance(decl, ast.AnnAssign) and isinstance(decl.target, ast.Name):
                    out[decl.target.id] = annotation_kind(text_of(decl.annotation))
    return out


def _reads_of(ev: Evaluator, reader: EnvReader, value: ast.expr, mod: Module) -> list[EnvRead]:
    """The reads an entry's function makes: in the lambda (or call) itself, and in the module's own functions it
    calls or names without passing a variable name (`get_vllm_port`, `disable_compile_cache()`)."""
    reads = reader.reads(value, mod)
    for sub in ast.walk(value):
        if isinstance(sub, ast.Name):
            found = ev.eval(sub, mod, {})
            if isinstance(found, FuncV) and found.mod is mod and not isinstance(found.node, ast.Lambda):
                reads += reader.reads(found.node, mod)
    return reads


def _returned_kind(ev: Evaluator, value: ast.expr, mod: Module) -> str:
    """The kind of what an entry's function returns, from its outermost expression."""
    body: ast.expr = value.body if isinstance(value, ast.Lambda) else value
    if isinstance(body, ast.Compare):
        return "bool"
    if isinstance(body, ast.BoolOp):
        kinds = {_returned_kind(ev, v, mod) for v in body.values}
        return kinds.pop() if len(kinds) == 1 else "unknown"
    func = body.func if isinstance(body, ast.Call) else body if isinstance(body, ast.Name) else None
    if func is None:
        return "unknown"
    if isinstance(body, ast.Call) and text_of(func) in _CONVERSIONS:
        return _CONVERSIONS[text_of(func)]
    found = ev.eval(func, mod, {})
    if isinstance(found, FuncV) and not isinstance(found.node, ast.Lambda) and found.node.returns is not None:
        return annotation_kind(text_of(found.node.returns))
    return "unknown"


__all__ = ["environment"]
