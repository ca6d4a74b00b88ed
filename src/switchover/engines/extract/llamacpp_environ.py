"""The environment variables llama-server reads itself, beyond the LLAMA_ARG_* ones that set an option (kept on the
option): `getenv("X")` / `std::getenv` / `_wgetenv(L"X")` in the server's sources, common/ and libllama (src/), and
calls to the build's own wrappers around them (a function that hands one of its parameters to getenv:
`common_get_env(name)`, `common_get_path_from_env(name)`, the server's `getenv(name, default_value)`), including names
taken from a table a loop walks (`for (auto & entry : entries) getenv(entry.var)`, `#define HOME_DIR "HOME"`
resolved). ggml's own variables (GGML_*, read by its backends) are not read.

Also the `LLAMA_ARG_NO_...` variables arg.cpp reads for an option that has a negative form (`string_replace_all(
neg_env, "LLAMA_ARG_", "LLAMA_ARG_NO_")`): any value turns the option off."""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from switchover.engines.extract import SourceTree
from switchover.engines.extract.clike import closing, literal, split_top, strip_comments

SERVER_DIRS = ("tools/server/", "examples/server/")
READ_DIRS = (*SERVER_DIRS, "common/", "src/")
SUFFIXES = (".cpp", ".h", ".hpp", ".c")
ARG_CPP = "common/arg.cpp"
_BASE = ("getenv", "_wgetenv", "secure_getenv")
_LITERALS = re.compile(r'"(?:[^"\\\n]|\\.)*"|\'(?:[^\'\\\n]|\\.)+\'')
_KEYWORDS = {"if", "for", "while", "switch", "catch", "return", "sizeof", "defined", "decltype", "static_assert"}
_BEFORE_CALL = {"return", "else", "case", "throw", "co_return", "new", "delete", "not", "and", "or", "do"}
_HEAD = re.compile(r"\)\s*(?:const\s*)?(?:noexcept\s*)?(?:override\s*)?(?:->\s*[\w:<>]+\s*)?$")
_DEFINE = re.compile(r'^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+("[^"\n]*")', re.M)
_LOCAL = re.compile(r"(?:const\s+)?(?:char|wchar_t|auto)\s*\*\s*(\w+)\s*=\s*$")
_TO_INT = r"\b(?:std\s*::\s*)?(?:atoi|atol|atoll|stoi|stol|stoll|stoul|stoull|strtol|strtoul|strtoll|strtoull)\s*\(\s*"
_TO_FLOAT = r"\b(?:std\s*::\s*)?(?:atof|stof|stod|stold|strtof|strtod)\s*\(\s*"
_NAME = re.compile(r"[A-Z_][A-Z0-9_]*")
_NEG_ENV = re.compile(r'string_replace_all\s*\(\s*\w+\s*,\s*"LLAMA_ARG_"\s*,\s*"LLAMA_ARG_NO_"\s*\)')


@dataclass(frozen=True)
class Wrapper:
    """A function of the build that reads the variable named by one of its parameters."""

    name_at: int
    default_at: int | None = None


@dataclass
class CppReads:
    """Every read found: variable -> (file, kind, default) of each read, and the reads not resolved to a name."""

    reads: dict[str, list[tuple[str, str, str | None]]] = field(default_factory=dict)
    unnamed: list[str] = field(default_factory=list)

    def add(self, name: str, path: str, kind: str = "unknown", default: str | None = None) -> None:
        self.reads.setdefault(name, []).append((path, kind, default))

    def facts(self, skip: set[str]) -> dict[str, dict[str, Any]]:
        """EnvSpan fields (but first/last) of each variable but those in `skip`: the first read cites it, a kind
        where the reads that give one agree, a default only where every read has the same."""
        out: dict[str, dict[str, Any]] = {}
        for name, seen in self.reads.items():
            if name in skip:
                continue
            kinds = {kind for _, kind, _ in seen if kind != "unknown"}
            defaults = {default for _, _, default in seen}
            out[name] = {
                "path": seen[0][0],
                "kind": next(iter(kinds)) if len(kinds) == 1 else "unknown",
                "default": next(iter(defaults)) if len(defaults) == 1 else None,
            }
        return out


def _line(code: str, at: int) -> int:
    return code.count("\n", 0, at) + 1


def _param_name(param: str) -> str | None:
    names = re.findall(r"\w+", param.split("=", 1)[0])
    return names[-1] if names else None


def blank_literals(code: str) -> str:
    """The code with string and char literals' insides blanked, so brackets inside them are not counted."""
    return _LITERALS.sub(lambda m: m.group(0)[0] + " " * (len(m.group(0)) - 2) + m.group(0)[-1], code)


def _open_paren(code: str, close: int) -> int:
    depth = 0
    for i in range(close, -1, -1):
        depth += {")": 1, "(": -1}.get(code[i], 0)
        if depth == 0:
            return i
    return -1


def enclosing_function(code: str, at: int) -> tuple[str, list[str]] | None:
    """The name and parameter names of the named function whose body holds offset `at` (None: none, or a
    lambda's), for literal-blanked, comment-free code."""
    depth, i = 0, at - 1
    while i >= 0:
        c = code[i]
        if c == "}":
            depth += 1
        elif c == "{" and depth > 0:
            depth -= 1
        elif c == "{":
            window = max(0, i - 200)
            head = _HEAD.search(code[window:i])
            if head is not None:
                open_at = _open_paren(code, window + head.start())
                name = re.search(r"(\w+)\s*$", code[max(0, open_at - 120) : open_at]) if open_at > 0 else None
                if name is not None and name.group(1) not in _KEYWORDS:
                    params = [
                        n for n in (_param_name(x) for x in split_top(code[open_at + 1 : window + head.start()])) if n
                    ]
                    return name.group(1), params
                if name is None:
                    return None
        i -= 1
    return None


def _declared(code: str, start: int) -> bool:
    """Whether the name at `start` is being declared or defined (`std::string common_get_env(...)`), not called:
    a type name stands before it."""
    before = re.search(r"(\w+)\s*[*&]?\s*$", code[max(0, start - 80) : start])
    return before is not None and before.group(1) not in _BEFORE_CALL


def _calls(code: str, names: set[str]) -> Iterable[tuple[str, int, int, list[str]]]:
    """(function, call start, closing paren, arguments) of every call of one of `names` (not a member call, not a
    declaration)."""
    if not names:
        return
    pattern = re.compile(r"(?<![\w.>])(?:std\s*::\s*|::\s*)?(" + "|".join(map(re.escape, sorted(names))) + r")\s*\(")
    for m in pattern.finditer(blank_literals(code)):  # no call inside a string literal
        if _declared(code, m.start()):
            continue
        close = closing(code, m.end() - 1)
        if close > 0:
            yield m.group(1), m.start(), close, split_top(code[m.end() : close])


def _uses(expr: str, names: set[str]) -> bool:
    return bool(set(re.findall(r"\b\w+\b", expr)) & names)


def wrappers(sources: dict[str, str]) -> dict[str, Wrapper]:
    """The functions (of any file read) that hand one of their parameters, or a value made from it, to getenv or to
    another such function; the parameter named like `default...` is the default."""
    found: dict[str, Wrapper] = {}
    for _ in range(3):  # wrappers of wrappers
        before = dict(found)
        for code in sources.values():
            blank = blank_literals(code)
            for _, start, _, args in _calls(code, set(_BASE) | set(found)):
                if not args or literal(re.sub(r'^L(?=")', "", args[0].strip())) is not None:
                    continue
                function = enclosing_function(blank, start)
                if function is None or function[0] in found:
                    continue
                name, params = function
                body_start = blank.rfind("{", 0, start)
                body = code[blank.rfind(")", 0, body_start) : start]
                for i, param in enumerate(params):
                    derived = {param} | {
                        v
                        for v, e in re.findall(r"\b(\w+)\s*(?:=|\()\s*([^;]*);", body)
                        if _uses(e, {param}) and v != param
                    }
                    if _uses(args[0], derived):
                        default_at = next((j for j, p in enumerate(params) if p.startswith("default")), None)
                        found[name] = Wrapper(name_at=i, default_at=default_at)
                        break
        if found == before:
            break
    return found


def _defines(code: str) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for name, text in _DEFINE.findall(code):
        out.setdefault(name, []).append(literal(text) or "")
    return out


def _names(arg: str, code: str, at: int, defines: dict[str, list[str]]) -> list[str] | None:
    """The variable names an argument stands for: a literal, a #define of one, or the field of a loop variable that
    walks a written table (every entry's first literal); None when it is none of these."""
    text = re.sub(r"\.\s*c_str\s*\(\s*\)$", "", arg.strip())
    text = re.sub(r'^L(?=")', "", text)
    if (value := literal(text)) is not None:
        return [value]
    if text in defines:
        return defines[text]
    loop_var = re.fullmatch(r"(\w+)(?:\s*(?:\.|->)\s*\w+)?", text)
    if loop_var is None:
        return None
    loops = list(re.finditer(rf"\bfor\s*\([^;()]*?\b{loop_var.group(1)}\s*:\s*", code[:at]))
    if not loops:
        return None
    start = loops[-1].end()  # the innermost loop before the read
    if code[start] == "{":
        table = code[start + 1 : closing(code, start)]
    else:
        table_name = re.match(r"\w+", code[start:])
        inits = (
            list(re.finditer(rf"\b{table_name.group(0)}\s*(?:\[\s*\d*\s*\])?\s*=?\s*\{{", code[:start]))
            if table_name
            else []
        )
        if not inits:
            return None
        table = code[inits[-1].end() : closing(code, inits[-1].end() - 1)]
    out: list[str] = []
    for entry in split_top(table):
        first = split_top(entry[1:-1])[0] if entry.startswith("{") and split_top(entry[1:-1]) else entry
        resolved = literal(first)
        out.extend([resolved] if resolved is not None else defines.get(first.strip(), []))
    return out or None


def _kind(code: str, start: int, end: int) -> str:
    """int or float where the value read goes straight into a number conversion, or a local holding it does."""
    before = code[max(0, start - 40) : start]
    if re.search(_TO_INT + r"$", before):
        return "int"
    if re.search(_TO_FLOAT + r"$", before):
        return "float"
    local = _LOCAL.search(code[code.rfind("\n", 0, start) + 1 : start])
    if local is None:
        return "unknown"
    after = code[end : end + 400]
    if re.search(_TO_INT + re.escape(local.group(1)) + r"\b", after):
        return "int"
    if re.search(_TO_FLOAT + re.escape(local.group(1)) + r"\b", after):
        return "float"
    return "unknown"


def cpp_reads(path: str, source: str, found: dict[str, Wrapper], reads: CppReads) -> None:
    """The reads of one C/C++ file: calls of getenv or a wrapper, named by a literal, a #define or a table."""
    code = strip_comments(source)
    defines = _defines(code)
    blank: str | None = None
    for function, start, close, args in _calls(code, set(_BASE) | set(found)):
        wrapper = found.get(function) if function in found and (function not in _BASE or len(args) > 1) else None
        at = wrapper.name_at if wrapper else 0
        if len(args) <= at:
            continue
        names = _names(args[at], code, start, defines)
        if names is None:
            blank = blank or blank_literals(code)
            holder = enclosing_function(blank, start)
            if holder is None or holder[0] not in found:  # a wrapper reading its parameter is no read to name
                reads.unnamed.append(f"{path}:{_line(code, start)}")
            continue
        default = None
        if wrapper and wrapper.default_at is not None and len(args) > wrapper.default_at:
            default = literal(args[wrapper.default_at])
        kind = _kind(code, start, close + 1)
        for name in names:
            if _NAME.fullmatch(name):
                reads.add(name, path, kind, default)


def negative_env(tree: SourceTree, flags: dict[str, dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """LLAMA_ARG_NO_X for each option with env LLAMA_ARG_X and a negative form, where arg.cpp reads those."""
    code = strip_comments(tree.read(ARG_CPP) or "")
    if not _NEG_ENV.search(code):
        return {}
    out: dict[str, dict[str, Any]] = {}
    for fact in flags.values():
        env = fact.get("env") or ""
        if env.startswith("LLAMA_ARG_") and (fact.get("negation") or fact.get("negations")):
            out[env.replace("LLAMA_ARG_", "LLAMA_ARG_NO_", 1)] = {"path": ARG_CPP, "kind": "unknown", "default": None}
    return out


def source_paths(tree: SourceTree) -> list[str]:
    """The files read, the server's first (they cite a variable before common/ and libllama do)."""
    out: list[str] = []
    for prefix in READ_DIRS:
        out += [p for p in tree.paths(prefix) if p.endswith(SUFFIXES) and "/tests/" not in p]
    return out


def environment(
    tree: SourceTree, flags: dict[str, dict[str, Any]]
) -> tuple[dict[str, dict[str, Any]], list[str], list[str]]:
    """The variables one build reads (but the options' own env names), the files that cite them, and the reads
    not resolved to a name (path:line). Wrappers are looked for in the files that call getenv themselves."""
    texts = {p: tree.read(p) or "" for p in source_paths(tree)}
    found = wrappers({p: strip_comments(text) for p, text in texts.items() if "getenv" in text})
    reads = CppReads()
    for path, text in texts.items():
        if any(name in text for name in (*_BASE, *found)):
            cpp_reads(path, text, found, reads)
    option_env = {f["env"] for f in flags.values() if f.get("env")}
    facts = {
        **reads.facts(option_env),
        **{k: v for k, v in negative_env(tree, flags).items() if k not in option_env and k not in reads.reads},
    }
    return facts, sorted({f["path"] for f in facts.values()}), reads.unnamed
