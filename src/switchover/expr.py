"""A small, safe expression language over ledger fields, for custom gates and task-type rules. Never eval.

    expr    := or ;  or := and ('or' and)* ;  and := not ('and' not)* ;  not := 'not' not | cmp
    cmp     := sum (('=='|'!='|'<'|'<='|'>'|'>='|'in'|'not in') sum)?
    sum     := term (('+'|'-') term)* ;  term := unary (('*'|'/') unary)* ;  unary := '-' unary | atom
    atom    := number | 'string' | "string" | true | false | null | field | field.sub | [literal, ...]
             | func '(' expr (',' expr)* ')' | '(' expr ')'
    func    := startswith | endswith | contains | lower | len | exists

Fields are named up front (an unknown one is refused when the expression is compiled, naming the known ones).
`null` propagates: arithmetic with null is null, an ordering comparison with null is false, and a filter whose
value is null does not match. Division by zero is null. Bounded: 500 characters, nesting 32, lists of 100.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from switchover.lexing import Token, tokenize

MAX_LEN = 500
MAX_DEPTH = 32
MAX_LIST = 100

Row = Mapping[str, Any]
Fn = Callable[[Row], Any]

_TOKEN = re.compile(
    r"(?P<ws>\s+)|(?P<num>\d+(?:\.\d+)?(?:[eE][+-]?\d+)?)|(?P<str>'(?:[^'\\]|\\.)*'|\"(?:[^\"\\]|\\.)*\")"
    r"|(?P<name>[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*)|(?P<op>==|!=|<=|>=|[<>+\-*/(),\[\]])"
)
_KEYWORDS = {"and", "or", "not", "in", "true", "false", "null"}


class ExprError(ValueError):
    """An expression that cannot be compiled; the message names the position and the problem."""


def _tokens(src: str) -> list[Token]:
    """The tokens (kinds num, str, name, op), then an `end` token."""
    return [*tokenize(_TOKEN, src, ExprError), Token("end", "", len(src))]


def _unquote(text: str) -> str:
    body = text[1:-1]
    return re.sub(r"\\(.)", r"\1", body)


def _num(x: Any) -> bool:
    return isinstance(x, int | float) and not isinstance(x, bool)


def _cmp(op: str, a: Any, b: Any) -> bool:
    if op == "==":
        return bool(a == b)
    if op == "!=":
        return bool(a != b)
    if a is None or b is None:
        return False
    if not ((_num(a) and _num(b)) or (isinstance(a, str) and isinstance(b, str))):
        return False  # comparing a number with a string: no order, never true
    if op == "<":
        return bool(a < b)
    if op == "<=":
        return bool(a <= b)
    if op == ">":
        return bool(a > b)
    return bool(a >= b)


def _arith(op: str, a: Any, b: Any) -> Any:
    if not (_num(a) and _num(b)):
        return None
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    if op == "*":
        return a * b
    return None if b == 0 else a / b


def _str_fn(f: Callable[[str, str], bool]) -> Callable[..., Any]:
    def call(a: Any, b: Any) -> Any:
        return f(a, b) if isinstance(a, str) and isinstance(b, str) else False

    return call


_FUNCS: dict[str, tuple[int, Callable[..., Any]]] = {
    "startswith": (2, _str_fn(lambda a, b: a.startswith(b))),
    "endswith": (2, _str_fn(lambda a, b: a.endswith(b))),
    "contains": (2, _str_fn(lambda a, b: b in a)),
    "lower": (1, lambda a: a.lower() if isinstance(a, str) else None),
    "len": (1, lambda a: len(a) if isinstance(a, str | list) else None),
    "exists": (1, lambda a: a is not None),
}


class _Parser:
    def __init__(self, src: str, fields: frozenset[str]) -> None:
        self.toks = _tokens(src)
        self.i = 0
        self.fields = fields
        self.depth = 0
        self.used: set[str] = set()

    def peek(self) -> Token:
        return self.toks[self.i]

    def take(self) -> Token:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def expect(self, text: str) -> None:
        tok = self.take()
        if tok.text != text or tok.kind not in ("op", "name"):
            raise ExprError(f"expected {text!r} at {tok.start + 1}, got {tok.text or 'the end'!r}")

    def nest(self) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ExprError(f"nested deeper than {MAX_DEPTH}")

    def parse(self) -> Fn:
        fn = self.or_()
        tok = self.peek()
        if tok.kind != "end":
            raise ExprError(f"unexpected {tok.text!r} at {tok.start + 1}")
        return fn

    def _bool_chain(self, word: str, operand: Callable[[], Fn], combine: Callable[[Iterable[bool]], bool]) -> Fn:
        """operand (word operand)*: `or` (any) or `and` (all), short-circuiting like Python's."""
        parts = [operand()]
        while self.peek().kind == "name" and self.peek().text == word:
            self.take()
            parts.append(operand())
        if len(parts) == 1:
            return parts[0]
        return lambda r: combine(bool(p(r)) for p in parts)

    def or_(self) -> Fn:
        return self._bool_chain("or", self.and_, any)

    def and_(self) -> Fn:
        return self._bool_chain("and", self.not_, all)

    def _prefix(
        self, kind: str, text: str, operand: Callable[[], Fn], below: Callable[[], Fn], apply: Callable[[Any], Any]
    ) -> Fn:
        """(text)* below: a prefix operator (`not`, unary minus), nested at most MAX_DEPTH deep."""
        if self.peek().kind == kind and self.peek().text == text:
            self.take()
            self.nest()
            inner = operand()
            self.depth -= 1
            return lambda r: apply(inner(r))
        return below()

    def not_(self) -> Fn:
        return self._prefix("name", "not", self.not_, self.cmp, lambda v: not bool(v))

    def cmp(self) -> Fn:
        left = self.sum_()
        tok = self.peek()
        if tok.kind == "op" and tok.text in ("==", "!=", "<", "<=", ">", ">="):
            self.take()
            right = self.sum_()
            op = tok.text
            return lambda r: _cmp(op, left(r), right(r))
        negate = False
        if tok.kind == "name" and tok.text == "not" and self.toks[self.i + 1].text == "in":
            self.take()
            negate = True
            tok = self.peek()
        if tok.kind == "name" and tok.text == "in":
            self.take()
            right = self.sum_()

            def member(r: Row) -> bool:
                seq = right(r)
                found = isinstance(seq, list) and left(r) in seq
                return found != negate

            return member
        return left

    def _arith_chain(self, ops: tuple[str, str], operand: Callable[[], Fn]) -> Fn:
        """operand (op operand)*, left-associative."""
        left = operand()
        while self.peek().kind == "op" and self.peek().text in ops:
            op = self.take().text
            right, prev = operand(), left
            left = (lambda p, q, o: lambda r: _arith(o, p(r), q(r)))(prev, right, op)
        return left

    def sum_(self) -> Fn:
        return self._arith_chain(("+", "-"), self.term)

    def term(self) -> Fn:
        return self._arith_chain(("*", "/"), self.unary)

    def unary(self) -> Fn:
        return self._prefix("op", "-", self.unary, self.atom, lambda v: -v if _num(v) else None)

    def literal_list(self, start: Token) -> Fn:
        items: list[Any] = []
        if self.peek().text != "]":
            while True:
                tok = self.take()
                if tok.kind == "num":
                    items.append(float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text))
                elif tok.kind == "str":
                    items.append(_unquote(tok.text))
                elif tok.kind == "name" and tok.text in ("true", "false", "null"):
                    items.append({"true": True, "false": False, "null": None}[tok.text])
                elif tok.kind == "op" and tok.text == "-" and self.peek().kind == "num":
                    n = self.take().text
                    items.append(-(float(n) if any(c in n for c in ".eE") else int(n)))
                else:
                    raise ExprError(f"a list holds literals only; got {tok.text or 'the end'!r} at {tok.start + 1}")
                if len(items) > MAX_LIST:
                    raise ExprError(f"list at {start.start + 1} has more than {MAX_LIST} items")
                if self.peek().text == ",":
                    self.take()
                    continue
                break
        self.expect("]")
        return lambda r: items

    def atom(self) -> Fn:
        tok = self.take()
        if tok.kind == "num":
            value: Any = float(tok.text) if any(c in tok.text for c in ".eE") else int(tok.text)
            return lambda r: value
        if tok.kind == "str":
            text = _unquote(tok.text)
            return lambda r: text
        if tok.kind == "op" and tok.text == "(":
            self.nest()
            inner = self.or_()
            self.depth -= 1
            self.expect(")")
            return inner
        if tok.kind == "op" and tok.text == "[":
            return self.literal_list(tok)
        if tok.kind == "name":
            if tok.text in ("true", "false", "null"):
                const = {"true": True, "false": False, "null": None}[tok.text]
                return lambda r: const
            if tok.text in _KEYWORDS:
                raise ExprError(f"unexpected {tok.text!r} at {tok.start + 1}")
            if self.peek().text == "(" and tok.text in _FUNCS:
                return self.call(tok)
            if tok.text in _FUNCS:
                raise ExprError(f"{tok.text} is a function: write {tok.text}(...) at {tok.start + 1}")
            return self.field(tok)
        raise ExprError(f"unexpected {tok.text or 'end of expression'!r} at {tok.start + 1}")

    def call(self, tok: Token) -> Fn:
        arity, fn = _FUNCS[tok.text]
        self.expect("(")
        self.nest()
        args = [self.or_()]
        while self.peek().text == ",":
            self.take()
            args.append(self.or_())
        self.depth -= 1
        self.expect(")")
        if len(args) != arity:
            raise ExprError(f"{tok.text}() takes {arity} argument{'s' if arity > 1 else ''}, got {len(args)}")
        return lambda r: fn(*(a(r) for a in args))

    def field(self, tok: Token) -> Fn:
        name = tok.text
        if name not in self.fields:
            known = ", ".join(sorted(self.fields))
            raise ExprError(f"unknown field {name!r} at {tok.start + 1} (known: {known})")
        self.used.add(name)
        return lambda r: r.get(name)


@dataclass(frozen=True)
class Expression:
    """A compiled expression: call it on a row (a mapping of field name → value)."""

    source: str
    fields_used: frozenset[str]
    _fn: Fn

    def __call__(self, row: Row) -> Any:
        return self._fn(row)

    def matches(self, row: Row) -> bool:
        """As a filter: true only for a true value (null and false do not match)."""
        return self._fn(row) is True


def compile_expr(source: str, fields: Iterable[str]) -> Expression:
    """Parse `source` against the known `fields`; ExprError naming the position when it is not valid."""
    if not isinstance(source, str) or not source.strip():
        raise ExprError("an expression must be a non-empty string")
    if len(source) > MAX_LEN:
        raise ExprError(f"longer than {MAX_LEN} characters")
    if any(ord(c) < 32 and c not in "\t\n" for c in source):
        raise ExprError("control characters are not allowed")
    parser = _Parser(source, frozenset(fields))
    fn = parser.parse()
    return Expression(source, frozenset(parser.used), fn)
