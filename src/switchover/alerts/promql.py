"""Just enough of PromQL to rewrite metric names safely: a lexer that tells metric names from functions,
aggregations, keywords and label names, and finds each selector's label matchers and each grouping list.

Not a full parser (promtool is the judge of validity: every translated file is checked with it in the tests).
Positions are character offsets into the expression, so a rewrite replaces exactly the spans it means to.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from switchover.errors import BadInput
from switchover.lexing import Token, tokenize

_TOKEN = re.compile(
    r"""(?P<subquery>(?<=\d[smhdwy]):|(?<=ms):)  # the colon of a subquery [10m:1m], right after a duration
      |(?P<ws>\s+)
      |(?P<comment>\#[^\n]*)
      |(?P<str>"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'|`[^`]*`)
      |(?P<dur>(?:\d+(?:ms|s|m|h|d|w|y))+(?!\w))
      |(?P<num>0[xX][0-9a-fA-F]+|(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?)
      |(?P<ident>[A-Za-z_:][A-Za-z0-9_:]*)
      |(?P<op>=~|!~|!=|==|>=|<=|[-+*/%^<>=(){}\[\],@:])""",
    re.VERBOSE,
)
AGGREGATIONS = frozenset(
    {
        "sum",
        "min",
        "max",
        "avg",
        "group",
        "stddev",
        "stdvar",
        "count",
        "count_values",
        "bottomk",
        "topk",
        "quantile",
        "limitk",
        "limit_ratio",
    }
)
KEYWORDS = frozenset(
    {"by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool", "and", "or", "unless", "atan2"}
)
GROUPING = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right"})
COMPARISONS = frozenset({">", "<", ">=", "<=", "==", "!="})
SPECIAL_NUMBERS = frozenset({"inf", "nan"})


class PromQLError(ValueError):
    """The expression could not be lexed."""


@dataclass
class Matcher:
    """`label op "value"` inside a selector's braces."""

    label: str
    op: str
    value: str  # unquoted
    start: int  # span of the whole matcher, for removal or rewrite
    end: int
    value_start: int
    value_end: int


@dataclass
class Selector:
    """A metric name (possibly none: `{__name__=...}`) and its matchers."""

    name: str | None
    name_start: int
    name_end: int
    matchers: list[Matcher] = field(default_factory=list)
    brace: tuple[int, int] | None = None  # span of `{...}` when present


@dataclass
class Grouping:
    """A `by (...)`-style label list."""

    keyword: str
    labels: list[tuple[str, int]]  # (label, start)


@dataclass
class Parsed:
    """What a rewrite needs from one expression."""

    tokens: list[Token]
    selectors: list[Selector]
    groupings: list[Grouping]
    quantiles: list[float]  # first arguments of histogram_quantile
    thresholds: list[tuple[str, float]]  # (comparison, literal) pairs found next to a comparison


def lex(expr: str) -> list[Token]:
    """The expression's tokens (whitespace and comments dropped); PromQLError on a character PromQL has not."""
    return tokenize(_TOKEN, expr, PromQLError, rename={"subquery": "op"})


def number(text: str) -> float:
    """A number token's value: decimal, exponent or hexadecimal (`0x1F`, which float() refuses); BadInput naming a
    hexadecimal number past float64 (Prometheus refuses it too: its parser reads numbers as int64 or float64)."""
    if text[:2] not in ("0x", "0X"):
        return float(text)
    try:
        return float(int(text, 16))
    except OverflowError:
        shown = text if len(text) <= 24 else f"{text[:20]}… ({len(text)} characters)"
        raise BadInput(f"number {shown} in a rule's expr is too large for a float64") from None


def unquote(text: str) -> str:
    """A PromQL string literal's value."""
    if text.startswith("`"):
        return text[1:-1]
    return re.sub(r"\\(.)", r"\1", text[1:-1])


def _matchers(toks: list[Token], i: int) -> tuple[list[Matcher], int]:
    """Matchers from the token after `{` up to its `}`; returns them and the index of `}`."""
    out = []
    while i < len(toks) and toks[i].text != "}":
        t = toks[i]
        if t.kind == "str" and i + 2 < len(toks) and toks[i + 1].text in ("=", "!=", "=~", "!~"):  # quoted name
            label = unquote(t.text)
        elif t.kind == "ident":
            label = t.text
        else:
            i += 1
            continue
        if i + 2 >= len(toks) or toks[i + 1].text not in ("=", "!=", "=~", "!~") or toks[i + 2].kind != "str":
            i += 1
            continue
        op, val = toks[i + 1], toks[i + 2]
        end = val.end
        out.append(Matcher(label, op.text, unquote(val.text), t.start, end, val.start, val.end))
        i += 3
        if i < len(toks) and toks[i].text == ",":
            i += 1
    return out, i


def parse(expr: str) -> Parsed:
    """Selectors, grouping lists, histogram_quantile levels and comparison thresholds of `expr`."""
    toks = lex(expr)
    out = Parsed(toks, [], [], [], [])
    i = 0
    while i < len(toks):
        t = toks[i]
        nxt = toks[i + 1] if i + 1 < len(toks) else None
        if t.kind == "ident" and t.text in GROUPING and nxt is not None and nxt.text == "(":
            grouping, j = _grouping(toks, i)
            out.groupings.append(grouping)
            i = j + 1
            continue
        if t.kind == "ident" and t.text == "histogram_quantile" and nxt is not None and nxt.text == "(":
            arg = toks[i + 2] if i + 2 < len(toks) else None
            if arg is not None and arg.kind == "num":
                out.quantiles.append(number(arg.text))
        if t.kind == "op" and t.text in COMPARISONS:
            out.thresholds.extend(_thresholds(toks, i))
        selector, j = _selector(toks, i)
        if selector is not None:
            out.selectors.append(selector)
        i = j + 1
    return out


def _grouping(toks: list[Token], i: int) -> tuple[Grouping, int]:
    """The label list of the grouping keyword at `i`; returns it and the index of its `)`."""
    labels = []
    j = i + 2
    while j < len(toks) and toks[j].text != ")":
        if toks[j].kind in ("ident", "str"):
            labels.append((toks[j].text if toks[j].kind == "ident" else unquote(toks[j].text), toks[j].start))
        j += 1
    return Grouping(toks[i].text, labels), j


def _thresholds(toks: list[Token], i: int) -> list[tuple[str, float]]:
    """The numbers next to the comparison at `i` (either side, and after `bool`)."""
    op = toks[i].text
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    out = [
        (op, number(side.text)) for side in (toks[i - 1] if i else None, nxt) if side is not None and side.kind == "num"
    ]
    if nxt is not None and nxt.kind == "ident" and nxt.text == "bool":
        after = toks[i + 2] if i + 2 < len(toks) else None
        if after is not None and after.kind == "num":
            out.append((op, number(after.text)))
    return out


def _selector(toks: list[Token], i: int) -> tuple[Selector | None, int]:
    """The selector starting at `i` (a metric name, or braces without one) and the index of its last token;
    (None, i) when none starts there."""
    t = toks[i]
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if t.kind == "op" and t.text == "{":
        prev = toks[i - 1] if i else None
        if prev is None or not (prev.kind == "ident" and _is_metric(toks, i - 1)):
            matchers, j = _matchers(toks, i + 1)
            name = next((m.value for m in matchers if m.label == "__name__" and m.op == "="), None)
            return Selector(name, t.start, t.start, matchers, (t.start, toks[j].end if j < len(toks) else t.start)), j
        return None, i
    if t.kind == "ident" and _is_metric(toks, i):
        sel = Selector(t.text, t.start, t.end)
        if nxt is not None and nxt.text == "{":
            sel.matchers, j = _matchers(toks, i + 2)
            sel.brace = (nxt.start, toks[j].end if j < len(toks) else nxt.end)
            return sel, j
        return sel, i
    return None, i


def _is_metric(toks: list[Token], i: int) -> bool:
    """An identifier that names a metric: not a function, aggregation, keyword, number word or label."""
    t = toks[i]
    nxt = toks[i + 1] if i + 1 < len(toks) else None
    if t.text.lower() in SPECIAL_NUMBERS or t.text in KEYWORDS:
        return False
    if nxt is not None and nxt.text == "(":
        return False  # a function or an aggregation call
    if t.text in AGGREGATIONS and nxt is not None and nxt.kind == "ident" and nxt.text in ("by", "without"):
        return False
    prev = toks[i - 1] if i else None
    return not (prev is not None and prev.text == "offset")


def replace_spans(expr: str, edits: list[tuple[int, int, str]]) -> str:
    """`expr` with each (start, end) span replaced; spans must not overlap."""
    out = []
    pos = 0
    for start, end, text in sorted(edits):
        if start < pos:
            raise ValueError("overlapping edits")
        out.append(expr[pos:start])
        out.append(text)
        pos = end
    out.append(expr[pos:])
    return "".join(out)
