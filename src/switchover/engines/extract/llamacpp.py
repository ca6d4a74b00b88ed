"""llama-server's launch options, /metrics names and environment variables (llamacpp_environ.py), read from a
llama.cpp build's source.

Options: common/arg.cpp's `common_arg` declarations where the build has them (llamacpp_args.py), else the 2024
parser in common/common.cpp (`if (arg == "-c" || arg == "--ctx-size") { CHECK_ARG ... }`, every option of which the
server accepts, since it parses with gpt_params_parse) with the defaults its usage text prints. Metrics: the names the
server writes after `llamacpp:` with their `# TYPE` (a `json all_metrics_def` of counter/gauge sections, or
`metric_item` lists handed to `add_items("counter", ...)`, or a literal `# TYPE llamacpp:name type` line)."""

from __future__ import annotations

import re
from typing import Any

from switchover.engines.extract import Extracted, SourceTree
from switchover.engines.extract.clike import closing, literal, literals, split_top, strip_comments
from switchover.engines.extract.llamacpp_args import ARG_CPP, arg_cpp_options
from switchover.engines.extract.llamacpp_environ import blank_literals, enclosing_function, environment
from switchover.engines.extract.llamacpp_params import Params, help_default, read_structs
from switchover.engines.releases import ParserRules

COMMON_CPP = "common/common.cpp"
COMMON_H = "common/common.h"
SERVER_DIRS = ("tools/server/", "examples/server/")
_UNDERSCORES = re.compile(r"replace\s*\(\s*arg\.begin\(\)\s*,\s*arg\.end\(\)\s*,\s*'_'\s*,\s*'-'\s*\)")
_OLD_IF = re.compile(r'\bif\s*\(\s*((?:arg\s*==\s*"[^"]+"\s*(?:\|\|\s*)?)+)\)\s*\{')
_FIND_ARG = re.compile(r"\bbool\s+\w+_params_find_arg\s*\([^)]*\)\s*\{")
_USAGE = re.compile(r"options\.push_back\s*\(\s*\{")
_FROM_ARGV = re.compile(r"std::string\s+(\w+)\s*(?:=\s*argv\s*\[\s*i\s*\]|\(\s*argv\s*\[\s*i\s*\]\s*\))")
_SECTION = re.compile(r'\{\s*"(counter|gauge|histogram|summary)"\s*,\s*\{')
_NAMED = re.compile(r'\{\s*"name"\s*,\s*"([^"]+)"\s*\}')
_ITEMS = re.compile(r"std::vector\s*<\s*\w+\s*>\s+(\w+)\s*=\s*\{")
_ADD_ITEMS = re.compile(r'add_items\s*\(\s*"(\w+)"\s*,\s*(\w+)\s*\)')
_TYPE_LINE = re.compile(r"# TYPE llamacpp:(\w+) (counter|gauge|histogram|summary)\b")
_FIELD_SET = re.compile(r"\bparams\s*\.\s*([\w.]+)\s*=(?!=)\s*([^;]*);")
_ENV_INTO = re.compile(r'\b\w*env\w*\s*\(\s*"([A-Z][A-Z0-9_]*)"\s*,\s*params\s*\.\s*([\w.]+)\s*\)')


def _old_block_facts(block: str) -> dict[str, Any]:
    """takes_value, kind and choices of one `if (arg == ...) { ... }` block of the 2024 parser."""
    takes_value = re.search(r"\bCHECK_ARG\b|\+\+i\b|argv\s*\[\s*\+\+\s*i\s*\]", block) is not None
    if not takes_value:
        return {"takes_value": False, "kind": "bool", "choices": None}
    kind = (
        "float"
        if re.search(r"\bsto(?:f|d|ld)\s*\(\s*argv\s*\[\s*i\s*\]", block)
        else ("int" if re.search(r"\bsto(?:i|l|ul|ll|ull)\s*\(\s*argv\s*\[\s*i\s*\]", block) else "str")
    )
    names = set(_FROM_ARGV.findall(block))
    choices: list[str] = []
    first = len(block)
    for name in names:
        for m in re.finditer(rf'\b{re.escape(name)}\s*==\s*"([^"]*)"', block):
            choices.append(m.group(1))
            first = min(first, m.start())
    refuses = re.search(r"\binvalid_param\s*=\s*true|\bthrow\b", block[first:]) is not None
    unique = list(dict.fromkeys(choices))
    return {"takes_value": True, "kind": kind, "choices": unique if unique and refuses else None}


def _usage_defaults(code: str, params: Params) -> dict[str, str]:
    """Option spelling -> the default the 2024 usage text prints (`options.push_back({ "*", "-c, --ctx-size N",
    "... (default: %d)", params.n_ctx })`)."""
    out: dict[str, str] = {}
    for m in _USAGE.finditer(code):
        end = closing(code, m.end() - 1)
        parts = split_top(code[m.end() : end])
        if len(parts) < 3:
            continue
        spelled = literal(parts[1]) or ""
        default = help_default(f"format({', '.join(parts[2:])})", params)
        if default is None:
            continue
        for name in re.findall(r"(?<![\w-])(-{1,2}[A-Za-z][\w-]*)", spelled):
            out.setdefault(name, default)
    return out


def common_cpp_options(source: str, header: str | None, server: str = "") -> dict[str, dict[str, Any]]:
    """Every option of the 2024 parser (gpt_params_find_arg in common/common.cpp), with the env variable that sets
    it where common.cpp reads one into the field the option's block sets (`server`: the server's sources)."""
    code = strip_comments(source)
    m = _FIND_ARG.search(code)
    if m is None:
        return {}
    body = code[m.end() : closing(code, m.end() - 1)]
    root = re.search(r"(\w+)\s*&\s*params", m.group(0))
    params = Params(structs=read_structs(header) if header else {}, root=root.group(1) if root else "gpt_params")
    defaults = _usage_defaults(code, params)
    out: dict[str, dict[str, Any]] = {}
    sets: dict[str, dict[str, str]] = {}  # option -> params field -> the value its block assigns
    for im in _OLD_IF.finditer(body):
        names = literals(im.group(1))
        end = closing(body, im.end() - 1)
        facts = _old_block_facts(body[im.end() : end])
        longs = [n for n in names if n.startswith("--")]
        canonical = longs[0] if longs else names[0]
        default = next((defaults[n] for n in names if n in defaults), None)
        if canonical not in out:
            out[canonical] = {
                "path": COMMON_CPP,
                "aliases": [n for n in names if n != canonical],
                "default": default,
                **facts,
            }
            sets[canonical] = dict(_FIELD_SET.findall(body[im.end() : end]))
    for variable, target in env_fields(code, server).items():
        setters = [o for o, fields in sets.items() if target in fields]
        if any(sets[o][target].strip() in ("true", "false") for o in setters):
            # a switch: the variable (1/true) is the option that turns the field on (-cb, not -nocb); when only
            # an option turning it off exists (--no-slots), the variable is no spelling of it
            setters = [o for o in setters if sets[o][target].strip() == "true"]
        if len(setters) == 1:
            out[setters[0]]["env"] = variable
    return out


def env_fields(code: str, server: str) -> dict[str, str]:
    """Env variable -> the params field common.cpp reads it into (`get_env("LLAMA_ARG_CTX_SIZE", params.n_ctx)`),
    where the function holding the read is the parser itself or one the server calls."""
    out: dict[str, str] = {}
    blank = None
    for m in _ENV_INTO.finditer(code):
        blank = blank or blank_literals(code)
        function = enclosing_function(blank, m.start())
        if function is None:
            continue
        called = re.search(rf"\b{re.escape(function[0])}\s*\(", server) is not None
        if called or _FIND_ARG.match(f"bool {function[0]}(") or function[0].endswith("_params_parse_ex"):
            out.setdefault(m.group(1), m.group(2))
    return out


def _json_metrics(code: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for m in _SECTION.finditer(code):
        end = closing(code, m.start())
        for name in _NAMED.findall(code[m.end() : end]):
            out.setdefault(name, m.group(1))
    return out


def _item_metrics(code: str) -> dict[str, str]:
    kinds = {var: kind for kind, var in _ADD_ITEMS.findall(code)}
    out: dict[str, str] = {}
    for m in _ITEMS.finditer(code):
        if m.group(1) not in kinds:
            continue
        end = closing(code, m.end() - 1)
        for item in split_top(code[m.end() : end]):
            names = literals(item)
            if item.startswith("{") and names:
                out.setdefault(names[0], kinds[m.group(1)])
    return out


def server_metrics(tree: SourceTree) -> tuple[dict[str, dict[str, Any]], list[str]]:
    """Every `llamacpp:` series the server writes on /metrics, with its type, and the files that write them."""
    found: dict[str, dict[str, Any]] = {}
    files: list[str] = []
    for prefix in SERVER_DIRS:
        for path in tree.paths(prefix):
            if path.count("/") != 2 or not path.endswith((".cpp", ".hpp", ".h")):
                continue
            code = strip_comments(tree.read(path) or "")
            if "llamacpp:" not in code:
                continue
            here = {**_json_metrics(code), **_item_metrics(code)}
            for text in literals(code):
                here.update({n: t for n, t in _TYPE_LINE.findall(text)})
            if here:
                files.append(path)
            for name, kind in here.items():
                found.setdefault(f"llamacpp:{name}", {"path": path, "type": kind})
    return found, files


def extract(tree: SourceTree) -> Extracted:
    """The options llama-server accepts and the metrics it serves, for one llama.cpp build."""
    header = tree.read(COMMON_H)
    arg_cpp = tree.read(ARG_CPP)
    if arg_cpp is not None:
        flags, path = arg_cpp_options(arg_cpp, header), ARG_CPP
    else:
        server = "\n".join(tree.read(p) or "" for d in SERVER_DIRS for p in tree.paths(d, ".cpp"))
        flags, path = common_cpp_options(tree.read(COMMON_CPP) or "", header, server), COMMON_CPP
    parse_source = strip_comments(tree.read(path) or "")
    rules = ParserRules(underscores=_UNDERSCORES.search(parse_source) is not None, source=path)
    found, files = server_metrics(tree)
    env, env_files, _ = environment(tree, flags)
    return Extracted(
        parser=rules,
        flags=flags,
        metrics=found,
        environment=env,
        files=list(dict.fromkeys([path, *([COMMON_H] if header else []), *files, *env_files])),
    )
