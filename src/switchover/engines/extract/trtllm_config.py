"""The keys trtllm-serve's `--config` / `--extra_llm_api_options` YAML accepts, read from tensorrt_llm/llmapi/
llm_args.py without importing it: every field of `TorchLlmArgs` (the PyTorch backend, trtllm-serve's default; the
`LLM` constructor refuses any key that is not one of its `model_fields`) and, for a field whose type is a config
class of the package (kv_cache_config: KvCacheConfig, speculative_config: a union of decoding configs, ...), that
class's fields as dotted keys. Each key becomes a FlagSpan fact named `yaml:<dotted key>`.

What a key accepts follows pydantic's rules on the field's type hint: bool, int, float, str, a Literal or an enum of
the package (choices; none when a plain str is also accepted), a list, a mapping (json). A union of config classes
(speculative_config) has the keys of each member and the discriminator its `from_dict` dispatches on
(`decoding_type`), with the dispatch table's keys as choices. A free-form mapping (dict) is kind json with no nested
keys, and so is nothing else: its keys are anyone's, unknown rather than absent. A type that cannot be read (a class
from a file not in the tree, `object`) is kind unknown.
"""

from __future__ import annotations

import ast
from typing import Any

from switchover.engines.extract.pyeval import Evaluator
from switchover.engines.extract.pytypes import Atom, atoms, class_kind
from switchover.engines.extract.pyvalues import ClassV, Const, FieldDef, FuncV, Generic, Member, V, text_of

LLM_ARGS = "tensorrt_llm/llmapi/llm_args.py"
LLM_ARGS_MODULE = "tensorrt_llm.llmapi.llm_args"
ROOT = "TorchLlmArgs"
PREFIX = "yaml:"
MAX_DEPTH = 3  # scheduler_config.dynamic_batch_config.enable_batch_size_tuning
_ANY = ("object", "Any")


def config_keys(ev: Evaluator) -> dict[str, dict[str, Any]]:
    """`yaml:<dotted key>` -> FlagSpan facts (but first/last), for every key of TorchLlmArgs and its sections."""
    mod = ev.source.module(LLM_ARGS_MODULE)
    root = ev.module_value(mod, ROOT) if mod is not None else None
    if not isinstance(root, ClassV):
        return {}
    out: dict[str, dict[str, Any]] = {}
    _section(ev, [root], "", out, depth=1)
    return out


def _section(ev: Evaluator, classes: list[ClassV], prefix: str, out: dict[str, dict[str, Any]], depth: int) -> None:
    """The fields of one section (several classes for a union: each member's keys, first definition kept)."""
    for cls in classes:
        for fdef in ev.fields(cls):
            if fdef.name.startswith("_"):
                continue  # a private attribute, not a model field
            names = _accepted_names(fdef)
            key = PREFIX + prefix + names[0]
            if key in out:
                continue
            hint = ev.annotation(fdef.annotation, fdef.owner.mod)
            found = [a for a in atoms(ev, hint) if a.kind != "None"]
            classes = _classes(hint)
            facts = _facts(ev, fdef, found, classes)
            facts["aliases"] = [PREFIX + prefix + n for n in names[1:]]
            out[key] = facts
            members = [c for c in classes if class_kind(ev, c) == "dataclass"]
            if members and depth < MAX_DEPTH:
                _section(ev, members, prefix + names[0] + ".", out, depth + 1)
                _discriminator(ev, members, prefix + names[0] + ".", out)


def _accepted_names(fdef: FieldDef) -> list[str]:
    """The spellings pydantic validates a field by: its alias, the choices of a validation alias, else its name."""
    call = fdef.default if isinstance(fdef.default, ast.Call) else None
    kw = {k.arg: k.value for k in call.keywords if k.arg} if call is not None else {}
    alias = kw.get("alias")
    if isinstance(alias, ast.Constant) and isinstance(alias.value, str):
        return [alias.value]
    choices = kw.get("validation_alias")
    if isinstance(choices, ast.Call) and text_of(choices.func).endswith("AliasChoices"):
        names = [a.value for a in choices.args if isinstance(a, ast.Constant) and isinstance(a.value, str)]
        if names:
            return names
    if isinstance(choices, ast.Constant) and isinstance(choices.value, str):
        return [choices.value]
    return [fdef.name]


def _classes(hint: V) -> list[ClassV]:
    """The package's classes a type hint names (the members of a union, through Optional and Annotated)."""
    if isinstance(hint, ClassV):
        return [hint]
    if isinstance(hint, Generic) and hint.origin in ("Optional", "Union", "UnionType", "Annotated"):
        args = hint.args[:1] if hint.origin == "Annotated" else hint.args
        out: list[ClassV] = []
        for arg in args:
            out += [c for c in _classes(arg) if all(c.node is not o.node for o in out)]
        return out
    return []


def _facts(ev: Evaluator, fdef: FieldDef, found: list[Atom], classes: list[ClassV]) -> dict[str, Any]:
    kind, choices = _kind(ev, found, classes)
    call = fdef.default if isinstance(fdef.default, ast.Call) and text_of(fdef.default.func).endswith("Field") else None
    kw = {k.arg: k.value for k in call.keywords if k.arg} if call is not None else {}
    default_node = (
        kw.get("default", call.args[0] if call is not None and call.args else None)
        if call is not None
        else fdef.default
    )
    return {
        "path": fdef.owner.mod.path,
        "takes_value": True,
        "kind": kind,
        "choices": choices,
        "default": _default(ev, default_node, fdef),
        "negation": None,
        "deprecated": _deprecated(kw),
    }


def _kind(ev: Evaluator, found: list[Atom], classes: list[ClassV]) -> tuple[str, list[str] | None]:
    """FlagSpan kind and choices of a field's type (None members dropped)."""
    kinds = {a.kind for a in found}
    if not found or any(a.kind == "other" and a.name.rsplit(".", 1)[-1] in _ANY for a in found):
        return "unknown", None  # object / Any: whatever YAML gives
    if "dataclass" in kinds or kinds <= {"dict", "dictlike"}:
        return "json", None
    if kinds <= {"list", "tuple", "set"}:
        return "list", None
    if kinds == {"bool"}:
        return "bool", None
    closed = [a for a in found if a.kind in ("Literal", "enum")]
    if closed and len(closed) == len(found):
        values = [v.value for a in closed if a.kind == "Literal" for v in a.values if isinstance(v, Const)]
        values += [
            m.value.value for c in classes if ev.is_enum(c) for m in ev.enum_members(c) if isinstance(m.value, Const)
        ]
        if values and all(isinstance(v, str) for v in values):
            return "str", list(dict.fromkeys(values))
        if values and all(isinstance(v, int) and not isinstance(v, bool) for v in values):
            return "int", [str(v) for v in dict.fromkeys(values)]
        return "unknown", None
    if kinds <= {"int", "float"}:
        return ("float" if "float" in kinds else "int"), None
    if "str" in kinds and kinds <= {"str", "other", "enum", "Literal"}:
        return "str", None  # a plain str is accepted too (Path, an enum beside str): no closed set
    return "unknown", None


def _default(ev: Evaluator, node: ast.expr | None, fdef: FieldDef) -> str | None:
    """A default as written when it is a constant or an enum member of the package (a factory is None)."""
    if node is None:
        return None
    value: V = ev.eval(node, fdef.owner.mod, {})
    if isinstance(value, Member):  # an enum member: its string value, else its name (LoadFormat.AUTO is 0)
        value = (
            value.value if isinstance(value.value, Const) and isinstance(value.value.value, str) else Const(value.name)
        )
    if (
        not isinstance(value, Const)
        or value.value is None
        or value.value is Ellipsis
        or isinstance(value.value, (list, dict))
    ):
        return None  # none, required (`...`), or built by a factory
    return str(value.value).lower() if isinstance(value.value, bool) else str(value.value)


def _deprecated(kw: dict[str, ast.expr]) -> str | None:
    """The field's own deprecation note: `deprecated="..."`, or `status="deprecated"` with its description."""
    note = kw.get("deprecated")
    if isinstance(note, ast.Constant) and isinstance(note.value, str):
        return note.value[:300]
    status = kw.get("status")
    if isinstance(status, ast.Constant) and status.value == "deprecated":
        description = _text(kw.get("description"))
        return f"deprecated: {description}"[:300] if description else "deprecated"
    return None


def _text(node: ast.expr | None) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _text(node.left) + _text(node.right)
    return ""


def _discriminator(ev: Evaluator, members: list[ClassV], prefix: str, out: dict[str, dict[str, Any]]) -> None:
    """A union of config classes read through a `from_dict(data)` that dispatches on `data.get("<key>")` to a
    table of classes: that key, with the table's keys as choices (speculative_config.decoding_type)."""
    if len(members) < 2:
        return
    for cls in members:
        for klass in ev.mro(cls):
            func = ev.attr(klass, "from_dict")
            if not isinstance(func, FuncV) or func.owner is None or func.owner.node is not klass.node:
                continue
            found = _dispatch(func)
            if found is not None:
                key, choices = found
                out.setdefault(
                    PREFIX + prefix + key,
                    {
                        "path": klass.mod.path,
                        "aliases": [],
                        "takes_value": True,
                        "kind": "str",
                        "choices": choices,
                        "default": None,
                        "negation": None,
                        "deprecated": None,
                    },
                )
                return


def _dispatch(func: FuncV) -> tuple[str, list[str]] | None:
    """The key `data.get("<key>")` reads and the string keys of a {"name": Class, ...} table in one function."""
    key = None
    table: list[str] = []
    for node in ast.walk(func.node):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "get"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            key = key or node.args[0].value
        if (
            isinstance(node, ast.Dict)
            and node.keys
            and not table
            and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
            and all(isinstance(v, ast.Name) for v in node.values)
        ):
            table = [str(k.value) for k in node.keys if isinstance(k, ast.Constant)]
    return (key, table) if key is not None and table else None
