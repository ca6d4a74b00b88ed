"""vLLM launch options, parser rules and Prometheus series, read from one release's Python source (no import).

Options are what the OpenAI server's parsers hold after the release's own code builds them: `make_arg_parser(parser)`
(frontend options, then `AsyncEngineArgs.add_cli_args`) for `python -m vllm.entrypoints.openai.api_server`, and the
`serve` sub-parser of the `vllm` command. From 0.8 most options come from config dataclasses through
`get_kwargs(Config)`, which is read here the way the release's `get_kwargs` turns a field's type into argparse
keywords. Reasoning and tool-call parser names come from the release's registries.
"""

from __future__ import annotations

import ast
import re
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.extract.pyargs import (
    ParserV,
    SubparsersV,
    attached_short,
    collect,
    evaluator,
    is_parser_class,
    new_parser,
    parser_rules,
)
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pymetrics import metrics_in
from switchover.engines.extract.pyvalues import ClassV, Ext, FuncV, Instance, Unknown, V, text_of
from switchover.engines.extract.vllm_envs import environment
from switchover.engines.extract.vllm_kwargs import ConfigRules, config_kwargs
from switchover.engines.extract.vllm_registry import registered_names
from switchover.engines.releases import ParserRules

# where `make_arg_parser` is imported for the server, newest layout first
_ENTRY_MODULES = (
    "vllm.entrypoints.cli.serve",
    "vllm.scripts",
    "vllm.entrypoints.openai.api_server",
    "vllm.entrypoints.openai.cli_args",
    "vllm.entrypoints.launchers.cli_args",
    "vllm.entrypoints.common.cli_args",
)
# options whose values are names in a registry of the release (parsers registered by decorator or lazily)
_REGISTRIES = {
    "--tool-call-parser": ("ToolParserManager", ("vllm.tool_parsers", "vllm.entrypoints.openai.tool_parsers")),
    "--reasoning-parser": ("ReasoningParserManager", ("vllm.reasoning",)),
}
# the series the default engine serves: V0's until VLLM_USE_V1 defaults to 1 (0.8.0), V1's after
_V0_METRICS = ("vllm/engine/metrics.py", "vllm/engine/metrics_types.py", "vllm/spec_decode/metrics.py")
_V1_METRICS = ("vllm/v1/metrics/", "vllm/v1/spec_decode/metrics.py")
_V1_DEFAULT = re.compile(r"""getenv\(\s*["']VLLM_USE_V1["']\s*,\s*["'](\d)["']""")


def extract(tree: SourceTree) -> Extracted:
    """Every launch option of the OpenAI server, the parser's matching rules and the metric names of a release."""
    source = Source(tree, "vllm")
    ev = evaluator(source, [_get_kwargs_hook(source)])
    parsers = _server_parsers(ev, source)
    if not parsers:
        return Extracted(parser=ParserRules(source="vllm/entrypoints/openai/cli_args.py"))
    flags = collect(ev, parsers)
    rules = _rules(ev, parsers[0], flags)
    _inverses(ev, parsers[0], flags)
    _registries(ev, source, flags)
    metrics = metrics_in(source, _metric_files(source), prefix="vllm:", hidden_when="show_hidden_metrics")
    env = environment(ev, source)
    # the files options and metrics come from (each environment variable cites its own file: they are many)
    cited = {f["path"] for f in flags.values()} | {m["path"] for m in metrics.values()} | {rules.source}
    return Extracted(parser=rules, flags=flags, metrics=metrics, files=sorted(cited), environment=env)


def _metric_files(source: Source) -> tuple[str, ...]:
    """The default engine's metric files: V1 once `VLLM_USE_V1` defaults to "1" (or V0 is gone), else V0."""
    envs = source.text("vllm/envs.py") or ""
    default = _V1_DEFAULT.search(envs)
    if default is not None:
        return _V1_METRICS if default.group(1) == "1" else _V0_METRICS
    return _V1_METRICS if source.tree.paths("vllm/v1/metrics/", ".py") else _V0_METRICS


def _server_parsers(ev: Evaluator, source: Source) -> list[ParserV]:
    """The `vllm serve` sub-parser (when the release has the command) and the api_server module's parser."""
    make: FuncV | None = None
    for dotted in _ENTRY_MODULES:
        mod = source.module(dotted)
        found = ev.module_value(mod, "make_arg_parser") if mod is not None else None
        if isinstance(found, FuncV):
            make = found
            break
    if make is None:
        return []
    parser_cls = _parser_class(ev, make)
    out: list[ParserV] = []
    serve = _serve_subparser(ev, source, parser_cls)
    if serve is not None:
        out.append(serve)
    takes_parser = bool(make.node.args.args) if not isinstance(make.node, ast.Lambda) else False
    built = ev.run(make, [new_parser(ev, parser_cls)] if takes_parser else [], {})
    if isinstance(built, ParserV):
        out.append(built)
    return out


def _parser_class(ev: Evaluator, make: FuncV) -> V:
    """The parser class the server builds: FlexibleArgumentParser where the release has it."""
    found = ev.module_value(make.mod, "FlexibleArgumentParser")
    return found if is_parser_class(ev, found) else Ext("argparse.ArgumentParser")


def _serve_subparser(ev: Evaluator, source: Source, parser_cls: V) -> ParserV | None:
    """The parser `vllm serve` uses: the `serve` child of the CLI's sub-parsers, built by the release's code."""
    cli = source.module("vllm.entrypoints.cli.serve")
    if cli is not None:
        for stmt in cli.node.body:
            if isinstance(stmt, ast.ClassDef) and any(
                isinstance(s, ast.FunctionDef) and s.name == "subparser_init" for s in stmt.body
            ):
                cls = ClassV(cli, stmt)
                subs = SubparsersV(new_parser(ev, parser_cls))
                init = ev.attr(Instance(cls), "subparser_init")
                if isinstance(init, FuncV):
                    ev.run(init, [subs], {})
                return subs.children.get("serve")
    scripts = source.module("vllm.scripts")
    if scripts is not None:
        main = ev.module_value(scripts, "main")
        if isinstance(main, FuncV):
            subs_seen: list[SubparsersV] = []

            def spy(e: Evaluator, func: V, args: list[V], kwargs: dict[str, V]) -> V | None:
                if getattr(func, "name", None) == "add_subparsers" and isinstance(getattr(func, "obj", None), ParserV):
                    subs = SubparsersV(func.obj)  # type: ignore[attr-defined]
                    subs_seen.append(subs)
                    return subs
                return None

            ev.hooks.insert(0, spy)
            try:
                ev.run(main, [], {})
            finally:
                ev.hooks.remove(spy)
            return next((s.children["serve"] for s in subs_seen if "serve" in s.children), None)
    return None


def _rules(ev: Evaluator, parser: ParserV, flags: dict[str, dict[str, Any]]) -> ParserRules:
    """Underscore spellings (FlexibleArgumentParser.parse_args turns `--a_b` into `--a-b`), dotted keys of JSON
    options (`--compilation-config.level 3` gathered into `--compilation-config '{"level": 3}'`), abbreviations,
    values attached to one-letter options (argparse: `-q fp8` typed `-qfp8`) and parse_args' own rewrite of them
    (`-O3`)."""
    abbrev, abbrev_path = parser_rules(ev, parser)
    cls = parser.cls
    underscores = dotted = False
    rewrites: dict[str, str] = {}
    path = abbrev_path
    if isinstance(cls, ClassV):
        parse = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "parse_args"), None)
        text = text_of(parse) if parse is not None else ""
        underscores = "replace('_', '-')" in text or 'replace("_", "-")' in text or "repl" in text
        dotted = parse is not None and _splits_on_dots(parse)
        rewrites = _attached_rewrites(parse, flags) if parse is not None else {}
        path = cls.mod.path
    return ParserRules(
        abbrev=abbrev,
        underscores=underscores,
        dotted_keys=dotted,
        attached_short=attached_short(flags),
        attached_values=rewrites,
        source=path,
    )


def _attached_rewrites(parse: ast.FunctionDef, flags: dict[str, dict[str, Any]]) -> dict[str, str]:
    """parse_args' own reading of a one-letter option typed with its value attached: a branch testing
    `arg.startswith("-O")` that hands the value on under another spelling (`f"-O.level={level}"`: the key `level`
    of the JSON option -O names; `["--optimization-level", level]`). A branch that hands it to the same option
    (`-O` then the value, as argparse does anyway) is no rewrite."""
    out: dict[str, str] = {}
    for node in ast.walk(parse):
        if not isinstance(node, ast.If):
            continue
        prefix = next(
            (
                str(c.args[0].value)
                for c in ast.walk(node.test)
                if isinstance(c, ast.Call)
                and isinstance(c.func, ast.Attribute)
                and c.func.attr == "startswith"
                and c.args
                and isinstance(c.args[0], ast.Constant)
                and isinstance(c.args[0].value, str)
                and re.fullmatch(r"-[^-]", c.args[0].value)
            ),
            None,
        )
        target = _handed_to(node.body) if prefix is not None and prefix not in out else None
        if prefix is None or target is None or target == prefix:
            continue
        base, dot, key = target.partition(".")
        if dot and base == prefix:  # a key of the option the short spelling names
            owner = next((name for name, facts in flags.items() if prefix in (name, *facts.get("aliases", []))), None)
            if owner is None:
                continue
            target = f"{owner}.{key}"
        out[prefix] = target
    return out


def _handed_to(body: list[ast.stmt]) -> str | None:
    """The first option spelling a branch puts in the arguments: a string constant, or an f-string's leading text
    (up to its '=')."""
    stack: list[ast.AST] = list(reversed(body))
    while stack:
        node = stack.pop()
        text = node.values[0] if isinstance(node, ast.JoinedStr) and node.values else node
        if isinstance(text, ast.Constant) and isinstance(text.value, str) and text.value.startswith("-"):
            return text.value.split("=", 1)[0]
        if not isinstance(node, ast.JoinedStr):  # an f-string's later parts are not a spelling
            stack.extend(reversed(list(ast.iter_child_nodes(node))))
    return None


def _splits_on_dots(parse: ast.FunctionDef) -> bool:
    """parse_args tests an argument for a '.' and splits it there into the option and its keys."""
    tests = splits = False
    for node in ast.walk(parse):
        if (
            isinstance(node, ast.Compare)
            and isinstance(node.left, ast.Constant)
            and node.left.value == "."
            and isinstance(node.ops[0], ast.In)
        ):
            tests = True
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "split"
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and node.args[0].value == "."
        ):
            splits = True
    return tests and splits


def _inverses(ev: Evaluator, parser: ParserV, flags: dict[str, dict[str, Any]]) -> None:
    """Where the parser registers EnableDisableAction, `--enable-x` also answers to `--disable-x` (and back): the
    inverse shown in help is the negation, argparse's own `--no-enable-x` one of the further negations."""
    cls = parser.cls
    if not isinstance(cls, ClassV):
        return
    init = next((s for s in cls.node.body if isinstance(s, ast.FunctionDef) and s.name == "__init__"), None)
    if init is None or "EnableDisableAction" not in text_of(init):
        return
    for name, facts in flags.items():
        if not facts.get("negation"):
            continue
        for prefix, inverse in (("--enable-", "--disable-"), ("--disable-", "--enable-")):
            if name.startswith(prefix):
                facts["negations"] = [facts["negation"], *facts.get("negations", [])]
                facts["negation"] = inverse + name[len(prefix) :]


def _registries(ev: Evaluator, source: Source, flags: dict[str, dict[str, Any]]) -> None:
    """Registered parser names as the choices of the options that take them: closed when argparse checks them
    (`choices=` from the registry), open when the release checks after loading plugins."""
    for option, (manager, packages) in _REGISTRIES.items():
        facts = flags.get(option)
        if facts is None:
            continue
        names = registered_names(ev, source, manager, packages)
        if names is None:
            continue
        enforced = "choices" in facts
        facts["choices"] = sorted(set(names) | {c for c in facts.get("choices", []) if c != "None"})
        if not enforced:
            facts["choices_open"] = True


def _get_kwargs_hook(source: Source) -> Any:
    """`get_kwargs(Config)`: argparse keywords for each field of a config dataclass, by the release's rules."""
    rules: list[ConfigRules] = []

    def hook(ev: Evaluator, func: V, args: list[V], kwargs: dict[str, V]) -> V | None:
        if not (isinstance(func, FuncV) and getattr(func.node, "name", "") in ("get_kwargs", "_compute_kwargs")):
            return None
        if not args or not isinstance(args[0], ClassV):
            return Unknown("get_kwargs(...)")
        if not rules:
            rules.append(ConfigRules.read(ev, func))
        return config_kwargs(ev, args[0], rules[0])

    return hook
