"""Python argparse option definitions read from a release's source with `ast` (through `pyeval`): the parsers a
function builds, every `add_argument` call they see, and what argparse makes of each one: spellings, whether it
takes a value, the value's kind, choices, default, `--no-x` negation and deprecation notes (FlagSpan fields).

Engines layer their own helpers on top (vLLM's `get_kwargs(Config)`, SGLang's dataclass fields) with evaluator
hooks; this module knows only argparse.
"""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import (
    ClassV,
    Const,
    Ext,
    FuncV,
    Generic,
    Instance,
    Map,
    Member,
    Method,
    Module,
    Seq,
    Unknown,
    V,
    plain,
    text_of,
)

ARGPARSE_PARSERS = {"argparse.ArgumentParser"}
_SWITCH_ACTIONS = {"store_true", "store_false", "store_const", "count", "help", "version", "append_const"}
_SWITCH_BASES = {"_StoreTrueAction", "_StoreFalseAction", "_StoreConstAction", "_CountAction", "_AppendConstAction"}
_KIND_NAMES = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "json.loads": "json",
    "ast.literal_eval": "json",
    "loads": "json",
    "dict": "json",
    "list": "list",
    "Path": "str",
    "pathlib.Path": "str",
}
_MAX_NOTE = 240
_LITERAL_PARSERS = {"json.loads", "ast.literal_eval", "literal_eval"}


@dataclass(eq=False)
class Option:
    """One `add_argument` call: its option strings, keyword arguments (evaluated) and the file it is in."""

    strings: list[str]
    kwargs: dict[str, V]
    path: str


@dataclass(eq=False)
class ParserV(V):
    """An argparse parser built by the code read (its class, constructor keywords, options added)."""

    cls: V
    kwargs: dict[str, V]
    label: str = ""
    options: list[Option] = field(default_factory=list)
    path: str = ""


@dataclass(eq=False)
class GroupV(V):
    parser: ParserV


@dataclass(eq=False)
class SubparsersV(V):
    parent: ParserV
    children: dict[str, ParserV] = field(default_factory=dict)


def is_parser_class(ev: Evaluator, value: V) -> bool:
    if isinstance(value, Ext):
        return value.dotted in ARGPARSE_PARSERS
    return isinstance(value, ClassV) and bool(ev.base_names(value) & ARGPARSE_PARSERS)


def argparse_hook(ev: Evaluator, func: V, args: list[V], kwargs: dict[str, V]) -> V | None:
    """Calls that build parsers and add options to them."""
    if is_parser_class(ev, func):
        return ParserV(func, kwargs, path=ev.site.path if ev.site else "")
    if not isinstance(func, Method):
        return None
    obj, name = func.obj, func.name
    parser = obj.parser if isinstance(obj, GroupV) else obj
    if isinstance(parser, ParserV):
        if name == "add_argument":
            strings = [str(a.value) for a in args if isinstance(a, Const) and isinstance(a.value, str)]
            parser.options.append(Option(strings, kwargs, ev.site.path if ev.site else ""))
            return Unknown("action")
        if name in ("add_argument_group", "add_mutually_exclusive_group"):
            return GroupV(parser)
        if name == "add_subparsers":
            return SubparsersV(parser)
        return Const(None) if name in ("set_defaults", "set_defaults_from") else Unknown(f"parser.{name}(...)")
    if isinstance(obj, SubparsersV) and name == "add_parser":
        label = str(plain(args[0])) if args and isinstance(args[0], Const) else "?"
        child = ParserV(obj.parent.cls, kwargs, label=label, path=ev.site.path if ev.site else "")
        obj.children[label] = child
        return child
    return None


def run_function(ev: Evaluator, mod: Module, name: str, args: list[V]) -> V:
    """Call a module-level function of the release with the given arguments (e.g. make_arg_parser(parser))."""
    func = ev.module_value(mod, name)
    if not isinstance(func, FuncV):
        raise LookupError(f"{mod.path} has no function {name}")
    return ev.run(func, args, {})


def new_parser(ev: Evaluator, cls: V) -> ParserV:
    return ParserV(cls, {}, path=ev.site.path if ev.site else "")


# --- argparse semantics
def flag_facts(ev: Evaluator, opt: Option) -> tuple[str, dict[str, Any]] | None:
    """The canonical name and FlagSpan fields of one option (None for a positional argument)."""
    longs = [s for s in opt.strings if s.startswith("--")]
    if not opt.strings or not opt.strings[0].startswith("-"):
        return None
    name = longs[0] if longs else opt.strings[0]
    kw = opt.kwargs
    switch, negatable = _action(ev, kw.get("action"))
    nargs = _plain_or(kw.get("nargs"), None)
    takes_value = not switch and nargs != 0
    kind = "bool" if switch else _kind(ev, kw.get("type"), nargs)
    facts: dict[str, Any] = {
        "path": opt.path,
        "aliases": [s for s in opt.strings if s != name],
        "takes_value": takes_value,
        "kind": kind,
    }
    if takes_value and nargs == "?":
        facts["value_optional"] = True
    choices = kw.get("choices")
    if choices is not None and not switch:
        listed = choices_of(ev, choices)
        if listed is not None:
            facts["choices"] = listed
    if "choices" not in facts and isinstance(kw.get("type"), Generic):
        literal = literal_values(kw["type"])
        if literal is not None:
            facts["choices"] = literal
    if kind == "unknown" and facts.get("choices"):  # type=lambda s: s.lower(): the choices say what it takes
        facts["kind"] = _kind_of_values([c for c in facts["choices"] if c != "None"])
    default = default_text(kw.get("default")) if "default" in kw else None
    if default is not None:
        facts["default"] = default
    if negatable:  # BooleanOptionalAction adds --no-X for every long option string
        negatives = ["--no-" + s[2:] for s in [name, *longs] if s.startswith("--")]
        negatives = list(dict.fromkeys(negatives))
        facts["negation"] = negatives[0]
        if negatives[1:]:
            facts["negations"] = negatives[1:]
    note = deprecation(kw, opt.strings)
    if note:
        facts["deprecated"] = note
    return name, facts


def _plain_or(value: V | None, fallback: Any) -> Any:
    try:
        return plain(value) if value is not None else fallback
    except ValueError:
        return fallback


def _action(ev: Evaluator, action: V | None) -> tuple[bool, bool]:
    """(is a switch taking no value, has a --no- form)."""
    if action is None:
        return False, False
    if isinstance(action, Const) and isinstance(action.value, str):
        return action.value in _SWITCH_ACTIONS, False
    if isinstance(action, Ext):
        short = action.short
        return short in _SWITCH_BASES or short == "BooleanOptionalAction", short == "BooleanOptionalAction"
    if isinstance(action, ClassV):
        bases = {b.rsplit(".", 1)[-1] for b in ev.base_names(action)}
        if "BooleanOptionalAction" in bases:
            return True, True
        if bases & _SWITCH_BASES:
            return True, False
        init = next(
            (s for k in ev.mro(action) for s in k.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"),
            None,
        )
        return init is not None and "nargs=0" in text_of(init).replace(" ", ""), False
    return False, False


def _kind(ev: Evaluator, typ: V | None, nargs: Any) -> str:
    if nargs in ("+", "*") or (isinstance(nargs, int) and nargs > 1):
        return "list"
    if typ is None:
        return "str"
    return type_kind(ev, typ)


def type_kind(ev: Evaluator, typ: V) -> str:
    """The kind of value an argparse `type=` callable produces."""
    if isinstance(typ, Ext):
        return _KIND_NAMES.get(typ.dotted) or _KIND_NAMES.get(typ.short) or _by_name(typ.short)
    if isinstance(typ, Generic):
        values = literal_values(typ)
        return _kind_of_values(values) if values else "unknown"
    if isinstance(typ, ClassV):
        return "str" if ev.is_enum(typ) else "json"
    if isinstance(typ, FuncV):
        return _func_kind(ev, typ)
    return "unknown"


def _func_kind(ev: Evaluator, func: FuncV) -> str:
    node = func.node
    if isinstance(node, ast.Lambda):
        return _by_name(text_of(node.body))
    named = _by_name(node.name)
    if named != "unknown":
        return named
    for value in (func.closure or {}).values():  # optional_type(int): the wrapped type decides
        if isinstance(value, Ext | FuncV) and value is not func:
            inner = type_kind(ev, value)
            if inner != "unknown":
                return inner
    if node.returns is not None:
        ret = text_of(node.returns).replace("Optional[", "").replace("typing.", "")
        for word, kind in (
            ("bool", "bool"),
            ("int", "int"),
            ("float", "float"),
            ("list", "list"),
            ("List", "list"),
            ("str", "str"),
        ):
            if re.match(rf"^{word}\b", ret):
                return kind
        if re.match(r"^(dict|Dict|Mapping)\b", ret):
            return "json" if "json" in text_of(node) else "str"
    if any(isinstance(c, ast.Call) and text_of(c.func) in _LITERAL_PARSERS for c in ast.walk(node)):
        return "json"  # vLLM 0.6.5 CompilationConfig.from_cli: a level ("3") or a dict literal, both JSON values
    return _by_name(text_of(node))


def _by_name(text: str) -> str:
    low = text.lower()
    for needle, kind in (
        ("json", "json"),
        ("float", "float"),
        ("bool", "bool"),
        ("int", "int"),
        ("list", "list"),
        ("str", "str"),
    ):
        if needle in low:
            return kind
    return "unknown"


def literal_values(typ: V) -> list[str] | None:
    if isinstance(typ, Generic) and typ.origin == "Literal":
        try:
            return [_choice(plain(a)) for a in typ.args]
        except ValueError:
            return None
    return None


def _kind_of_values(values: list[str]) -> str:
    return "int" if values and all(re.fullmatch(r"-?\d+", v) for v in values) else "str"


def choices_of(ev: Evaluator, value: V) -> list[str] | None:
    """Literal choices as strings (None when they cannot be read statically)."""
    if isinstance(value, Generic):
        return literal_values(value)
    items = ev.iterate(value)
    if items is None:
        return None
    out = []
    for item in items:
        try:
            out.append(_choice(plain(item)))
        except ValueError:
            return None
    return out


def _choice(value: Any) -> str:
    return "None" if value is None else str(value)


def default_text(value: V | None) -> str | None:
    """The default as the release writes it: a constant's value, else the expression's source text."""
    if value is None:
        return None
    if isinstance(value, Const):
        return None if value.value is None else str(value.value)
    if isinstance(value, Member):
        return default_text(value.value)
    try:
        return repr(plain(value))
    except ValueError:
        pass
    if isinstance(value, Unknown):
        return value.text
    if isinstance(value, Ext):
        return value.dotted
    if isinstance(value, Instance):
        return f"{value.cls.node.name}()"
    return None


_DEPRECATED_LEAD = re.compile(r"^\W*deprecated\b", re.IGNORECASE)
_DEPRECATED_ANY = re.compile(r"\b(is|are|has been|now) deprecated\b|\bwill be removed\b", re.IGNORECASE)


def deprecation(kwargs: dict[str, V], strings: list[str]) -> str | None:
    """The release's own deprecation note for an option: `deprecated=True`, or help that says so about it."""
    help_value = kwargs.get("help")
    text = str(help_value.value) if isinstance(help_value, Const) and isinstance(help_value.value, str) else ""
    if text == "==SUPPRESS==":
        text = ""
    marked = isinstance(kwargs.get("deprecated"), Const) and bool(plain(kwargs["deprecated"]))
    if not marked and not _DEPRECATED_LEAD.search(text):
        named = set(re.findall(r"--[\w-]+", text))
        if not _DEPRECATED_ANY.search(text) or (named and not named & set(strings)):
            return None
    note = " ".join(text.split())
    return (note[: _MAX_NOTE - 3] + "...") if len(note) > _MAX_NOTE else (note or "deprecated")


def parser_rules(ev: Evaluator, parser: ParserV) -> tuple[bool, str]:
    """(allow_abbrev, path that says so) for a parser as constructed: argparse's default is True."""
    allow = parser.kwargs.get("allow_abbrev")
    if isinstance(allow, Const):
        return bool(allow.value), parser.path
    if isinstance(parser.cls, ClassV):
        init = next((s for s in parser.cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
        if init is not None and "allow_abbrev" in text_of(init):
            return "allow_abbrev=False" not in text_of(init).replace(" ", ""), parser.cls.mod.path
    return True, parser.path


def attached_short(flags: dict[str, dict[str, Any]]) -> bool:
    """Whether the options hold a one-letter short option that takes a value: argparse reads `-q VALUE` typed as
    `-qVALUE` (or `-q=VALUE`) for any such option, so a launch may attach the value."""
    return any(
        facts.get("takes_value") and any(re.fullmatch(r"-[^-]", s) for s in (name, *facts.get("aliases", [])))
        for name, facts in flags.items()
    )


def collect(ev: Evaluator, parsers: list[ParserV]) -> dict[str, dict[str, Any]]:
    """Every option of the parsers by canonical name (the first definition wins, as argparse keeps it)."""
    out: dict[str, dict[str, Any]] = {}
    for parser in parsers:
        for opt in parser.options:
            found = flag_facts(ev, opt)
            if found is None:
                continue
            name, facts = found
            out.setdefault(name, facts)
    return out


def evaluator(source: Source, hooks: list[Any] | None = None) -> Evaluator:
    """An evaluator that knows argparse, plus the engine's own hooks (tried first)."""
    return Evaluator(source, [*(hooks or []), argparse_hook])


__all__ = [
    "GroupV",
    "Map",
    "Option",
    "ParserV",
    "Seq",
    "SubparsersV",
    "argparse_hook",
    "choices_of",
    "collect",
    "default_text",
    "deprecation",
    "evaluator",
    "flag_facts",
    "is_parser_class",
    "literal_values",
    "new_parser",
    "parser_rules",
    "run_function",
    "type_kind",
]
