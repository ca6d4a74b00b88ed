"""SGLang launch options, parser rules and Prometheus series, read from one release's Python source (no import).

Options are what `python -m sglang.launch_server` parses: a plain `argparse.ArgumentParser` filled by
`ServerArgs.add_cli_args(parser)` (sglang/srt/server_args.py). Late 0.5 releases declare most options as annotated
fields of namespace classes (`tp_size: A[int, Arg(help=..., aliases=[...])] = 1` in sglang/srt/arg_groups/fields/)
registered by `add_cli_args_from_dataclass`; that helper is read here by its rules, so each option cites the file
that declares its field. argparse allows unique prefixes (`--tp` for `--tp-size`) unless the parser says otherwise.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.extract.pyargs import GroupV, Option, ParserV, attached_short, collect, evaluator, new_parser
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pymetrics import metrics_in
from switchover.engines.extract.pytypes import atoms, field_default
from switchover.engines.extract.pyvalues import (
    ClassV,
    Const,
    Ext,
    FieldDef,
    FuncV,
    Generic,
    Instance,
    Map,
    Method,
    Seq,
    Unknown,
    V,
    text_of,
)
from switchover.engines.extract.sglang_environ import environment, prefix_aliases
from switchover.engines.releases import ParserRules

_SERVER_ARGS = "sglang.srt.server_args"
_PARSER_SITES = (("sglang/srt/server_args.py", "prepare_server_args"), ("sglang/launch_server.py", None))
# collectors, plus the HTTP request series that lived in the utils module before observability/ (0.5.x)
_METRIC_FILES = (
    "sglang/srt/metrics/",
    "sglang/srt/observability/",
    "sglang/srt/utils/common.py",
    "sglang/srt/utils.py",
)
_REGISTRY_OPTIONS = ("--reasoning-parser", "--tool-call-parser")  # parser registries plugins register into


def extract(tree: SourceTree) -> Extracted:
    """Every launch option of `sglang.launch_server`, the parser's matching rules and the metric names."""
    source = Source(tree, "sglang")
    ev = evaluator(source, [_dataclass_hook])
    mod = source.module(_SERVER_ARGS)
    server_args = ev.module_value(mod, "ServerArgs") if mod is not None else None
    rules = _rules(source)
    add = ev.attr(server_args, "add_cli_args") if isinstance(server_args, ClassV) else None
    if not isinstance(server_args, ClassV) or not isinstance(add, FuncV):
        return Extracted(parser=rules)
    parser = new_parser(ev, Ext("argparse.ArgumentParser"))
    ev.run(add, [parser], {})
    flags = collect(ev, [parser])
    rules = rules.model_copy(update={"attached_short": attached_short(flags)})
    if _plugins_first(source):
        _open_choices(ev, server_args, parser, flags)
    metrics = metrics_in(source, _METRIC_FILES, prefix="sglang:")
    env = environment(ev, source)
    # the files options and metrics come from (each environment variable cites its own file: they are many)
    cited = {f["path"] for f in flags.values()} | {m["path"] for m in metrics.values()} | {rules.source}
    return Extracted(
        parser=rules,
        flags=flags,
        metrics=metrics,
        files=sorted(cited),
        environment=env,
        env_prefix_aliases=prefix_aliases(source),
    )


def _rules(source: Source) -> ParserRules:
    """argparse's prefix matching, unless the launch parser is built with allow_abbrev=False; no underscores (a value
    attached to a one-letter option is argparse's too: set once the options are known)."""
    for path, function in _PARSER_SITES:
        text = source.text(path)
        if text is None:
            continue
        tree = ast.parse(text)
        scope: ast.AST = (
            next((n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef) and n.name == function), tree)
            if function
            else tree
        )
        calls = [n for n in ast.walk(scope) if isinstance(n, ast.Call) and text_of(n.func).endswith("ArgumentParser")]
        if calls:
            off = any(
                k.arg == "allow_abbrev" and isinstance(k.value, ast.Constant) and k.value.value is False
                for c in calls
                for k in c.keywords
            )
            return ParserRules(abbrev=not off, underscores=False, source=path)
    return ParserRules(abbrev=True, underscores=False, source="sglang/launch_server.py")


def _plugins_first(source: Source) -> bool:
    """Whether `python -m sglang.launch_server` loads plugins before it parses (they may add choices)."""
    text = source.text("sglang/launch_server.py") or ""
    plugins, parse = text.find("load_plugins()"), text.find("prepare_server_args(sys.argv")
    return 0 <= plugins < parse


def _open_choices(ev: Evaluator, server_args: ClassV, parser: ParserV, flags: dict[str, dict[str, Any]]) -> None:
    """Choices a plugin can extend before parsing are open: lists the release's `add_<x>_choices(...)` functions
    extend, and the reasoning / tool-call parser registries."""
    extendable: set[int] = set()
    for name in server_args.mod.index:
        if not re.fullmatch(r"add_\w+_choices", name):
            continue
        func = ev.module_value(server_args.mod, name)
        if isinstance(func, Method) and func.name in ("extend", "append"):  # add_x_choices = X_CHOICES.extend
            extendable.add(id(func.obj))
        if not isinstance(func, FuncV) or isinstance(func.node, ast.Lambda):
            continue
        for node in ast.walk(func.node):
            if (
                isinstance(node, ast.Call)
                and isinstance(node.func, ast.Attribute)
                and node.func.attr in ("extend", "append", "add", "update")
                and isinstance(node.func.value, ast.Name)
            ):
                extendable.add(id(ev.module_value(func.mod, node.func.value.id)))
    for opt in parser.options:
        longs = [s for s in opt.strings if s.startswith("--")]
        facts = flags.get(longs[0]) if longs else None
        if facts is None or "choices" not in facts:
            continue
        if id(opt.kwargs.get("choices")) in extendable or longs[0] in _REGISTRY_OPTIONS:
            facts["choices_open"] = True


def _dataclass_hook(ev: Evaluator, func: V, args: list[V], kwargs: dict[str, V]) -> V | None:
    """`add_cli_args_from_dataclass(parser, cls)`: one option per annotated field, by the helper's rules;
    `_declared_default(name)`: that field's default."""
    name = getattr(func.node, "name", "") if isinstance(func, FuncV) else ""
    if name == "_declared_default" and args and isinstance(args[0], Const):
        return _declared_default(ev, func, str(args[0].value))  # type: ignore[arg-type]
    if name != "add_cli_args_from_dataclass":
        return None
    if len(args) < 2 or not isinstance(args[1], ClassV):
        return Unknown("add_cli_args_from_dataclass(...)")
    target = args[0].parser if isinstance(args[0], GroupV) else args[0]
    if not isinstance(target, ParserV):
        return Unknown("add_cli_args_from_dataclass(...)")
    only = kwargs.get("fields")
    wanted = {str(v.value) for v in only.items if isinstance(v, Const)} if isinstance(only, Seq) else None
    for fdef in _record_fields(ev, args[1]):
        if wanted is not None and fdef.name not in wanted:
            continue
        option = _field_option(ev, fdef)
        if option is not None:
            target.options.append(option)
    return Const(None)


def _declared_default(ev: Evaluator, func: FuncV, name: str) -> V:
    server_args = ev.module_value(func.mod, "ServerArgs")
    if isinstance(server_args, ClassV):
        fdef = next((f for f in _record_fields(ev, server_args) if f.name == name), None)
        default = field_default(ev, fdef) if fdef is not None else None
        if default is not None:
            return default
    return Unknown(f"_declared_default({name!r})")


def _record_fields(ev: Evaluator, cls: ClassV) -> list[FieldDef]:
    """The class's own fields and, where its module assembles it from namespace classes
    (`collect_input_fields([Model, Parallel, ...])`), theirs."""
    out: list[FieldDef] = []
    for node in ast.walk(cls.mod.node):
        if isinstance(node, ast.Call) and text_of(node.func).endswith("collect_input_fields") and node.args:
            listed = ev.eval(node.args[0], cls.mod, {})
            for part in ev.iterate(listed) or []:
                if isinstance(part, ClassV):
                    out += ev.fields(part)
    return out + ev.fields(cls)


def _field_option(ev: Evaluator, fdef: FieldDef) -> Option | None:
    hint = ev.annotation(fdef.annotation, fdef.owner.mod)
    if not (isinstance(hint, Generic) and hint.origin == "Annotated" and len(hint.args) > 1):
        return None
    meta = next(
        (
            m
            for m in hint.args[1:]
            if (isinstance(m, Instance) and m.cls.node.name == "Arg")
            or (isinstance(m, Const) and isinstance(m.value, str))
        ),
        None,
    )
    if meta is None:
        return None
    arg: dict[str, V] = dict(meta.attrs) if isinstance(meta, Instance) else {"help": meta}
    if _true(arg.get("no_cli")):
        return None
    cli = arg.get("cli_name")
    name = str(cli.value) if isinstance(cli, Const) and cli.value else "--" + fdef.name.replace("_", "-")
    aliases = arg.get("aliases")
    strings = [
        name,
        *([str(a.value) for a in aliases.items if isinstance(a, Const)] if isinstance(aliases, Seq) else []),
    ]
    kw: dict[str, V] = {"help": arg.get("help", Const(""))}
    default = field_default(ev, fdef)
    if default is not None:
        kw["default"] = default
    kw.update(_typed(ev, hint.args[0], arg))
    return Option(strings, kw, fdef.owner.mod.path)


def _typed(ev: Evaluator, raw: V, arg: dict[str, V]) -> dict[str, V]:
    """argparse keywords from the field's type and its Arg, in the helper's order."""
    given = {k: v for k, v in arg.items() if k in ("choices", "nargs", "const") and not _none(v)}
    if not _none(arg.get("action")):
        action: dict[str, V] = {"action": arg["action"]}
        extra = arg.get("action_kwargs")
        if isinstance(extra, Map):
            action.update({str(k): v for k, v in extra.items.items()})
        return action
    found = [a for a in atoms(ev, raw) if a.kind != "None"]
    parser_fn = arg.get("type_parser")
    literal = next((a for a in found if a.kind == "Literal"), None)
    if literal is not None:
        values = list(literal.values)
        typ = (
            parser_fn
            if parser_fn is not None and not _none(parser_fn)
            else Ext("int" if values and isinstance(values[0], Const) and isinstance(values[0].value, int) else "str")
        )
        return {"choices": given.get("choices", Seq(values)), "type": typ}
    head = found[0] if len(found) == 1 else None
    if head is not None and head.kind == "list" and _none(parser_fn):
        elem = head.values[0] if head.values else Ext("str")
        return {
            "nargs": given.get("nargs", Const("+")),
            "type": _infer(ev, elem),
            **({"choices": given["choices"]} if "choices" in given else {}),
        }
    if head is not None and head.kind == "bool":
        return {"action": Const("store_true")}
    typ = (
        parser_fn
        if parser_fn is not None and not _none(parser_fn)
        else (_infer(ev, raw) if head is not None else Ext("str"))
    )
    out: dict[str, V] = {"type": typ}
    out.update({k: v for k, v in given.items() if k != "const"})
    return out


def _infer(ev: Evaluator, hint: V) -> V:
    found = [a for a in atoms(ev, hint) if a.kind != "None"]
    kind = found[0].kind if len(found) == 1 else "str"
    return Ext(kind if kind in ("int", "float") else "str")


def _none(value: V | None) -> bool:
    return value is None or (isinstance(value, Const) and value.value is None)


def _true(value: V | None) -> bool:
    return isinstance(value, Const) and bool(value.value)


__all__ = ["extract"]
