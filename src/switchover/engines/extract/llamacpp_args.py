"""llama.cpp's options as common/arg.cpp declares them (builds since autumn 2024): every
`add_opt(common_arg({"-c", "--ctx-size"}, "N", help, handler).set_env(...).set_examples({...}))` in the parser's
init function that llama-server gets: its examples include the server or COMMON, it is not excluded from the
server, and no `if (ex == ...)` around it rules the server out."""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from switchover.engines.extract.clike import closing, literal, literals, split_top, strip_comments
from switchover.engines.extract.llamacpp_params import (
    Params,
    help_default,
    overrides,
    read_structs,
    split_ternary,
    value_text,
)

ARG_CPP = "common/arg.cpp"
SERVER = "LLAMA_EXAMPLE_SERVER"
COMMON = "LLAMA_EXAMPLE_COMMON"
_INIT = re.compile(r"\b\w+_params_parser_init\s*\(")
_ADD = re.compile(r"\badd_opt\s*\(")
_CTOR = re.compile(r"^(?:common_arg|llama_arg)\s*\(")
_CHAIN = re.compile(r"\.\s*(\w+)\s*\(")
_BRANCH = re.compile(r"\b(else\s+if|if|else)\b")
_EX_TEST = re.compile(r"(?:\w+\s*\.\s*)?\bex\s*(==|!=)\s*(LLAMA_EXAMPLE_\w+)|(LLAMA_EXAMPLE_\w+)\s*(==|!=)\s*\bex\b")
_NAMED_EXAMPLES = re.compile(
    r"std::(?:initializer_list|vector|set)\s*<\s*(?:enum\s+)?llama_example\s*>\s+(\w+)\s*=\s*"
    r"(\{[^}]*\})"
)
_LAMBDA = re.compile(r"^\[[^\]]*\]\s*\(([^)]*)\)\s*(?:->\s*\w+\s*)?\{", re.S)
_HELPER = re.compile(r"\b(?:\w+::)?(is_truthy|is_falsey|is_autoy)\s*\(\s*(\w+)\s*\)")
_TO_INT = re.compile(r"\bsto(?:i|l|ul|ll|ull)\s*\(\s*(\w+)")
_TO_FLOAT = re.compile(r"\bsto(?:f|d|ld)\s*\(\s*(\w+)")


def server_condition(cond: str) -> bool | None:
    """Whether an `if` condition on the example holds for llama-server (None when it tests anything else)."""

    def test(m: re.Match[str]) -> str:
        op, name = (m.group(1), m.group(2)) if m.group(1) else (m.group(4), m.group(3))
        return str((name == SERVER) == (op == "=="))

    text = _EX_TEST.sub(test, cond).replace("&&", " and ").replace("||", " or ")
    text = re.sub(r"!(?!=)", " not ", text)
    if not re.fullmatch(r"[\s()]*(?:(?:True|False|and|or|not)[\s()]*)+", text):
        return None
    try:
        return bool(eval(text, {"__builtins__": {}}, {}))
    except SyntaxError:
        return None


def branches(body: str) -> Callable[[int], bool | None]:
    """For the offsets of a function body: whether the `if`/`else` blocks around them hold for the server (False
    when one rules it out, None when one tests something else, True otherwise)."""
    blocks: list[tuple[int, int, bool | None]] = []
    chains: dict[int, list[bool | None]] = {}  # closing brace -> the conditions of its if/else-if chain so far
    for m in _BRANCH.finditer(body):
        word = " ".join(m.group(1).split())
        at = m.end()
        cond: bool | None = True
        if word != "else":
            open_paren = body.find("(", at)
            if open_paren < 0 or body[at:open_paren].strip():
                continue
            close_paren = closing(body, open_paren)
            if close_paren < 0:
                continue
            cond = server_condition(body[open_paren + 1 : close_paren])
            at = close_paren + 1
        prior: list[bool | None] = []
        if word != "if":
            before = body[: m.start()].rstrip()
            prior = chains.get(len(before) - 1, [])
        start = len(body) - len(body[at:].lstrip())
        if start >= len(body) or body[start] != "{":
            continue
        end = closing(body, start)
        if end < 0:
            continue
        truth = _chain_truth(prior, cond)
        blocks.append((start, end, truth))
        chains[end] = [*prior, cond]

    def holds(offset: int) -> bool | None:
        found = [t for s, e, t in blocks if s < offset < e]
        return False if False in found else None if None in found else True

    return holds


def _chain_truth(prior: list[bool | None], cond: bool | None) -> bool | None:
    """An if / else-if / else block holds when no earlier condition of its chain did and its own does."""
    if True in prior or cond is False:
        return False
    if None in prior or cond is None:
        return None
    return True


def _chain(rest: str) -> dict[str, list[str]]:
    """The chained calls after the constructor: `.set_env("X").set_examples({A, B})` -> {name: [arguments]}."""
    out: dict[str, list[str]] = {}
    pos = 0
    while True:
        m = _CHAIN.search(rest, pos)
        if m is None:
            return out
        end = closing(rest, m.end() - 1)
        if end < 0:
            return out
        out[m.group(1)] = split_top(rest[m.end() : end])
        pos = end + 1


def _names(arg: str) -> list[str]:
    return literals(arg) if arg.startswith("{") else []


def _helper_sets(code: str) -> dict[str, list[str]]:
    """The values llama.cpp's is_truthy / is_falsey / is_autoy accept, from their definitions in the release."""
    out: dict[str, list[str]] = {}
    for name in ("is_truthy", "is_falsey", "is_autoy"):
        m = re.search(rf"\bbool\s+(?:\w+::)?{name}\s*\([^)]*\)\s*\{{", code)
        if m:
            out[name] = re.findall(r'==\s*"([^"]*)"', code[m.end() : closing(code, m.end() - 1)])
    return out


def handler_facts(handler: str, helpers: dict[str, list[str]]) -> dict[str, Any]:
    """What the handler lambda says about the value: arity and type, and the values it accepts when it compares the
    value to literals (or llama.cpp's truthy/falsey/auto helpers) and throws on anything else."""
    m = _LAMBDA.match(handler.strip())
    if m is None:
        return {"values": None, "kind": "unknown", "choices": None}
    params = split_top(m.group(1))
    values = len(params) - 1
    if values <= 0:
        return {"values": 0, "kind": "bool", "choices": None}
    decl = params[1]
    var = decl.split()[-1].lstrip("&*") if decl.split() else ""
    body = handler.strip()[m.end() - 1 :]
    if values == 2:
        return {"values": 2, "kind": "unknown", "choices": None}
    if re.search(r"\bbool\b", decl):
        return {"values": 1, "kind": "bool", "choices": None, "switch": True}
    if re.search(r"\bint\b", decl):
        return {"values": 1, "kind": "int", "choices": None}
    names = {var} | {
        b.group(1)
        for b in re.finditer(
            rf"(?:std::string|auto)\s*&?\s*(\w+)\s*(?:=\s*{re.escape(var)}\b|\(\s*{re.escape(var)}\s*\))", body
        )
    }
    at: list[tuple[int, list[str]]] = []  # where each accepted value is compared, to keep the source's order
    for name in names:
        for cm in re.finditer(rf'\b{re.escape(name)}\s*==\s*"([^"]*)"|"([^"]*)"\s*==\s*{re.escape(name)}\b', body):
            at.append((cm.start(), [cm.group(1) if cm.group(1) is not None else cm.group(2)]))
    for hm in _HELPER.finditer(body):
        if hm.group(2) in names and hm.group(1) in helpers:
            at.append((hm.start(), helpers[hm.group(1)]))
    at.sort(key=lambda item: item[0])
    choices = [value for _, values in at for value in values]
    first = at[0][0] if at else len(body)
    refuses = re.search(r"\bthrow\b", body[first:]) is not None
    numeric = (
        "float"
        if any(x in names for x in _TO_FLOAT.findall(body))
        else ("int" if any(x in names for x in _TO_INT.findall(body)) else None)
    )
    unique = list(dict.fromkeys(choices))
    if numeric and unique:  # a number or one of some words ('auto', 'all'): neither a number nor a closed set
        return {"values": 1, "kind": "str", "choices": None}
    kind = numeric or "str"
    return {"values": 1, "kind": kind, "choices": unique if unique and refuses else None}


def _option(
    ctor_args: list[str], chain: dict[str, list[str]], helpers: dict[str, list[str]], params: Params
) -> tuple[str, dict[str, Any]] | None:
    names = _names(ctor_args[0])
    if not names:
        return None
    negatives = _names(ctor_args[1]) if len(ctor_args) > 1 and ctor_args[1].startswith("{") else []
    middle = ctor_args[2 if negatives else 1 : -1]
    facts = handler_facts(ctor_args[-1], helpers)
    help_expr = middle[-1] if middle else ""
    hints = middle[:-1]
    takes_value = bool(hints) if facts["values"] is None else facts["values"] > 0 and not facts.get("switch")
    longs = [n for n in names if n.startswith("--")]
    canonical = longs[0] if longs else names[0]
    env = literal(chain["set_env"][0]) if chain.get("set_env") else None
    help_text = " ".join(literals(help_expr))
    negation = next(iter([n for n in negatives if n.startswith("--")] or negatives), None)
    fact = {
        "path": ARG_CPP,
        "aliases": [n for n in names if n != canonical],
        "takes_value": takes_value,
        "kind": facts["kind"] if takes_value or facts["kind"] == "bool" else "bool",
        "choices": facts["choices"] if takes_value else None,
        "default": help_default(_chosen_help(help_expr), params),
        "env": env,
        "negation": negation,
        "negations": [n for n in negatives if n != negation],
        "deprecated": help_text[:300] if re.search(r"deprecat", help_text, re.I) else None,
    }
    return canonical, fact


def _chosen_help(help_expr: str) -> str:
    """A help expression with `ex == LLAMA_EXAMPLE_X ? a : b` decided for the server."""
    parts = split_ternary(help_expr.strip())
    if parts is not None:
        truth = server_condition(parts[0])
        if truth is not None:
            return _chosen_help(parts[1] if truth else parts[2])
    return help_expr


def parser_body(code: str) -> tuple[str, str] | None:
    """The (comment-free) body of the `*_params_parser_init` function and the name of its params struct."""
    for m in _INIT.finditer(code):
        close = closing(code, m.end() - 1)
        brace = close + 1 + len(code[close + 1 :]) - len(code[close + 1 :].lstrip()) if close > 0 else -1
        if brace < 0 or code[brace : brace + 1] != "{":
            continue  # a call or a declaration, not the definition
        struct = re.search(r"(\w+)\s*&\s*params", code[m.end() : close])
        return code[brace + 1 : closing(code, brace)], struct.group(1) if struct else "common_params"
    return None


def arg_cpp_options(source: str, header: str | None) -> dict[str, dict[str, Any]]:
    """Every option llama-server accepts, as common/arg.cpp declares it (canonical spelling -> FlagSpan facts)."""
    code = strip_comments(source)
    found = parser_body(code)
    if found is None:
        return {}
    body, root = found
    holds = branches(body)
    first_opt = _ADD.search(body)
    preamble_end = first_opt.start() if first_opt else len(body)
    params = Params(
        structs=_structs(header),
        root=root,
        overrides=overrides(body[:preamble_end], lambda at: holds(at) if at < preamble_end else None),
    )
    params.overrides = {k: v for k, v in params.overrides.items() if value_text(v, Params()) is not None}
    helpers = _helper_sets(code)
    named = {m.group(1): m.group(2) for m in _NAMED_EXAMPLES.finditer(code)}
    out: dict[str, dict[str, Any]] = {}
    for m in _ADD.finditer(body):
        end = closing(body, m.end() - 1)
        call = body[m.end() : end].strip()
        ctor = _CTOR.match(call)
        if end < 0 or ctor is None or holds(m.start()) is False:
            continue
        ctor_end = closing(call, ctor.end() - 1)
        chain = _chain(call[ctor_end + 1 :])
        examples = _example_set(chain.get("set_examples", ["{" + COMMON + "}"])[0], named)
        excludes = _example_set(chain.get("set_excludes", ["{}"])[0], named)
        if not examples & {SERVER, COMMON} or SERVER in excludes or "set_preset_only" in chain:
            continue
        option = _option(split_top(call[ctor.end() : ctor_end]), chain, helpers, params)
        if option is None:
            continue
        out[option[0]] = option[1]
    return out


def _example_set(arg: str, named: dict[str, str]) -> set[str]:
    """The examples of a `set_examples(...)` argument: a brace list, or a named list defined in the file."""
    text = named.get(arg.strip(), arg)
    return set(re.findall(r"LLAMA_EXAMPLE_\w+", text))


def _structs(header: str | None) -> dict[str, dict[str, tuple[str, str | None]]]:
    return read_structs(header) if header else {}
