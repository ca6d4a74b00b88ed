"""Reading C-family source text (Rust for TGI's launcher, C++ for llama.cpp) without a compiler: comments blanked
out, string literals decoded, balanced brackets and top-level commas found. Enough for the declarative parts the
extractors read (clap structs, `common_arg(...)` calls), not a parser of either language."""

from __future__ import annotations

import re
from collections.abc import Iterator

_OPEN = {"(": ")", "[": "]", "{": "}"}
_CLOSE = {")", "]", "}"}
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", "\\": "\\", '"': '"', "'": "'"}
_RAW_RUST = re.compile(r'r(#*)"')
_RAW_CPP = re.compile(r'R"([^()\\\s]{0,16})\(')
_CHAR = re.compile(r"'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|.)|[^\\'\n])'")
# one scan for what strip_comments must tell apart, leftmost first as a reader would: literals (plain, char, Rust raw
# r#"..."#, C++ raw R"d(...)d") are kept, comments blanked
_TOKENS = re.compile(
    r'"(?:[^"\\]|\\.)*(?:"|\Z)'
    r"|'(?:\\(?:x[0-9a-fA-F]{2}|u\{[0-9a-fA-F]+\}|[^\n])|[^\\'\n])'"
    r'|(?<![0-9A-Za-z_])r(?P<hash>#*)".*?(?:"(?P=hash)|\Z)'
    r'|(?<![0-9A-Za-z_])R"(?P<delim>[^()\\\s]{0,16})\(.*?(?:\)(?P=delim)"|\Z)'
    r"|(?P<comment>//[^\n]*|/\*.*?(?:\*/|\Z))",
    re.S,
)


def _literal_end(text: str, i: int) -> int:
    """The index just past the string or char literal starting at text[i] (i itself when none starts there)."""
    c = text[i]
    if c == '"':
        j = i + 1
        while j < len(text):
            if text[j] == "\\":
                j += 2
                continue
            if text[j] == '"':
                return j + 1
            j += 1
        return len(text)
    if c == "'":
        m = _CHAR.match(text, i)
        return m.end() if m else i  # a Rust lifetime ('a) is no literal
    if c == "r" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        m = _RAW_RUST.match(text, i)
        if m:
            end = text.find('"' + m.group(1), m.end())
            return len(text) if end < 0 else end + 1 + len(m.group(1))
    if c == "R" and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
        m = _RAW_CPP.match(text, i)
        if m:
            end = text.find(")" + m.group(1) + '"', m.end())
            return len(text) if end < 0 else end + 2 + len(m.group(1))
    return i


def _blanked(m: re.Match[str]) -> str:
    return m.group(0) if m.group("comment") is None else re.sub(r"[^\n]", " ", m.group(0))


def strip_comments(text: str) -> str:
    """The text with every // and /* */ comment replaced by spaces (newlines kept), so offsets stay the same; string,
    char and raw-string literals are left as they are (an unterminated one runs to the end)."""
    return _TOKENS.sub(_blanked, text)


def _code(text: str, start: int) -> Iterator[tuple[int, str]]:
    """Each index and character of `text` from `start` on that is code: a string or char literal is stepped over
    whole, so a bracket or comma inside one is not seen."""
    j = start
    while j < len(text):
        end = _literal_end(text, j)
        if end > j:
            j = end
            continue
        yield j, text[j]
        j += 1


def closing(text: str, i: int) -> int:
    """The index of the bracket that closes the one at text[i] (comments already stripped); -1 when unbalanced."""
    stack = [_OPEN[text[i]]]
    for j, c in _code(text, i + 1):
        if c in _OPEN:
            stack.append(_OPEN[c])
        elif c in _CLOSE:
            if c != stack[-1]:
                return -1
            stack.pop()
            if not stack:
                return j
    return -1


def split_top(text: str, sep: str = ",") -> list[str]:
    """`text` split at every `sep` outside brackets and literals, each part stripped (empty parts dropped)."""
    parts: list[str] = []
    depth, start = 0, 0
    for j, c in _code(text, 0):
        if c in _OPEN:
            depth += 1
        elif c in _CLOSE:
            depth -= 1
        elif c == sep and depth == 0:
            parts.append(text[start:j].strip())
            start = j + 1
    parts.append(text[start:].strip())
    return [p for p in parts if p]


def _decode(body: str) -> str:
    out: list[str] = []
    i = 0
    while i < len(body):
        c = body[i]
        if c == "\\" and i + 1 < len(body):
            out.append(_ESCAPES.get(body[i + 1], body[i + 1]))
            i += 2
            continue
        out.append(c)
        i += 1
    return "".join(out)


_PLAIN = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)


def literals(text: str) -> list[str]:
    """Every plain double-quoted string literal in `text`, decoded, in order."""
    return [_decode(m.group(1)) for m in _PLAIN.finditer(text)]


def literal(text: str) -> str | None:
    """The value of an expression that is only string literals (C++ concatenation "a" "b" included), else None."""
    rest = _PLAIN.sub("", text).strip()
    found = literals(text)
    return "".join(found) if found and not rest else None
