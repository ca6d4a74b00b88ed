"""trtllm-serve's launch options, config-file keys and Prometheus metric names, read from a TensorRT-LLM release's
Python source with `ast` and the source evaluator (no import): the click options of the `serve` command in
tensorrt_llm/commands/serve.py (direct `@click.option` / `@optgroup.option` decorators, and the `f = optgroup.option(
...)(f)` calls of a decorator function such as `common_llm_options`), the keys its `--config` /
`--extra_llm_api_options` YAML accepts (`extract.trtllm_config`, named `yaml:<dotted key>`), and the metrics
tensorrt_llm/metrics/collector.py creates with prometheus_client."""

from __future__ import annotations

import ast
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.extract.pyeval import Evaluator, Source
from switchover.engines.extract.pyvalues import Const, Module, Seq
from switchover.engines.extract.trtllm_config import PREFIX, config_keys
from switchover.engines.releases import ParserRules

SERVE = "tensorrt_llm/commands/serve.py"
SERVE_MODULE = "tensorrt_llm.commands.serve"
HELPERS = ("tensorrt_llm/commands/common_llm_options.py",)
COLLECTOR = "tensorrt_llm/metrics/collector.py"
_KINDS = {
    "int": "int",
    "float": "float",
    "str": "str",
    "bool": "bool",
    "INT": "int",
    "FLOAT": "float",
    "STRING": "str",
    "BOOL": "bool",
    "IntRange": "int",
    "FloatRange": "float",
    "Path": "str",
    "File": "str",
}
_METRIC_TYPES = {
    "Counter": "counter",
    "Gauge": "gauge",
    "Histogram": "histogram",
    "Summary": "summary",
    "Info": "gauge",
    "Enum": "gauge",
}


def _name(node: ast.expr) -> str:
    """The last name of `a.b.c` / `c` (empty for anything else)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_option(call: ast.expr) -> bool:
    return isinstance(call, ast.Call) and _name(call.func) == "option"


def _type_facts(node: ast.expr | None, scope: Scope | None) -> tuple[str, list[str] | None]:
    """kind and choices of a click `type=`: int, click.Choice([...]) (the values evaluated where the option is
    declared: a literal list, or a registry's keys such as `ReasoningParserFactory.parsers.keys()`; aliases of a
    Choice subclass given as a dict count as accepted values), click.Path(), ..."""
    if node is None:
        return "str", None
    if isinstance(node, ast.Call):
        if "Choice" in _name(node.func):
            choices = _strings(node.args[0], scope) if node.args else None
            if choices is None:
                return "str", None  # computed where the source cannot be read statically
            extra = _strings(node.args[1], scope, keys=True) if len(node.args) > 1 else None
            return "str", choices + (extra or [])
        return _KINDS.get(_name(node.func), "unknown"), None
    return _KINDS.get(_name(node), "unknown"), None


Scope = tuple[Evaluator, Module]


def _strings(node: ast.expr, scope: Scope | None, keys: bool = False) -> list[str] | None:
    """The strings an expression holds (a dict's keys when `keys`), or None when not every item is a known string."""
    if isinstance(node, (ast.List, ast.Tuple)) and all(
        isinstance(e, ast.Constant) and isinstance(e.value, str) for e in node.elts
    ):
        return [str(e.value) for e in node.elts if isinstance(e, ast.Constant)]
    if (
        isinstance(node, ast.Dict)
        and keys
        and all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in node.keys)
    ):
        return [str(k.value) for k in node.keys if isinstance(k, ast.Constant)]
    if scope is None:
        return None
    ev, mod = scope
    value = ev.eval(node, mod, {})
    if keys and hasattr(value, "items") and isinstance(value.items, dict):
        value = Seq([Const(k) for k in value.items])
    if (
        isinstance(value, Seq)
        and value.items
        and all(isinstance(v, Const) and isinstance(v.value, str) for v in value.items)
    ):
        return [str(v.value) for v in value.items if isinstance(v, Const)]
    return None


def _literal(node: ast.expr | None) -> str | None:
    """A default as written when it is a literal (a computed default, e.g. BuildConfig.max_batch_size, is None)."""
    if isinstance(node, ast.Constant) and node.value is not None:
        return str(node.value).lower() if isinstance(node.value, bool) else str(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return f"-{node.operand.value!s}"
    return None


def option_facts(call: ast.Call, scope: Scope | None = None) -> tuple[str, dict[str, Any]] | None:
    """One click option: its canonical spelling and FlagSpan facts (names starting with '-'; '--x/--no-x' declares
    a switch and its negation; a bare name is the Python parameter, and the option string that spells it is the
    canonical one: `--config --extra_llm_api_options extra_llm_api_options` is --extra_llm_api_options)."""
    names: list[str] = []
    negation = None
    parameter = None
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
            on, _, off = arg.value.partition("/")
            names.append(on.strip())
            if off.strip():
                negation = off.strip()
        elif isinstance(arg, ast.Constant) and isinstance(arg.value, str):
            parameter = arg.value
    if not names:
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    switch = negation is not None or any(
        isinstance(kw.get(k), ast.Constant) and kw[k].value is True  # type: ignore
        for k in ("is_flag", "count")
    )
    kind, choices = _type_facts(kw.get("type"), scope)
    note, tag = _help(kw.get("help"))
    longs = [n for n in names if n.startswith("--")]
    canonical = f"--{parameter}" if f"--{parameter}" in longs else longs[0] if longs else names[0]
    return canonical, {
        "path": SERVE,
        "aliases": [n for n in names if n != canonical],
        "takes_value": not switch,
        # click's multiple=True takes one value per occurrence (`--x a --x b`), unlike argparse's nargs='+'
        "kind": "bool" if switch else kind,
        "choices": None if switch else choices,
        "default": _literal(kw.get("default")),
        "negation": negation,
        "deprecated": (note or "deprecated")[:300] if tag == "deprecated" or "deprecat" in note.lower() else None,
    }


def _help(node: ast.expr | None) -> tuple[str, str | None]:
    """An option's help text and stability tag: a string, or `help_info_with_stability_tag(text, tag)` (1.1+)."""
    if isinstance(node, ast.Call) and node.args and "stability" in _name(node.func):
        tag = node.args[1] if len(node.args) > 1 else next((k.value for k in node.keywords if k.arg == "tag"), None)
        return _joined(node.args[0]), tag.value if isinstance(tag, ast.Constant) and isinstance(
            tag.value, str
        ) else None
    return (_joined(node), None) if node is not None else ("", None)


def _joined(node: ast.expr) -> str:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        return _joined(node.left) + _joined(node.right)
    return ""


def _serve_command(module: ast.Module) -> ast.FunctionDef | None:
    """The function of the `serve` click command (decorated `@click.command("serve")`, `@main.command(...)`, or
    named serve with click options)."""
    for node in module.body:
        if not isinstance(node, ast.FunctionDef):
            continue
        for dec in node.decorator_list:
            if isinstance(dec, ast.Call) and _name(dec.func) == "command":
                named = dec.args[0].value if dec.args and isinstance(dec.args[0], ast.Constant) else node.name
                if named in ("serve", "trtllm-serve"):
                    return node
    return next(
        (
            n
            for n in module.body
            if isinstance(n, ast.FunctionDef) and n.name == "serve" and any(_is_option(d) for d in n.decorator_list)
        ),
        None,
    )


def _decorator_options(func: ast.FunctionDef) -> list[ast.Call]:
    """The option calls a decorator function applies: `f = optgroup.option(...)(f)` and `click.option(...)(f)`."""
    return [node.func for node in ast.walk(func) if isinstance(node, ast.Call) and _is_option(node.func)]  # type: ignore


def serve_options(tree: SourceTree) -> dict[str, dict[str, Any]]:
    """Every option of `trtllm-serve serve` (the default command)."""
    return _serve_options(Source(tree, "tensorrt_llm"))


def _serve_options(source: Source) -> dict[str, dict[str, Any]]:
    text = source.text(SERVE)
    if text is None:
        return {}
    module = ast.parse(text)
    command = _serve_command(module)
    if command is None:
        return {}
    ev = Evaluator(source)
    helpers: dict[str, tuple[ast.FunctionDef, str]] = {}
    for path in (SERVE, *HELPERS):
        helper_text = text if path == SERVE else source.text(path)
        if helper_text is None:
            continue
        for node in ast.parse(helper_text).body:
            if isinstance(node, ast.FunctionDef):
                helpers.setdefault(node.name, (node, path))
    out: dict[str, dict[str, Any]] = {}
    for dec in command.decorator_list:
        found: list[tuple[ast.Call, str]] = []
        if _is_option(dec):
            found = [(dec, SERVE)]  # type: ignore[list-item]
        elif _name(dec) in helpers:
            func, path = helpers[_name(dec)]
            found = [(call, path) for call in _decorator_options(func)]
        for call, path in found:
            mod = source.module(path.removesuffix(".py").replace("/", "."))
            option = option_facts(call, (ev, mod) if mod is not None else None)
            if option is not None:
                out.setdefault(option[0], {**option[1], "path": path})
    return out


def popped_keys(source: Source) -> dict[str, dict[str, Any]]:
    """Config-file keys the serve command takes out of the merged LLM arguments itself before building the LLM
    (`llm_args.pop("disagg_cluster", None)` after `update_llm_args_with_extra_dict`): accepted, read by serve."""
    text = source.text(SERVE)
    command = _serve_command(ast.parse(text)) if text is not None else None
    if command is None:
        return {}
    merged = {
        t.id
        for node in ast.walk(command)
        if isinstance(node, ast.Assign)
        and isinstance(node.value, ast.Call)
        and _name(node.value.func) == "update_llm_args_with_extra_dict"
        for t in node.targets
        if isinstance(t, ast.Name)
    }
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(command):
        if (
            isinstance(node, ast.Call)
            and isinstance(node.func, ast.Attribute)
            and node.func.attr == "pop"
            and isinstance(node.func.value, ast.Name)
            and node.func.value.id in merged
            and node.args
            and isinstance(node.args[0], ast.Constant)
            and isinstance(node.args[0].value, str)
        ):
            out[PREFIX + node.args[0].value] = {
                "path": SERVE,
                "aliases": [],
                "takes_value": True,
                "kind": "unknown",
                "choices": None,
                "default": None,
                "negation": None,
                "deprecated": None,
            }
    return out


def _prefixes(module: ast.Module) -> dict[str, str]:
    """String constants assigned to a name or attribute (`self.metric_prefix = "trtllm_"`), by that name."""
    out: dict[str, str] = {}
    for node in ast.walk(module):
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            for target in node.targets:
                if _name(target):
                    out.setdefault(_name(target), node.value.value)
    return out


def _metric_name(node: ast.expr, prefixes: dict[str, str]) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = _metric_name(node.left, prefixes), _metric_name(node.right, prefixes)
        return left + right if left is not None and right is not None else None
    if isinstance(node, (ast.Name, ast.Attribute)) and _name(node) in prefixes:
        return prefixes[_name(node)]
    if isinstance(node, ast.JoinedStr):
        parts = [_metric_name(v.value if isinstance(v, ast.FormattedValue) else v, prefixes) for v in node.values]
        return "".join(p for p in parts if p is not None) if all(p is not None for p in parts) else None
    return None


def collector_metrics(tree: SourceTree) -> dict[str, dict[str, Any]]:
    """Every metric the collector creates, as prometheus_client serves it (a counter always ends in _total;
    an Info metric is served as <name>_info)."""
    source = tree.read(COLLECTOR)
    if source is None:
        return {}
    module = ast.parse(source)
    prefixes = _prefixes(module)
    out: dict[str, dict[str, Any]] = {}
    for node in ast.walk(module):
        if not (isinstance(node, ast.Call) and _name(node.func) in _METRIC_TYPES):
            continue
        arg = next((k.value for k in node.keywords if k.arg == "name"), node.args[0] if node.args else None)
        name = _metric_name(arg, prefixes) if arg is not None else None
        if not name:
            continue
        kind = _name(node.func)
        served = (
            name.removesuffix("_total") + "_total"
            if kind == "Counter"
            else (name + "_info" if kind == "Info" else name)
        )
        out.setdefault(served, {"path": COLLECTOR, "type": _METRIC_TYPES[kind]})
    return out


def extract(tree: SourceTree) -> Extracted:
    """The `trtllm-serve` options, the config-file keys (`yaml:...`, read only where the release has the serve
    command) and the Prometheus metrics of one TensorRT-LLM release (click reads neither abbreviations nor `-` for
    `_`); `files` is every file read."""
    source = Source(tree, "tensorrt_llm")
    flags = _serve_options(source)
    if flags:
        flags.update({k: v for k, v in config_keys(Evaluator(source)).items() if k not in flags})
        flags.update({k: v for k, v in popped_keys(source).items() if k not in flags})
    metrics = collector_metrics(tree)
    read = set(source.read) | ({COLLECTOR} if tree.read(COLLECTOR) is not None else set())
    files = [p for p in (SERVE, *HELPERS, COLLECTOR) if p in read] + sorted(read - {SERVE, *HELPERS, COLLECTOR})
    return Extracted(parser=ParserRules(source=SERVE), flags=flags, metrics=metrics, files=files)
