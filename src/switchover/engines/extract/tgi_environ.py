"""The environment variables TGI reads itself, beyond those that set a launcher option (clap `env`, kept on the
option): `std::env::var("X")` in the launcher and the router it starts (router/, backends/v2 and v3), the router's own
clap options read from the environment when the launcher does not pass them, and `os.getenv("X")`,
`os.environ.get("X")`, `os.environ["X"]`, `"X" in os.environ` in the Python server the launcher starts
(server/text_generation_server). Each variable gets a kind and a default where the reading code makes them plain
(`.parse::<f32>()`, `float(os.getenv("X", "0.9"))`, a comparison with words like "true"/"1"), else kind unknown."""

from __future__ import annotations

import ast
import re
from dataclasses import dataclass, field
from typing import Any

from switchover.engines.extract import SourceTree
from switchover.engines.extract.clike import closing, literal, split_top, strip_comments

LAUNCHER_DIR = "launcher/src/"
ROUTER_DIRS = ("router/", "backends/v2/", "backends/v3/")
ROUTER_MAINS = ("router/src/main.rs", "backends/v3/src/main.rs", "backends/v2/src/main.rs")
SERVER_DIR = "server/text_generation_server/"
_RUST_READ = re.compile(r"\b(?:(?:std::)?env::var(?:_os)?|EnvFilter::(?:try_)?from_env)\s*\(")
_RUST_CONST = re.compile(
    r"\b(?:let|const|static)\s+(?:mut\s+)?(\w+)\s*(?::\s*&(?:'static\s+)?str\s*)?=\s*"
    r'("[^"]*")\s*;'
)
_METHOD = re.compile(r"\s*\??\s*\.\s*(\w+)\s*(?:::\s*<\s*(\w+)\s*>\s*)?\(")
_PARSE_TYPE = re.compile(r"parse\s*::\s*<\s*(\w+)\s*>")
_LET_TYPED = re.compile(r"\blet\s+(?:mut\s+)?\w+\s*:\s*(\w+)\s*=\s*$")
_LITERAL = re.compile(r'"(?:[^"\\]|\\.)*"|-?\d+(?:\.\d+)?')
_ROUTER_ARGS = re.compile(r"\blet\s+(?:mut\s+)?router_args\s*(?::[^=]+)?=\s*vec!\s*\[")
_INTS = {"usize", "u8", "u16", "u32", "u64", "isize", "i8", "i16", "i32", "i64"}
_FLOATS = {"f32", "f64"}
_WORDS = {"1", "0", "true", "false", "yes", "no", "on", "off", ""}  # compared with these, a value is a switch
_PY_CONVERSIONS = {"int": "int", "float": "float", "bool": "bool", "json.loads": "json", "loads": "json"}
_PY_READS = {"os.getenv", "getenv", "os.environ.get", "environ.get"}
_PY_ENVIRON = {"os.environ", "environ"}
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")


@dataclass
class EnvReads:
    """The reads found, in the order the files were read: each variable's first file (which cites it), the kinds,
    defaults and choices its reads give, and the reads whose variable name is not a literal (path:line), which
    cannot be recorded."""

    paths: dict[str, str] = field(default_factory=dict)
    kinds: dict[str, set[str]] = field(default_factory=dict)
    defaults: dict[str, set[str | None]] = field(default_factory=dict)
    choices: dict[str, list[list[str] | None]] = field(default_factory=dict)
    unnamed: list[str] = field(default_factory=list)

    def add(
        self, name: str, path: str, kind: str = "unknown", default: str | None = None, choices: list[str] | None = None
    ) -> None:
        """One read of `name` in `path`."""
        if not _NAME.fullmatch(name):
            self.unnamed.append(f"{path}: {name!r}")
            return
        self.paths.setdefault(name, path)
        self.kinds.setdefault(name, set()).update([kind] if kind != "unknown" else [])
        self.defaults.setdefault(name, set()).add(default)
        self.choices.setdefault(name, []).append(choices)

    def facts(self, skip: set[str]) -> dict[str, dict[str, Any]]:
        """EnvSpan fields (but first/last) of every variable read but those in `skip` (the launcher options' env
        names): a kind where the reads that give one agree, a default or choices only where every read has the
        same (a read without a default has none)."""
        out: dict[str, dict[str, Any]] = {}
        for name, path in self.paths.items():
            if name in skip:
                continue
            kinds, defaults, choices = self.kinds[name], self.defaults[name], self.choices[name]
            out[name] = {
                "path": path,
                "kind": next(iter(kinds)) if len(kinds) == 1 else "unknown",
                "default": next(iter(defaults)) if len(defaults) == 1 else None,
                "choices": choices[0] if all(c == choices[0] for c in choices) else None,
            }
        return out


def _line(code: str, at: int) -> int:
    return code.count("\n", 0, at) + 1


def _chain(code: str, end: int) -> list[tuple[str, str, str]]:
    """The method calls chained after the call that closes at code[end]: (method, turbofish type, arguments)."""
    calls: list[tuple[str, str, str]] = []
    i = end + 1
    while True:
        m = _METHOD.match(code, i)
        if m is None:
            return calls
        close = closing(code, m.end() - 1)
        if close < 0:
            return calls
        calls.append((m.group(1), m.group(2) or "", code[m.end() : close]))
        i = close + 1


def _rust_kind(type_name: str) -> str:
    return (
        "int"
        if type_name in _INTS
        else "float"
        if type_name in _FLOATS
        else ("bool" if type_name == "bool" else "unknown")
    )


def rust_reads(path: str, source: str, reads: EnvReads) -> None:
    """`std::env::var("X")` / `env::var_os("X")` / `EnvFilter::try_from_env("X")` reads of one Rust file (a
    `let varname = "X";` name resolved), with the kind a `.parse::<T>()` (or `let x: T = ... .parse()`) gives and the
    default an `.unwrap_or(...)` gives."""
    code = strip_comments(source)
    consts = [(m.start(), m.group(1), literal(m.group(2)) or "") for m in _RUST_CONST.finditer(code)]
    for m in _RUST_READ.finditer(code):
        end = closing(code, m.end() - 1)
        if end < 0:
            continue
        arg = code[m.end() : end].strip()
        if not arg:  # from_env(): a library's own variables
            continue
        name = literal(arg)
        if name is None and re.fullmatch(r"\w+", arg):
            earlier = [value for at, ident, value in consts if ident == arg and at < m.start()]
            name = earlier[-1] if earlier else None
        if name is None:
            reads.unnamed.append(f"{path}:{_line(code, m.start())}")
            continue
        calls = _chain(code, end)
        kind = "unknown"
        parsed = [
            _PARSE_TYPE.search(f"{method}::<{fish}>" if fish else args)
            for method, fish, args in calls
            if method == "parse" or "parse" in args
        ]
        typed = next((t.group(1) for t in parsed if t), None)
        if typed is None and any(method == "parse" or "parse()" in args for method, _, args in calls):
            head = _LET_TYPED.search(
                code[max(0, code.rfind(";", 0, m.start()), code.rfind("{", 0, m.start())) : m.start()]
            )
            typed = head.group(1) if head else None
        if typed:
            kind = _rust_kind(typed)
        default = next((args for method, _, args in calls if method in ("unwrap_or", "unwrap_or_else")), None)
        default = re.sub(r"^\|[^|]*\|\s*", "", default.strip()) if default is not None else None
        default = re.sub(r"\.\s*(?:to_string|into|to_owned)\s*\(\s*\)$", "", default) if default else None
        text = (
            (literal(default) if default.startswith('"') else default)
            if default and _LITERAL.fullmatch(default)
            else None
        )
        reads.add(name, path, kind, text)


def passed_router_options(launcher: str) -> set[str]:
    """The router options the launcher always passes (the literal `--...` words of its `router_args = vec![...]`):
    clap reads their env variables only when the option is missing, so those variables are never read."""
    code = strip_comments(launcher)
    m = _ROUTER_ARGS.search(code)
    if m is None:
        return set()
    end = closing(code, m.end() - 1)
    words = (
        literal(re.sub(r"\.\s*(?:to_string|into|to_owned)\s*\(\s*\)$", "", part))
        for part in split_top(code[m.end() : end])
    )
    return {w for w in words if w and w.startswith("--")}


def router_options(tree: SourceTree, launcher: str, reads: EnvReads) -> None:
    """The router's clap options with an env variable, where the launcher does not always pass the option."""
    from switchover.engines.extract.tgi import launcher_options  # tgi imports this module

    passed = passed_router_options(launcher)
    for path in ROUTER_MAINS:
        source = tree.read(path)
        if source is None:
            continue
        for option, fact in launcher_options(source).items():
            if fact["env"] and not ({option, *fact["aliases"]} & passed):
                reads.add(fact["env"], path, fact["kind"], fact["default"], fact["choices"])


def _dotted(node: ast.AST) -> str:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        return f"{_dotted(node.value)}.{node.attr}"
    return ""


def _const_text(node: ast.AST | None) -> str | None:
    """A literal default as text (None for None, or for an expression)."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str | int | float):
        return str(node.value)
    return None


def _py_kind(node: ast.AST, parents: dict[ast.AST, ast.AST]) -> str:
    """The kind a read's value is turned into: int()/float()/json.loads() around it, or a comparison (after an
    optional .lower()/.strip()) with words such as "1"/"true" only."""
    up = parents.get(node)
    while (
        isinstance(up, ast.Attribute)
        and up.attr in ("lower", "upper", "strip")
        and isinstance(parents.get(up), ast.Call)
    ):
        node, up = parents[up], parents.get(parents[up])
    if isinstance(up, ast.Call) and node in up.args and _dotted(up.func) in _PY_CONVERSIONS:
        return _PY_CONVERSIONS[_dotted(up.func)]
    if isinstance(up, ast.Compare):
        words: list[Any] = []
        for other in (up.left, *up.comparators):
            if other is node:
                continue
            if isinstance(other, ast.Constant):
                words.append(other.value)
            elif isinstance(other, ast.Set | ast.List | ast.Tuple):
                words.extend(e.value for e in other.elts if isinstance(e, ast.Constant))
            else:
                return "unknown"
        if words and all(isinstance(w, str) and w.lower() in _WORDS for w in words):
            return "bool"
    return "unknown"


def python_reads(path: str, source: str, reads: EnvReads) -> None:
    """The `os.getenv` / `os.environ` reads of one Python file."""
    try:
        tree = ast.parse(source)
    except SyntaxError:
        reads.unnamed.append(f"{path}: not parsed")
        return
    parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
    for node in ast.walk(tree):
        default: ast.AST | None = None
        if isinstance(node, ast.Call) and _dotted(node.func) in _PY_READS and node.args:
            name_node = node.args[0]
            default = node.args[1] if len(node.args) > 1 else None
        elif isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load) and _dotted(node.value) in _PY_ENVIRON:
            name_node = node.slice
        elif (
            isinstance(node, ast.Compare)
            and len(node.ops) == 1
            and isinstance(node.ops[0], ast.In | ast.NotIn)
            and _dotted(node.comparators[0]) in _PY_ENVIRON
        ):
            name_node = node.left
        else:
            continue
        if not (isinstance(name_node, ast.Constant) and isinstance(name_node.value, str)):
            reads.unnamed.append(f"{path}:{getattr(node, 'lineno', 0)}")
            continue
        kind = "unknown" if isinstance(node, ast.Compare) else _py_kind(node, parents)
        reads.add(name_node.value, path, kind, _const_text(default))


def environment(
    tree: SourceTree, launcher: str, option_env: set[str]
) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """The variables one TGI release reads (without `option_env`, the launcher options' own), the files that cite
    them, and the reads whose name is not a literal."""
    reads = EnvReads()
    rust = tree.paths(LAUNCHER_DIR, ".rs") + [p for d in ROUTER_DIRS for p in tree.paths(d, ".rs")]
    for path in rust:
        if not path.endswith("build.rs"):  # build.rs is read by cargo at build time, not by the running engine
            rust_reads(path, tree.read(path) or "", reads)
    router_options(tree, launcher, reads)
    for path in tree.paths(SERVER_DIR, ".py"):
        python_reads(path, tree.read(path) or "", reads)
    facts = reads.facts(option_env)
    return facts, sorted({f["path"] for f in facts.values()}), reads.unnamed
