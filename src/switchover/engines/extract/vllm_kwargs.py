"""vLLM's `get_kwargs(Config)` read statically: the argparse keywords each config dataclass field becomes (from
0.8, `vllm/engine/arg_utils.py`): a bool is a `--x/--no-x` switch, a Literal gives choices, a list takes several
values, a dict or a nested config takes JSON, an Optional adds 'None' to the choices.

The branches differ by release (nested configs as JSON, `{bool, str, None}` as an optional value), so which ones
the release has is read from its own `get_kwargs` / `_compute_kwargs` source.
"""

from __future__ import annotations

from dataclasses import dataclass

from switchover.engines.extract.pyeval import Evaluator
from switchover.engines.extract.pytypes import Atom, atoms, field_default, field_doc, get, has
from switchover.engines.extract.pyvalues import ClassV, Const, Ext, FuncV, Generic, Map, Seq, V, text_of


@dataclass(frozen=True)
class ConfigRules:
    """Which of get_kwargs's type branches the release has."""

    dataclass_json: bool  # a nested config dataclass is read from JSON
    optional_value: bool  # bool | str | None: a bare flag is True, else a string (nargs='?')

    @classmethod
    def read(cls, ev: Evaluator, func: FuncV) -> ConfigRules:
        text = text_of(func.node)
        inner = ev.module_value(func.mod, "_compute_kwargs")
        if isinstance(inner, FuncV):
            text += text_of(inner.node)
        return cls(
            dataclass_json="is_dataclass" in text, optional_value="{bool, str, type(None)}" in text.replace("\n", " ")
        )


def config_kwargs(ev: Evaluator, cls: ClassV, rules: ConfigRules) -> Map:
    """field name -> argparse keywords, for every field of a config dataclass (inherited ones included)."""
    out: dict[str, V] = {}
    for fdef in ev.fields(cls):
        hint = ev.annotation(fdef.annotation, fdef.owner.mod)
        found = atoms(ev, hint)
        kw: dict[str, V] = {"help": Const(field_doc(fdef))}
        default = field_default(ev, fdef)
        if default is not None:
            kw["default"] = default
        kw.update(_by_type(found, rules))
        choices = kw.get("choices")
        if has(found, "None") and not has(found, "bool") and isinstance(choices, Seq):
            kw["choices"] = Seq([*choices.items, Const(None)])
        out[fdef.name] = Map(kw)
    return Map(out)


def _by_type(found: list[Atom], rules: ConfigRules) -> dict[str, V]:
    kinds = {a.kind for a in found}
    if rules.dataclass_json and "dataclass" in kinds:
        return {"type": Ext("json.loads")}
    if rules.optional_value and kinds == {"bool", "str", "None"}:
        return {"type": Ext("str"), "nargs": Const("?"), "const": Const(True)}
    if "bool" in kinds:
        return {"action": Ext("argparse.BooleanOptionalAction")}
    literal = get(found, "Literal")
    if literal is not None:
        return _literal(literal)
    for collection in ("tuple", "list", "set"):
        atom = get(found, collection)
        if atom is not None:
            return _collection(atom)
    for scalar in ("int", "float"):
        if scalar in kinds:
            return {"type": Ext(scalar)}
    if kinds & {"dict", "dictlike"}:
        return {"type": Ext("json.loads")}
    return {"type": Ext("str")}


def _literal(atom: Atom) -> dict[str, V]:
    values = list(atom.values)
    first = values[0].value if values and isinstance(values[0], Const) else ""
    return {
        "choices": Seq(values),
        "type": Ext("int" if isinstance(first, int) and not isinstance(first, bool) else "str"),
    }


def _collection(atom: Atom) -> dict[str, V]:
    elements = [
        a
        for a in atom.values
        if not (isinstance(a, Ext) and a.short == "Ellipsis") and not (isinstance(a, Const) and a.value is Ellipsis)
    ]
    kw: dict[str, V] = {"nargs": Const("+")}
    first = elements[0] if elements else Ext("str")
    if isinstance(first, Generic) and first.origin == "Literal":
        kw["choices"] = Seq(list(first.args))
        kw["type"] = Ext("str")
    else:
        kw["type"] = first if isinstance(first, Ext) else Ext("str")
    return kw
