"""The environment variables a vLLM release reads, from `vllm/envs.py` (0.4.2 on): the `environment_variables`
table maps each name to the function that reads it, and the release warns about (or refuses) a `VLLM_*` variable
missing from it, so the table is the list. Per entry: the variables its function reads (`VLLM_HOST_IP` also falls
back to `HOST_IP`), the kind of value the function returns (`bool(int(os.getenv(...)))`, a helper's return type;
else the `if TYPE_CHECKING:` declaration), the default the read falls back to as written, and the choices
`env_with_choices` / `env_list_with_choices` check. Releases before envs.py (0.4.0, 0.4.1) read `VLLM_*` variables
where they use them: those are found in the whole package."""

from __future__ import annotations

import ast
from typing import Any

from switchover.engines.extract.pyenv import EnvRead, EnvReader, annotation_kind, scan
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import FuncV, Module, text_of

_MODULE = "vllm.envs"
_TABLE = "environment_variables"
_CONVERSIONS = {"int": "int", "float": "float", "bool": "bool", "json.loads": "json", "str": "str"}


def environment(ev: Evaluator, source: Source) -> dict[str, dict[str, Any]]:
    """Variable name -> EnvSpan fields (but first/last) for one release."""
    reader = EnvReader(ev)
    mod = source.module(_MODULE)
    table = _table(mod) if mod is not None else None
    if mod is None or table is None:
        return scan(source, ev, ("VLLM_",))
    declared = _declared(mod)
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
        out[key] = EnvRead(key, mod.path, kind, own.default if own else None, own.choices if own else None).facts()
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
