"""trtllm-serve's launch options and Prometheus metric names, read from a TensorRT-LLM release's Python source with
`ast`: the click options of the `serve` command in tensorrt_llm/commands/serve.py (direct `@click.option` /
`@optgroup.option` decorators, and the `f = optgroup.option(...)(f)` calls of a decorator function such as
`common_llm_options`), and the metrics tensorrt_llm/metrics/collector.py creates with prometheus_client."""

from __future__ import annotations

import ast
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.releases import ParserRules

SERVE = "tensorrt_llm/commands/serve.py"
HELPERS = ("tensorrt_llm/commands/common_llm_options.py",)
COLLECTOR = "tensorrt_llm/metrics/collector.py"
_KINDS = {"int": "int", "float": "float", "str": "str", "bool": "bool", "INT": "int", "FLOAT": "float",
          "STRING": "str", "BOOL": "bool", "IntRange": "int", "FloatRange": "float", "Path": "str", "File": "str"}
_METRIC_TYPES = {"Counter": "counter", "Gauge": "gauge", "Histogram": "histogram", "Summary": "summary",
                 "Info": "gauge", "Enum": "gauge"}


def _name(node: ast.expr) -> str:
    """The last name of `a.b.c` / `c` (empty for anything else)."""
    if isinstance(node, ast.Attribute):
        return node.attr
    return node.id if isinstance(node, ast.Name) else ""


def _is_option(call: ast.expr) -> bool:
    return isinstance(call, ast.Call) and _name(call.func) == "option"


def _type_facts(node: ast.expr | None) -> tuple[str, list[str] | None]:
    """kind and choices of a click `type=`: int, click.Choice([...]) (a literal list; aliases of a Choice subclass
    given as a literal dict count as accepted values), click.Path(), ..."""
    if node is None:
        return "str", None
    if isinstance(node, ast.Call):
        if "Choice" in _name(node.func):
            values = node.args[0] if node.args else None
            if isinstance(values, (ast.List, ast.Tuple)) and all(
                    isinstance(e, ast.Constant) and isinstance(e.value, str) for e in values.elts):
                choices = [str(e.value) for e in values.elts if isinstance(e, ast.Constant)]
                extra = node.args[1] if len(node.args) > 1 else None
                if isinstance(extra, ast.Dict):
                    choices += [k.value for k in extra.keys if isinstance(k, ast.Constant) and isinstance(k.value, str)]
                return "str", choices
            return "str", None  # the values are computed (e.g. a registry's keys): not readable statically
        return _KINDS.get(_name(node.func), "unknown"), None
    return _KINDS.get(_name(node), "unknown"), None


def _literal(node: ast.expr | None) -> str | None:
    """A default as written when it is a literal (a computed default, e.g. BuildConfig.max_batch_size, is None)."""
    if isinstance(node, ast.Constant) and node.value is not None:
        return str(node.value).lower() if isinstance(node.value, bool) else str(node.value)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        return f"-{node.operand.value!s}"
    return None


def option_facts(call: ast.Call) -> tuple[str, dict[str, Any]] | None:
    """One click option: its canonical spelling and FlagSpan facts (names starting with '-'; a bare name is the
    Python parameter; '--x/--no-x' declares a switch and its negation)."""
    names: list[str] = []
    negation = None
    for arg in call.args:
        if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value.startswith("-"):
            on, _, off = arg.value.partition("/")
            names.append(on.strip())
            if off.strip():
                negation = off.strip()
    if not names:
        return None
    kw = {k.arg: k.value for k in call.keywords if k.arg}
    switch = negation is not None or any(isinstance(kw.get(k), ast.Constant) and kw[k].value is True  # type: ignore
                                         for k in ("is_flag", "count"))
    kind, choices = _type_facts(kw.get("type"))
    multiple = isinstance(kw.get("multiple"), ast.Constant) and kw["multiple"].value is True  # type: ignore
    help_text = kw.get("help")
    note = _joined(help_text) if help_text is not None else ""
    longs = [n for n in names if n.startswith("--")]
    canonical = longs[0] if longs else names[0]
    return canonical, {
        "path": SERVE, "aliases": [n for n in names if n != canonical], "takes_value": not switch,
        "kind": "bool" if switch else "list" if multiple else kind, "choices": None if switch else choices,
        "default": _literal(kw.get("default")), "negation": negation,
        "deprecated": note[:300] if "deprecat" in note.lower() else None}


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
    return next((n for n in module.body if isinstance(n, ast.FunctionDef) and n.name == "serve"
                 and any(_is_option(d) for d in n.decorator_list)), None)


def _decorator_options(func: ast.FunctionDef) -> list[ast.Call]:
    """The option calls a decorator function applies: `f = optgroup.option(...)(f)` and `click.option(...)(f)`."""
    return [node.func for node in ast.walk(func) if isinstance(node, ast.Call) and _is_option(node.func)]  # type: ignore


def serve_options(tree: SourceTree) -> dict[str, dict[str, Any]]:
    """Every option of `trtllm-serve serve` (the default command)."""
    source = tree.read(SERVE)
    if source is None:
        return {}
    module = ast.parse(source)
    command = _serve_command(module)
    if command is None:
        return {}
    helpers: dict[str, tuple[ast.FunctionDef, str]] = {}
    for path in (SERVE, *HELPERS):
        text = tree.read(path)
        if text is None:
            continue
        for node in ast.parse(text).body:
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
            option = option_facts(call)
            if option is not None:
                out.setdefault(option[0], {**option[1], "path": path})
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
        served = name.removesuffix("_total") + "_total" if kind == "Counter" else (
            name + "_info" if kind == "Info" else name)
        out.setdefault(served, {"path": COLLECTOR, "type": _METRIC_TYPES[kind]})
    return out


def extract(tree: SourceTree) -> Extracted:
    """The `trtllm-serve` options and Prometheus metrics of one TensorRT-LLM release (click reads neither
    abbreviations nor `-` for `_`)."""
    flags = serve_options(tree)
    metrics = collector_metrics(tree)
    files = [p for p in (SERVE, *HELPERS, COLLECTOR) if tree.read(p) is not None]
    return Extracted(parser=ParserRules(source=SERVE), flags=flags, metrics=metrics, files=files)
