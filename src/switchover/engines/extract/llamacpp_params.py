"""The defaults llama.cpp's help prints for its options, read statically: the field initializers of the params structs
in common/common.h (`int32_t n_ctx = 4096;`), the server's own overrides, and the printf-style help text that shows
a field (`string_format("... (default: %d)", params.n_ctx)`). A default that needs running code to know (a function
call, an enum name, the hardware) stays unknown (None)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchover.engines.extract.clike import closing, literal, split_top, strip_comments

_STRUCT = re.compile(r"\bstruct\s+(\w+)\s*(?:final\s*)?(?::[^{;]*)?\{")
_MEMBER = re.compile(
    r"^(?P<type>[\w:<>,\s\*&]+?)\s*\b(?P<name>\w+)\s*(?:\[[^\]]*\])?\s*"
    r"(?:=\s*(?P<init>.+)|\{(?P<brace>.*)\})?$",
    re.S,
)
_NUMBER = re.compile(r"^[-+]?(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?[fFlLuU]*$")
_PRINTF = re.compile(r"%[-+ #0]*\d*(?:\.(\d+))?(?:hh|h|ll|l|z|j|t|L)?([diouxXfFeEgGcsp%])")
_DEFAULT_AT = re.compile(r"default(?:\s+is|\s*:|\s*=)\s*", re.I)
_CAST = re.compile(
    r"^(?:\((?:unsigned\s+)?(?:double|float|int|long|bool|size_t|u?int(?:8|16|32|64)_t)\)\s*|"
    r"static_cast\s*<[^>]+>\s*\((?P<static>.*)\)$)",
    re.S,
)
_ASSIGN = re.compile(r"\bparams\.([\w.]+)\s*=\s*([^;]+);")


@dataclass
class Params:
    """The params struct fields: struct name -> member -> (type, initializer text), the root struct, and the
    per-example overrides of the release (`params.n_parallel = -1;` when the example is the server)."""

    structs: dict[str, dict[str, tuple[str, str | None]]] = field(default_factory=dict)
    root: str = "common_params"
    overrides: dict[str, str] = field(default_factory=dict)

    def initializer(self, path: str) -> str | None:
        """The initializer of `a.b.c` under the root struct (an override first), or None."""
        if path in self.overrides:
            return self.overrides[path]
        struct = self.structs.get(self.root, {})
        parts = path.split(".")
        for i, part in enumerate(parts):
            member = struct.get(part)
            if member is None:
                return None
            if i == len(parts) - 1:
                return member[1]
            struct = self.structs.get(member[0].split()[-1].split("::")[-1], {})
        return None


def read_structs(header: str) -> dict[str, dict[str, tuple[str, str | None]]]:
    """Every `struct NAME { ... };` of a header: its data members with their type and initializer."""
    code = strip_comments(header)
    out: dict[str, dict[str, tuple[str, str | None]]] = {}
    for m in _STRUCT.finditer(code):
        end = closing(code, m.end() - 1)
        if end < 0:
            continue
        members: dict[str, tuple[str, str | None]] = {}
        for statement in split_top(code[m.end() : end], ";"):
            statement = re.sub(r"^\s*#.*$", "", statement, flags=re.M).strip()
            declares = "(" in statement.split("=", 1)[0] or statement.startswith(
                ("struct ", "enum ", "using ", "typedef")
            )
            if declares and not re.match(r"(struct|enum)\s+\w+\s+\w+\s*(=|$)", statement):
                continue  # a method, a nested type or an alias; `struct X member;` is a member
            mm = _MEMBER.match(statement)
            if mm is None:
                continue
            init = mm.group("init") or mm.group("brace")
            members[mm.group("name")] = (" ".join(mm.group("type").split()), init.strip() if init else None)
        out.setdefault(m.group(1), members)
    return out


def overrides(body: str, is_server: object) -> dict[str, str]:
    """`params.X = VALUE;` assignments in the parser's preamble (before the first option) that hold for the
    server, read with `is_server(offset) -> bool | None` (None: the condition could not be read; not applied)."""
    out: dict[str, str] = {}
    for m in _ASSIGN.finditer(body):
        if is_server(m.start()) is True:  # type: ignore[operator]
            out[m.group(1)] = m.group(2).strip()
    return out


def value_text(expr: str, params: Params, depth: int = 0) -> str | None:
    """What an expression prints as (a literal, a params field with a literal initializer, a ternary on one)."""
    expr = expr.strip()
    if depth > 4 or not expr:
        return None
    while expr.startswith("(") and closing(expr, 0) == len(expr) - 1:
        expr = expr[1:-1].strip()
    expr = re.sub(r"\.c_str\(\)$", "", expr)
    cast = _CAST.match(expr)
    if cast:
        return value_text(cast.group("static") or expr[cast.end() :], params, depth + 1)
    text = literal(expr)
    if text is not None:
        return text
    if _NUMBER.match(expr):
        return expr.rstrip("fFlLuU")
    if expr in ("true", "false"):
        return expr
    ternary = split_ternary(expr)
    if ternary is not None:
        cond, yes, no = ternary
        truth = _truth(cond, params, depth)
        return None if truth is None else value_text(yes if truth else no, params, depth + 1)
    m = re.fullmatch(r"std::string\((.*)\)", expr, re.S)
    if m:
        return value_text(m.group(1), params, depth + 1)
    m = re.fullmatch(r"params\.([\w.]+)", expr)
    if m:
        init = params.initializer(m.group(1))
        return value_text(init, params, depth + 1) if init is not None else None
    return None


def _truth(cond: str, params: Params, depth: int) -> bool | None:
    cond = cond.strip()
    compared = re.fullmatch(r"(.+?)\s*(==|!=)\s*(.+)", cond, re.S)
    if compared and "?" not in cond:
        left, right = value_text(compared.group(1), params, depth + 1), value_text(compared.group(3), params, depth + 1)
        if left is None or right is None:
            return None
        same = _same(left, right)
        return same if compared.group(2) == "==" else not same
    negate = cond.startswith("!")
    value = value_text(cond.lstrip("!").strip(), params, depth + 1)
    if value in ("true", "false"):
        return (value == "true") != negate
    if value is not None and _NUMBER.match(value):
        return (float(value) != 0) != negate
    return None


def _same(left: str, right: str) -> bool:
    if _NUMBER.match(left) and _NUMBER.match(right):
        return float(left) == float(right)
    return left == right


def split_ternary(expr: str) -> tuple[str, str, str] | None:
    """`a ? b : c` at the top level (not inside brackets, literals or `::`)."""
    depth, q = 0, -1
    i = 0
    while i < len(expr):
        c = expr[i]
        if c == '"':
            end = expr.find('"', i + 1)
            while end > 0 and expr[end - 1] == "\\":
                end = expr.find('"', end + 1)
            i = len(expr) if end < 0 else end + 1
            continue
        if c in "([{":
            depth += 1
        elif c in ")]}":
            depth -= 1
        elif depth == 0 and c == "?" and q < 0:
            q = i
        elif depth == 0 and c == ":" and q >= 0 and expr[i - 1] != ":" and expr[i + 1 : i + 2] != ":":
            return expr[:q], expr[q + 1 : i], expr[i + 1 :]
        i += 1
    return None


def _printf(spec: str, precision: str | None, value: str) -> str | None:
    try:
        if spec in "diouxX":
            return str(int(float(value)))
        if spec in "fFeEgG":
            number = float(value)
            return f"{number:.{int(precision)}{spec}}" if precision is not None else f"{number:{spec}}"
    except ValueError:
        return None
    return value


def help_default(help_expr: str, params: Params) -> str | None:
    """The default a help expression prints after `default:` / `default =` / `default is`, when it can be read:
    a literal in the text, or the printf argument at that place resolved through `params`."""
    call = re.match(r"(?:string_)?format\s*\(", help_expr.strip())
    if call is None:
        text = literal(help_expr)
        return _literal_default(text) if text else None
    inner = help_expr.strip()[call.end() - 1 :]
    args = split_top(inner[1 : closing(inner, 0)])
    fmt = literal(args[0]) if args else None
    if fmt is None:
        return None
    at = _DEFAULT_AT.search(fmt)
    if at is None:
        return None
    place = 0
    for m in _PRINTF.finditer(fmt):
        if m.group(2) == "%":
            continue
        if m.start() == at.end() or (m.start() > at.end() and fmt[at.end() : m.start()].strip(" '`\"") == ""):
            if place + 1 >= len(args):
                return None
            value = value_text(args[place + 1], params)
            return _printf(m.group(2), m.group(1), value) if value is not None else None
        if m.start() > at.end():
            break
        place += 1
    return _literal_default(fmt)


def _literal_default(text: str) -> str | None:
    at = _DEFAULT_AT.search(text)
    if at is None:
        return None
    m = re.match(r"['`\"]?([^\s,;)'`\"%]+)", text[at.end() :])
    return m.group(1) if m else None
